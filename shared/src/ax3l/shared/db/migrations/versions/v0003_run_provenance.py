"""Who produced each run, written once: the ``run_provenance`` table, back-filled from the events.

Creates the table (``ax3l.shared.db.tables.RUN_PROVENANCE``) and fills it for the history the
database holds with the rule every view used to apply at read time
(``ax3l.shared.db.run_provenance.backfill``); from then on the writers add a row in the
transaction of each event that makes a run. MySQL commits the ``CREATE TABLE`` at once; the
rows commit together with the revision row, so a kill mid-way leaves an empty table at
revision 0002, and running the upgrade again fills it (a run that has its row keeps it).
"""

from __future__ import annotations

from typing import Any

from alembic import op

from ax3l.shared.db import run_provenance
from ax3l.shared.db.tables import RUN_PROVENANCE, ddl

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    connection: Any = op.get_bind().connection.driver_connection  # pymysql's, in the transaction
    with connection.cursor() as cur:
        cur.execute(ddl(RUN_PROVENANCE))
        run_provenance.backfill(cur)
        cur.execute("UPDATE ax3l_meta SET value = '3' WHERE name = 'schema_version'")
