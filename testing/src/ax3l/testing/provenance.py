"""The ``run_provenance`` rows of a history a test wrote by hand (events only, as an older
release left them): what ``ax3l-db upgrade``'s revision 0003 writes, by the same rule."""

from __future__ import annotations

from ax3l.shared.db import run_provenance
from ax3l.testing.databases import TestDatabases


def backfilled(databases: TestDatabases) -> int:
    """Write the rows of the runs of Ax3l's history that have none; the number written."""
    conn = databases.connect("admin", databases.ax3l_db)
    try:
        with conn.cursor() as cur:
            return run_provenance.backfill(cur)
    finally:
        conn.close()
