"""Alembic's environment for Ax3l's database: online only, on the connection that
``ax3l.shared.db.upgrades`` hands over, one transaction per revision (so a revision's data
changes and its version row commit together)."""

from __future__ import annotations

from alembic import context

from ax3l.shared.db.upgrades import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    version_table=VERSION_TABLE,
    transaction_per_migration=True,
)
with context.begin_transaction():
    context.run_migrations()
