"""Test data for the report server: real SnakeLab runs and an experiment history replayed over them.

Runs come from ``data/snakelab-runs.csv`` (the user's real SnakeLab) and are inserted
into SnakeLab's tables with SnakeLab's credentials. Events are written through
``ax3l.shared.db.event_log.EventLog``, the writer every service uses, replaying what Ax3l's
loop logs for each run: a checkpoint and a conversation with prompts and replies for a
proposal, the comparison, golden promotions (with their experiment_highscores rows) and seed
rotations. Every value a test expects can be recomputed from the ``Replay`` it returns.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ax3l.reports.models.runs import TUNED_COLUMNS
from ax3l.shared.config_schema import ConfigSchema, cached_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.event_models import (
    ConfigurationCompared,
    ConversationEnded,
    ConversationStarted,
    GoldenConfigCreated,
    GoldenConfigSeedIncremented,
    PromptSent,
    ProposalAccepted,
    ReplyReceived,
    RoundRobinCheckpoint,
    SeedRotationStarted,
    SimulationCompleted,
    SimulationStarted,
    SimulationSubmitted,
    ToolRequestReceived,
)
from ax3l.shared.registry import ENTRIES, PARAMETER_ORDER
from ax3l.testing.scripted_llm import completion, tool_call
from ax3l.testing.snakelab_export import ExportedRun, read_export

REPO = Path(__file__).resolve().parents[3]
RUNS_CSV = REPO / "data" / "snakelab-runs.csv"
# The tuned values' config paths, in the order of TUNED_COLUMNS (the registry's).
PATHS = tuple(path for entry in ENTRIES for path in entry.paths)

HOSTILE = '<script>window.__pwned = true</script><img src=x onerror="window.__pwned=true">'


# The user's real runs, as the adoption tests read them (one reader of the CSV).
RealRun = ExportedRun


def read_runs(limit: int | None = None) -> list[RealRun]:
    """The first ``limit`` runs of the user's CSV (all when None), in submission order."""
    runs = read_export(cached_schema(None), RUNS_CSV)
    return runs if limit is None else runs[:limit]


def config_hash(schema: ConfigSchema, flat: dict[str, Any]) -> str:
    text = json.dumps(schema.unflatten(flat), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def snapshot(score: int, width: int = 20, height: int = 20) -> dict[str, Any]:
    """A plausible best-game board: a snake of length score+3 coiled from the top-left."""
    cells: list[list[int]] = []
    for y in range(height):
        xs = range(width) if y % 2 == 0 else range(width - 1, -1, -1)
        cells.extend([x, y] for x in xs)
    length = min(score + 3, len(cells) - 1)
    snake = list(reversed(cells[:length]))
    return {
        "version": 1,
        "episode": 1000 + score,
        "step": 50 * score,
        "board": {
            "grid_size": [width, height],
            "snake_head": snake[0],
            "snake_body": snake[1:],
            "food": cells[length],
            "direction": [1, 0] if (length - 1) // width % 2 == 0 else [-1, 0],
            "score": score,
        },
    }


def insert_runs(connection: Any, runs: list[RealRun], episodes_for: int = 3) -> None:
    """SnakeLab rows for ``runs`` (a pymysql connection as the snakelab user)."""
    schema = cached_schema(None)
    start = datetime(2026, 9, 15, 8, 50)
    columns = ", ".join(schema.columns)
    with connection.cursor() as cur:
        for run in runs:
            created = start + timedelta(minutes=5 * (run.order - 1))
            completed = run.completed_at if run.status == "completed" else None
            cur.execute(
                "INSERT INTO simulation_runs (run_id, project_version, config_hash, status,"
                " episode_count, high_score, created_at, started_at, completed_at,"
                " high_score_snapshot) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    run.run_id,
                    run.project_version,
                    config_hash(schema, run.flat),
                    run.status,
                    int(run.flat["epochs"]) if run.status == "completed" else 700,
                    run.high_score,
                    created,
                    created,
                    completed,
                    json.dumps(snapshot(run.high_score)) if run.status == "completed" else None,
                ),
            )
            cur.execute(
                f"INSERT INTO configurations (run_id, {columns})"
                f" VALUES (%s, {', '.join(['%s'] * len(schema.columns))})",
                (run.run_id, *(run.flat[c] for c in schema.columns)),
            )
        for run in runs[:episodes_for]:
            cur.executemany(
                "INSERT INTO simulation_episodes (run_id, episode, score, steps, epsilon, loss)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                [
                    (run.run_id, e, (e * run.high_score) // 1500, 40 + e % 90, 0.96**e, 0.5)
                    for e in range(1, 1501)
                ],
            )


