"""Reads of Ax3l's own events: the loop's whole memory lives in them.

The reads are the shared typed ones (``ax3l.shared.db.event_reads``): ``latest(db,
ProposalAccepted)`` returns the row with its ``ProposalAccepted`` model. Kept here so the loop's
modules keep one import.
"""

from __future__ import annotations

from ax3l.shared.db.event_reads import StoredEvent, latest, select

__all__ = ["StoredEvent", "latest", "select"]
