"""A big event history made fast, for the benches: ``fill_events`` writes ``events`` events
with messages by doubling them server-side, and makes every 1000th a golden with its
``experiment_highscores`` row, so the tables have the shape (not the meaning) of a long
experiment's."""

from __future__ import annotations

from typing import Any

from ax3l.testing.databases import TestDatabases

CONTENT = (
    '{"golden_run_id": "00000000-0000-4000-8000-000000000000", "latest_run_id":'
    ' "00000000-0000-4000-8000-000000000001", "current_golden_run_id":'
    ' "00000000-0000-4000-8000-000000000000", "reason": "High score: 41 > 40;'
    ' training.gamma: 0.96 -> 0.97.", "parameter": "gamma", "index": 4, "high_score": 41,'
    ' "golden_high_score": 40, "seed": 1970, "decision": "retained"}'
)
NAMES = (
    "round_robin_checkpoint",
    "conversation_started",
    "prompt_sent",
    "reply_received",
    "proposal_accepted",
    "simulation_submitted",
    "simulation_completed",
    "configuration_compared",
    "golden_config_retained",
    "conversation_ended",
)


def fill_events(databases: TestDatabases, events: int, *, parameter: bool = True) -> None:
    """``events`` events in ``databases``' Ax3l tables; ``parameter=False`` for release 1's
    tables, whose events have no ``parameter`` column."""
    columns = "occurred_at, name, category, log_level, process_id" + (
        ", parameter" if parameter else ""
    )
    conn = databases.connect("admin", databases.ax3l_db)
    try:
        with conn.cursor() as cur:
            seed: list[Any] = [
                (NAMES[i % len(NAMES)], "Configuration", "INFO", f"p-{i}")
                + (("gamma",) if parameter else ())
                for i in range(min(1000, events))
            ]
            marks = ", ".join(["%s"] * len(seed[0]))
            cur.executemany(f"INSERT INTO events ({columns}) VALUES (NOW(6), {marks})", seed)
            while True:
                cur.execute("SELECT COUNT(*) FROM events")
                have = int(cur.fetchone()[0])
                if have >= events:
                    break
                cur.execute(
                    f"INSERT INTO events ({columns}) SELECT {columns} FROM events"
                    f" ORDER BY event_id LIMIT {min(have, events - have)}"
                )
            cur.execute("INSERT INTO event_messages SELECT event_id, %s FROM events", (CONTENT,))
            cur.execute(
                "UPDATE events SET name = 'golden_config_created' WHERE event_id % 1000 = 0"
            )
            cur.execute(
                "INSERT INTO experiment_highscores SELECT event_id, event_id DIV 10, 40, 1970"
                " FROM events WHERE name = 'golden_config_created'"
            )
    finally:
        conn.close()