@dataclass
class Replay:
    """What the replayed history contains, for tests to compare pages against."""

    goldens: list[tuple[int, RealRun, int]] = field(default_factory=list)  # (event, run, sims)
    prompt_ids: list[int] = field(default_factory=list)
    reply_ids: list[int] = field(default_factory=list)
    hostile_reply_id: int = 0
    hostile_prompt_id: int = 0
    parameters_prompted: set[str] = field(default_factory=set)
    proposers: dict[str, int] = field(default_factory=dict)  # proposer -> accepted proposals
    conversations: dict[str, int] = field(default_factory=dict)  # proposer -> conversations
    event_count: int = 0


def changed_entry(golden: dict[str, Any], run: dict[str, Any]) -> int | None:
    """The round-robin index of the only entry whose columns differ, else None."""
    changed = [
        index
        for index, entry in enumerate(ENTRIES)
        if any(golden[column] != run[column] for column in entry.columns)
    ]
    return changed[0] if len(changed) == 1 else None


def reply_json(entry_index: int, run: RealRun, reasoning: str) -> dict[str, Any]:
    entry = ENTRIES[entry_index]
    values = [run.flat[column] for column in entry.columns]
    arguments = (
        {"value": values[0]}
        if entry.kind == "single"
        else dict(zip(entry.value_names, values, strict=True))
    )
    message = {
        "role": "assistant",
        "content": "",
        "reasoning_content": reasoning,
        "tool_calls": [tool_call(entry.tool_name, arguments, f"call_{run.order}")],
    }
    return completion(
        message,
        "tool_calls",
        completion_id=f"chatcmpl-{run.order}",
        model="Qwen3.5-4B-Q4_K_M.gguf",
        usage={
            "prompt_tokens": 480 + run.order,
            "completion_tokens": 310,
            "total_tokens": 790 + run.order,
        },
        timings={
            "prompt_n": 480 + run.order,
            "prompt_ms": 912.5,
            "prompt_per_second": 526.0,
            "predicted_n": 310,
            "predicted_ms": 20650.0,
            "predicted_per_second": 15.01,
        },
    )


async def _write_completed(log: EventLog, cur: Any, run: RealRun, submitted: int | None) -> None:
    """``simulation_completed`` for ``run``, under its ``simulation_submitted`` when given."""
    await log.write(
        cur,
        SimulationCompleted(run_id=run.run_id, high_score=run.high_score),
        process_id=run.run_id,
        parent_event_id=submitted,
    )


async def _write_golden(
    log: EventLog,
    cur: Any,
    replay: Replay,
    run: RealRun,
    position: int,
    reason: str,
    parent: int | None = None,
    **more: Any,
) -> None:
    """``golden_config_created`` for ``run``, the experiment's ``position``th simulation, with
    its high-score row (``more`` ends the content); ``replay`` records it."""
    event = await log.write(
        cur,
        GoldenConfigCreated(
            run_id=run.run_id,
            config=cached_schema(None).unflatten(run.flat),
            high_score=run.high_score,
            seed=run.seed,
            simulations=position,
            reason=reason,
            **more,
        ),
        process_id=run.run_id,
        parent_event_id=parent,
        highscore=HighscoreRow(position, run.high_score, run.seed),
    )
    replay.goldens.append((event, run, position))


