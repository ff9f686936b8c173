"""Alembic's script directory for Ax3l's database (``ax3l.shared.db.upgrades``)."""
