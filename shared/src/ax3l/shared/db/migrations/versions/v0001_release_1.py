"""Release 1: the tables as ``CREATE TABLE IF NOT EXISTS`` made them, with the version row
``ax3l_meta.schema_version = '1'`` and no revision table.

Nothing to change: this revision only checks that the database is one (the tables every
release-1 database had), so that ``ax3l-db upgrade`` never stamps a revision on something
else. ``ax3l.shared.db.upgrades`` reads such a database as being at this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

RELEASE_1_TABLES = ("events", "event_messages", "experiment_highscores", "ax3l_meta")


def upgrade() -> None:
    present = set(sa.inspect(op.get_bind()).get_table_names())
    missing = [table for table in RELEASE_1_TABLES if table not in present]
    if missing:
        raise RuntimeError("not a release-1 Ax3l database: no table " + ", ".join(missing))
