"""``ax3l-db adopt``: an existing SnakeLab history taken, on purpose, as the experiment's past.

The first start needs an empty SnakeLab (the specification's "Initial Experiment Startup";
docs/operations.md, "Adopting an existing SnakeLab"): with runs in SnakeLab and no experiment
in Ax3l's database, the orchestrator refuses to start (``refusal``) and names the two ways on,
a fresh SnakeLab database or this command.

Adopting writes one event: ``golden_config_created`` with ``kind: adopted`` for the best
completed run of the newest seed (the seed of the latest completed, scored run; ties go to the
earliest run, as a later equal score would not have replaced it), with its
``experiment_highscores`` row holding SnakeLab's run count at adoption. Nothing else is needed:
the round robin starts at hidden size because there is no checkpoint yet, and the duplicate
checks and the exhaustion skips read all of SnakeLab's runs, the adopted ones included.

Crash safety: the event, its message and its score row commit in one transaction, after a
locking re-check that no golden exists; a kill leaves nothing or the whole adoption, and running
the command again after an adoption only reports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ax3l.shared.config_schema import ConfigInvalid, ConfigSchema
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.database import Database, tables_present
from ax3l.shared.db.errors import DatabaseMisconfigured
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.db.reads import current_golden
from ax3l.shared.db.snakelab_reads import (
    SeedSummary,
    SnakeLabRuns,
)
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.shared.registry import ENTRIES
from ax3l.shared.settings import Settings

KIND = "adopted"
SEEDING_SOURCE = "InitialSeeding"  # ``ax3l.orchestrator.seeding``'s source name


class AdoptionNeeded(DatabaseMisconfigured):
    """SnakeLab has runs, Ax3l no experiment: the user chooses a fresh SnakeLab or adoption."""


class AdoptionRefused(RuntimeError):
    """``ax3l-db adopt`` cannot adopt (nothing to adopt, or Ax3l has an experiment already)."""


@dataclass(frozen=True)
class Adoption:
    """What adopting takes (``plan``) or took (``adopt``)."""

    runs: int  # SnakeLab's runs when planned
    seeds: list[SeedSummary]  # in the order they were first used
    run_id: str
    position: int  # the golden run's place in submission order, from 1
    high_score: int
    seed: int
    config: dict[str, Any]
    event_id: int | None = None  # the golden event, once written
    simulations: int | None = None  # the run count written with it
    already: bool = False  # an earlier ``adopt`` had written it

    def describe(self) -> list[str]:
        """What is (or would be) adopted, as lines for the terminal."""
        seeds = ", ".join(
            f"{s.seed} ({s.runs} runs, {s.completed} completed, best {s.best})" for s in self.seeds
        )
        tuned = ", ".join(
            f"{path} {_value(self.config, path)}" for entry in ENTRIES for path in entry.paths
        )
        count = self.runs if self.simulations is None else self.simulations
        lines = [f"SnakeLab has {count} runs; seeds, in order of first use: {seeds}."]
        if self.already:
            lines = [f"SnakeLab had {count} runs at the adoption."]
        return [
            *lines,
            f"Golden configuration: run {self.run_id} (run {self.position} of {count}), high"
            f" score {self.high_score} on seed {self.seed}, the best completed run of the"
            " newest seed.",
            f"Its tuned values: {tuned}.",
            f"Recorded as golden_config_created (kind {KIND}) with its experiment_highscores"
            f" row ({count} runs, score {self.high_score}, seed {self.seed}).",
            "The round robin starts at hidden_size; duplicate checks and exhaustion count all"
            f" {count} runs.",
        ]


def _value(config: dict[str, Any], path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


async def own_experiment_started(db: Database) -> str | None:
    """Why Ax3l's database already holds an experiment of its own (a golden, a seeding
    submission, a checkpoint or a submission intent), or None."""
    if not await tables_present(db, ["events"], "looking for Ax3l's events table"):
        return None
    row = await db.fetchone(
        "SELECT name FROM events WHERE name IN ('golden_config_created',"
        " 'round_robin_checkpoint') OR (name = 'simulation_submitted' AND source_name = %s)"
        " LIMIT 1",
        (SEEDING_SOURCE,),
        doing="looking for Ax3l's own experiment",
    )
    if row is not None:
        return f"Ax3l's database has a {row['name']} event"
    intents = await tables_present(db, ["submission_intents"], "looking for Ax3l's intents table")
    if intents and await db.fetchone(
        "SELECT intent_id FROM submission_intents LIMIT 1",
        doing="looking for Ax3l's submission intents",
    ):
        return "Ax3l's database has submission intents"
    return None


async def refusal(db: Database, seeding_config: Mapping[str, Any]) -> str | None:
    """The orchestrator's start-up refusal: the message when SnakeLab has runs and Ax3l has no
    experiment of its own, else None.

    Runs of ``seeding_config`` alone (SnakeLab's 26 columns) are no reason: they are what a
    seeding that was killed before it recorded its submission leaves, and seeding reuses them.
    """
    if await own_experiment_started(db) is not None:
        return None
    runs = await SnakeLabRuns(db).count()
    if runs == 0:
        return None
    seeding_runs = await SnakeLabRuns(db).matching(
        seeding_config, ("seed",), doing="looking for runs of the seeding configuration"
    )
    if len(seeding_runs) == runs:
        return None
    settings = db.settings
    return (
        f"SnakeLab's database {settings.snakelab_db_name} already has runs ({runs}) and Ax3l's"
        f" database {settings.db_name} has no experiment; the first start needs an empty"
        " SnakeLab. Either point Ax3l at a fresh SnakeLab database (AX3L_SNAKELAB_DB_NAME), or"
        " take the existing runs as the experiment's past with `ax3l-db adopt` (see first"
        " what it would adopt with `ax3l-db adopt --dry-run`)"
    )


async def _adopted(db: Database) -> Adoption | None:
    """The adoption an earlier run of ``adopt`` wrote, if the golden is it."""
    if not await tables_present(db, ["events"], "looking for Ax3l's events table"):
        return None
    golden = await current_golden(db)
    if golden is None:
        return None
    event_id, content = golden
    first = await db.fetchone(
        "SELECT MIN(event_id) AS first FROM events WHERE name = 'golden_config_created'",
        doing="reading the first golden configuration",
    )
    first_id = None if first is None else first["first"]
    if first_id is None or int(first_id) != event_id or content.kind != KIND:
        return None
    return Adoption(
        runs=content.simulations,
        seeds=[],
        run_id=content.run_id,
        position=await SnakeLabRuns(db).position(content.run_id),
        high_score=content.high_score,
        seed=content.seed,
        config=content.config,
        event_id=event_id,
        simulations=content.simulations,
        already=True,
    )


async def plan(db: Database, schema: ConfigSchema) -> Adoption:
    """What ``adopt`` would write; ``AdoptionRefused`` says why it cannot."""
    own = await own_experiment_started(db)
    if own is not None:
        raise AdoptionRefused(
            f"{own}: Ax3l already has an experiment, and adopting takes SnakeLab's history only"
            " into an Ax3l database without one (to start over from SnakeLab's runs: back up,"
            " `ax3l-db reset-events --yes`, then `ax3l-db adopt`)"
        )
    runs = await SnakeLabRuns(db).count()
    if runs == 0:
        raise AdoptionRefused(
            f"SnakeLab's database {db.settings.snakelab_db_name} has no runs: nothing to adopt"
            " (start the orchestrator: it seeds from the schema's defaults)"
        )
    best = await SnakeLabRuns(db).best_of_newest_seed()
    if best is None:
        raise AdoptionRefused(
            f"none of SnakeLab's {runs} runs completed with a high score: nothing to adopt yet"
        )
    run_id = str(best["run_id"])
    run = await SnakeLabRuns(db).with_config(schema, run_id)
    if run is None:
        raise AdoptionRefused(f"run {run_id} vanished from SnakeLab while it was read")
    try:
        config = schema.validate(run["config"])
    except ConfigInvalid as exc:
        raise AdoptionRefused(
            f"the best run of the newest seed, {run_id}, does not fit the configuration schema"
            f" Ax3l uses ({exc}): check AX3L_SCHEMA_PATH"
        ) from exc
    return Adoption(
        runs=runs,
        seeds=await SnakeLabRuns(db).seed_summaries(),
        run_id=run_id,
        position=int(best["position"]),
        high_score=int(best["high_score"]),
        seed=int(best["seed"]),
        config=config,
    )


async def adopt(db: Database, schema: ConfigSchema, log: EventLog) -> Adoption:
    """Adopt SnakeLab's history (once: a second call returns the first adoption)."""
    earlier = await _adopted(db)
    if earlier is not None:
        return earlier
    chosen = await plan(db, schema)
    async with db.transaction("adopting SnakeLab's history") as cur:
        # The lock serialises two adoptions: the second one waits here, then sees the first.
        await cur.execute("SELECT value FROM ax3l_meta WHERE name = 'schema_version' FOR UPDATE")
        await cur.fetchall()
        await cur.execute(
            "SELECT event_id FROM events WHERE name = 'golden_config_created' LIMIT 1 FOR UPDATE"
        )
        raced = await cur.fetchone() is not None
        if not raced:
            simulations = await SnakeLabRuns(db).count(cur)
            content = GoldenConfigCreated(
                run_id=chosen.run_id,
                config=chosen.config,
                high_score=chosen.high_score,
                seed=chosen.seed,
                simulations=simulations,
                reason=(
                    f"Adopted SnakeLab's existing history of {simulations} runs: run"
                    f" {chosen.run_id} scored {chosen.high_score}, the best completed run of"
                    f" the newest seed, {chosen.seed}."
                ),
                kind=KIND,
            )
            event_id = await log.write(
                cur,
                content,
                process_id=chosen.run_id,
                highscore=HighscoreRow(
                    simulations=simulations, score=chosen.high_score, seed=chosen.seed
                ),
            )
            crash_point("adopt_before_commit")
    if raced:
        done = await _adopted(db)
        if done is None:
            raise AdoptionRefused("another process wrote a golden configuration meanwhile")
        return done
    return replace(chosen, event_id=event_id, simulations=simulations)


async def run(settings: Settings, schema: ConfigSchema, dry_run: bool) -> Adoption:
    """``ax3l-db adopt`` on its own connection pool: the plan, or the adoption."""
    async with Database(settings) as db:
        if dry_run:
            return await _adopted(db) or await plan(db, schema)
        return await adopt(db, schema, EventLog(db))