async def replay_history(db: Database, runs: list[RealRun]) -> Replay:
    """Write the events Ax3l's loop would have logged for ``runs``; returns what was written."""
    schema = cached_schema(None)
    log = EventLog(db)
    replay = Replay()
    first = runs[0]
    golden, golden_score = first, first.high_score
    turn = 0
    async with db.transaction() as cur:
        submitted = await log.write(
            cur,
            SimulationSubmitted(run_id=first.run_id, config=schema.unflatten(first.flat)),
            process_id=first.run_id,
        )
        await _write_completed(log, cur, first, submitted)
        await _write_golden(log, cur, replay, first, 1, "Initial configuration (schema defaults).")
    for position, run in enumerate(runs[1:], start=2):
        async with db.transaction() as cur:
            if run.seed != golden.seed:
                await log.write(
                    cur, SeedRotationStarted(config=schema.unflatten(run.flat), seed=run.seed)
                )
                await log.write(
                    cur,
                    GoldenConfigSeedIncremented.model_validate(
                        {"from": golden.seed, "to": run.seed}
                    ),
                )
                await log.write(cur, SimulationSubmitted(run_id=run.run_id), process_id=run.run_id)
                await _write_completed(log, cur, run, None)
                await _write_golden(
                    log, cur, replay, run, position, f"Fresh baseline for seed {run.seed}."
                )
                golden, golden_score = run, run.high_score
                continue
            index = changed_entry(golden.flat, run.flat)
            index = turn if index is None else index
            turn = (index + 1) % len(ENTRIES)
            entry = ENTRIES[index]
            proposer = "llm" if run.seed == 1970 else "tpe"
            named: dict[str, Any] = {"proposer": proposer}
            conversation = str(uuid.uuid4())
            await log.write(
                cur, RoundRobinCheckpoint(parameter_order=list(PARAMETER_ORDER), index=index)
            )
            # Most conversations name their proposer; for every fifth only its proposal does.
            await log.write(
                cur,
                ConversationStarted(parameter=entry.name, **(named if position % 5 else {})),
                process_id=conversation,
            )
            context = await log.write(
                cur,
                PromptSent(
                    text="You are tuning the Snake agent of Patrick Loeber's \"Train an AI to Play"
                    ' Snake".\nYou choose the parameters.'
                ),
                process_id=conversation,
                source_name="ProjectContext",
                parameter=entry.name,
            )
            prompt = await log.write(
                cur,
                PromptSent(
                    text=f"The golden {entry.name} scored {golden_score}.\n"
                    f"Comparable runs:\n{json.dumps({'golden_run_id': golden.run_id})}\n"
                    f"Choose one untested value through {entry.tool_name}."
                ),
                process_id=conversation,
                source_name="ComparisonSingle"
                if entry.kind == "single"
                else "ComparisonRewardPair",
                parameter=entry.name,
            )
            reply = await log.write(
                cur,
                ReplyReceived.model_validate(
                    reply_json(index, run, f"Trying another {entry.name} after {golden_score}.")
                ),
                process_id=conversation,
                parent_event_id=prompt,
            )
            replay.prompt_ids += [context, prompt]
            replay.reply_ids.append(reply)
            replay.parameters_prompted.add(entry.name)
            await log.write(
                cur, ToolRequestReceived(method=entry.tool_name), process_id=conversation
            )
            values = [run.flat[column] for column in entry.columns]
            await log.write(
                cur,
                ProposalAccepted(
                    parameter=entry.name,
                    values=dict(zip(entry.value_names, values, strict=True)),
                    changes=dict(zip(entry.paths, values, strict=True)),
                    run_id=run.run_id,
                    golden_run_id=golden.run_id,
                    **(named if position % 5 == 0 else {}),
                ),
                process_id=conversation,
            )
            replay.proposers[proposer] = replay.proposers.get(proposer, 0) + 1
            replay.conversations[proposer] = replay.conversations.get(proposer, 0) + 1
            submitted = await log.write(
                cur, SimulationSubmitted(run_id=run.run_id), process_id=run.run_id
            )
            await log.write(
                cur,
                ConversationEnded(
                    parameter=entry.name, outcome="accepted", run_id=run.run_id, **named
                ),
                process_id=conversation,
            )
            if run.status != "completed":
                await log.write(cur, SimulationStarted(run_id=run.run_id), process_id=run.run_id)
                continue  # still running: nothing compared yet
            await _write_completed(log, cur, run, submitted)
            better = run.high_score > golden_score
            changes = "; ".join(
                f"{leaf.path}: {golden.flat[leaf.column]} -> {run.flat[leaf.column]}"
                for leaf in schema.leaves
                if golden.flat[leaf.column] != run.flat[leaf.column]
            )
            reason = (
                f"High score: {run.high_score} {'>' if better else '<='} {golden_score}; {changes}."
            )
            compared = await log.write(
                cur,
                ConfigurationCompared(
                    golden_run_id=golden.run_id,
                    latest_run_id=run.run_id,
                    current_golden_run_id=run.run_id if better else golden.run_id,
                    reason=reason,
                ),
            )
            if better:
                await _write_golden(
                    log, cur, replay, run, position, reason, compared, proposer=proposer
                )
                golden, golden_score = run, run.high_score
    await add_hostile_conversation(log, replay)
    row = await db.fetchone("SELECT COUNT(*) AS n FROM events")
    replay.event_count = int(row["n"]) if row else 0
    return replay


