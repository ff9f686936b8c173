"""Versioned schema: the database's revision lives in ``ax3l_alembic_version``, and
``ax3l_meta.schema_version`` becomes '2'.

Release 1 compares that row with its own '1' and refuses any other value, so once upgraded
the database is safe from an older Ax3l writing into it. The update commits together with
the new revision row (one transaction per revision): a kill leaves either both or neither.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.get_bind().execute(sa.text("UPDATE ax3l_meta SET value = '2' WHERE name = 'schema_version'"))
