"""An Ax3l database as the user's running system has it (only ``events``, ``event_messages`` and
``experiment_highscores``, none of Ax3l's own tables or indexes) renders without migration."""

from __future__ import annotations

import json
from contextlib import closing

from ax3l.shared.db import tables

# The user's tables exactly as the running system created them: its three indexes on events,
# nothing else.
USER_DDL = [tables.ddl(table) for table in tables.USER_TABLES]


def _recreate_as_the_user_has_it(dbs) -> None:
    with closing(dbs.connect("admin", dbs.ax3l_db)) as conn, conn.cursor() as cur:
        cur.execute("SET FOREIGN_KEY_CHECKS = 0")
        cur.execute("SHOW TABLES")
        for (table,) in cur.fetchall():
            cur.execute(f"DROP TABLE `{table}`")
        cur.execute("SET FOREIGN_KEY_CHECKS = 1")
        for ddl in USER_DDL:
            cur.execute(ddl)
        rows = [
            ("2026-09-15 08:50:00", "conversation_started", "Conversation", None, None, None),
            (
                "2026-09-15 08:50:01",
                "prompt_sent",
                "Conversation",
                None,
                "ProjectContext",
                "gamma",
            ),
            ("2026-09-15 08:50:30", "reply_received", "Conversation", 2, None, None),
            ("2026-09-15 08:55:24", "golden_config_created", "Configuration", None, None, None),
        ]
        for occurred, name, category, parent, source, parameter in rows:
            cur.execute(
                "INSERT INTO events (occurred_at, name, category, log_level, process_id,"
                " parent_event_id, source_name, parameter, ax3l_version)"
                " VALUES (%s, %s, %s, 'INFO', 'c-1', %s, %s, %s, 'ax3l-0.9')",
                (occurred, name, category, parent, source, parameter),
            )
        contents = {
            1: json.dumps({"parameter": "gamma"}),
            2: "Tune gamma, please.",
            3: json.dumps(
                {
                    "choices": [
                        {
                            "message": {
                                "tool_calls": [
                                    {
                                        "function": {
                                            "name": "submit_single_value",
                                            "arguments": '{"value": 0.97}',
                                        }
                                    }
                                ]
                            }
                        }
                    ]
                }
            ),
            # An older golden content: fewer fields than today's.
            4: json.dumps({"run_id": "r-1", "high_score": 38, "reason": "initial"}),
        }
        for event_id, content in contents.items():
            cur.execute(
                "INSERT INTO event_messages (event_id, content) VALUES (%s, %s)",
                (event_id, content),
            )
        cur.execute(
            "INSERT INTO experiment_highscores (event_id, simulations, score, seed)"
            " VALUES (4, 1, 38, 1970)"
        )


def _schema(dbs) -> tuple[set[str], set[tuple[str, str]]]:
    with closing(dbs.connect("admin", dbs.ax3l_db)) as conn, conn.cursor() as cur:
        cur.execute("SHOW TABLES")
        names = {row[0] for row in cur.fetchall()}
        cur.execute(
            "SELECT table_name, index_name FROM information_schema.statistics"
            " WHERE table_schema = %s",
            (dbs.ax3l_db,),
        )
        return names, {(t, i) for t, i in cur.fetchall()}


async def test_user_tables_render_without_migration(snakelab_tables, make_client):
    """Every page and the API work on the user's three tables; nothing is created or altered."""
    dbs = snakelab_tables
    _recreate_as_the_user_has_it(dbs)
    before = _schema(dbs)
    assert before[0] == {"events", "event_messages", "experiment_highscores"}
    async with make_client(dbs) as http:
        for path in (
            "/",
            "/events",
            "/events?category=Configuration",
            "/runs",
            "/api/runs",
            "/api/runs/export.parquet",
            "/plots",
            "/plots/history",
            "/plots/slice",
            "/plots/parallel",
            "/plots/importance",
            "/events?event=prompt_sent&parameter=gamma",
            "/events/2",
            "/events/3",
            "/events/4",
            "/experiment-highscores",
            "/golden-configurations",
            "/score-distribution",
            "/proposers",
            "/api/status",
            "/ready",
        ):
            reply = await http.get(path)
            assert reply.status_code == 200, (path, reply.text[:500])
        prompts = (await http.get("/events", params={"event": "prompt_sent"})).text
        assert '<td class="parameter">gamma</td>' in prompts
        status = (await http.get("/api/status")).json()
        assert status["golden_high_score"] == 38 and status["current_seed"] == 1970
        points = (await http.get("/api/highscores")).json()["points"]
        assert [(p["simulations"], p["score"], p["seed"], p["run_id"]) for p in points] == [
            (1, 38, 1970, "r-1")
        ]
        reply = (await http.get("/api/events/3")).json()["reply"]
        assert reply["tool_calls"] == [
            {"name": "submit_single_value", "arguments": {"value": 0.97}}
        ]
    assert _schema(dbs) == before