async def add_hostile_conversation(log: EventLog, replay: Replay) -> None:
    """A conversation whose prompt and reply carry markup that must show as text."""
    conversation = str(uuid.uuid4())
    async with log.db.transaction() as cur:
        await log.write(
            cur, ConversationStarted(parameter="gamma", proposer="llm"), process_id=conversation
        )
        replay.conversations["llm"] = replay.conversations.get("llm", 0) + 1
        replay.hostile_prompt_id = await log.write(
            cur,
            PromptSent(text=f"Choose gamma. {HOSTILE}"),
            process_id=conversation,
            source_name="ComparisonSingle",
            parameter="gamma",
        )
        reply = {
            "choices": [
                {
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": f"I refuse {HOSTILE}",
                        "reasoning_content": f"Thinking about {HOSTILE}",
                        "tool_calls": [
                            {
                                "type": "function",
                                "function": {
                                    "name": "submit_single_value",
                                    "arguments": json.dumps({"value": HOSTILE}),
                                },
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46},
            "timings": {"predicted_per_second": 14.2},
        }
        replay.hostile_reply_id = await log.write(
            cur,
            ReplyReceived.model_validate(reply),
            process_id=conversation,
            parent_event_id=replay.hostile_prompt_id,
        )
        await log.write(
            cur, ConversationEnded(reason=HOSTILE), process_id=conversation, level="ERROR"
        )


def expected_rows(experiment: Any) -> list[dict[str, Any]]:
    """What the runs table should hold for each run of ``experiment`` (its ``runs`` and
    ``replay``), recomputed from the CSV the way ``replay_history`` logged it."""
    goldens = {run.run_id for _, run, _ in experiment.replay.goldens}
    rows = []
    golden = experiment.runs[0]
    golden_score = golden.high_score
    turn = 0
    for position, run in enumerate(experiment.runs, start=1):
        proposer = entry = challenged = None
        if position > 1 and run.seed != golden.seed:
            golden, golden_score = run, run.high_score
        elif position > 1:
            index = changed_entry(golden.flat, run.flat)
            index = turn if index is None else index
            turn = (index + 1) % len(ENTRIES)
            proposer, entry = ("llm" if run.seed == 1970 else "tpe"), ENTRIES[index].name
            challenged = golden
            if run.status == "completed" and run.high_score > golden_score:
                golden, golden_score = run, run.high_score
        differing = [
            (path, column)
            for path, column in (("seed", "seed"), *zip(PATHS, TUNED_COLUMNS, strict=True))
            if challenged is not None and challenged.flat[column] != run.flat[column]
        ]
        rows.append(
            {
                "id": position,
                "run_id": run.run_id,
                "seed": run.seed,
                "status": run.status,
                "high_score": run.high_score,
                **{column: run.flat[column] for column in TUNED_COLUMNS},
                "proposer": proposer,
                "entry": entry,
                "golden": run.run_id in goldens,
                "golden_run_id": challenged.run_id if challenged else None,
                "golden_high_score": challenged.high_score if challenged else None,
                "score_difference": run.high_score - challenged.high_score if challenged else None,
                "changes": "; ".join(
                    f"{path}: {challenged.flat[column]} -> {run.flat[column]}"
                    for path, column in differing
                )
                if challenged and differing
                else None,
                "changed": [column for _, column in differing],
            }
        )
    return rows
