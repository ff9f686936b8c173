"""A small experiment written as the services write it, for the report's tests of runs: a
seeding run, a model's proposal with its reasoning, a ``model`` proposer's proposal that became
golden, a seat's submission, a fallback's proposal and a seed rotation of the golden."""

from __future__ import annotations

import dataclasses
import uuid
from contextlib import closing
from typing import Any

from reports_history import HOSTILE, insert_runs, read_runs

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.event_models import (
    ConversationEnded,
    ConversationStarted,
    GoldenConfigCreated,
    ProposalAccepted,
    ReplyReceived,
    SeatCall,
    SimulationCompleted,
    SimulationSubmitted,
)
from ax3l.shared.registry import BY_NAME
from ax3l.testing.provenance import backfilled
from ax3l.testing.scripted_llm import completion, tool_call

FIGURES = {
    "predicted_mean": 44.1234,
    "predicted_sd": 2.3,
    "expected_improvement": 1.2,
    "incumbent_mean": 41.0,
    "choices": 129,
    "runs": 5,
}
REASONING = f"Gamma 0.97 should value the food further ahead. {HOSTILE}"


def _runs() -> dict[str, Any]:
    """Six of the user's runs, their configurations changed into the story's."""
    base = read_runs(6)
    defaults = base[0].flat

    def made(i: int, score: int, **values: Any) -> Any:
        return dataclasses.replace(
            base[i],
            status="completed",
            high_score=score,
            flat={**defaults, **values},
        )

    golden_c = {"training_learning_rate": 0.0011}
    return {
        "seeding": made(0, 40),
        "llm": made(1, 38, training_gamma=0.97),
        "model": made(2, 43, **golden_c),
        "seat": made(3, 41, **golden_c, model_hidden_size=256),
        "fallback": made(4, 44, **golden_c, training_batch_size=32),
        "rotation": made(5, 33, **golden_c, seed=1971),
    }


class Story:
    def __init__(self, db: Database, runs: dict[str, Any]):
        self.log = EventLog(db)
        self.runs = runs
        self.schema = cached_schema(None)
        self.conversations: dict[str, str] = {}
        self.reply_id = 0

    def config(self, name: str) -> dict[str, Any]:
        return self.schema.unflatten(self.runs[name].flat)

    async def ran(self, name: str, **submitted: Any) -> None:
        run = self.runs[name]
        await self.log.log(
            SimulationSubmitted(run_id=run.run_id, config=self.config(name), **submitted),
            process_id=run.run_id,
        )
        await self.log.log(
            SimulationCompleted(run_id=run.run_id, high_score=run.high_score),
            process_id=run.run_id,
        )

    async def golden(self, name: str, position: int, kind: str) -> None:
        run = self.runs[name]
        await self.log.log(
            GoldenConfigCreated(
                run_id=run.run_id,
                config=self.config(name),
                high_score=run.high_score,
                seed=run.seed,
                simulations=position,
                reason=f"{kind} of {name}",
                kind=kind,
            ),
            process_id=run.run_id,
            highscore=HighscoreRow(position, run.high_score, run.seed),
        )

    async def proposal(
        self,
        name: str,
        entry: str,
        proposer: str,
        golden: str,
        started: dict[str, Any] | None = None,
        ended: dict[str, Any] | None = None,
        reasoning: str | None = None,
        seat: str | None = None,
    ) -> None:
        run, item = self.runs[name], BY_NAME[entry]
        conversation = str(uuid.uuid4())
        self.conversations[name] = conversation
        await self.log.log(
            ConversationStarted(proposer=proposer, parameter=entry, **(started or {})),
            process_id=conversation,
            parameter=entry,
        )
        values = [run.flat[column] for column in item.columns]
        arguments = dict(zip(item.value_names, values, strict=True))
        if reasoning is not None:
            message = {
                "role": "assistant",
                "content": "",
                "reasoning_content": reasoning,
                "tool_calls": [tool_call(item.tool_name, arguments, "call_1")],
            }
            self.reply_id = await self.log.log(
                ReplyReceived.model_validate(completion(message, "tool_calls")),
                process_id=conversation,
            )
        if seat is not None:
            for _ in range(3):  # its polls: seat calls that name no run
                await self.log.log(
                    SeatCall(seat=seat, tool="current_turn", open=True),
                    process_id=conversation,
                    source_name=seat,
                )
            await self.log.log(
                SeatCall(seat=seat, tool=item.tool_name, outcome="accepted", run_id=run.run_id),
                process_id=conversation,
                source_name=seat,
            )
        await self.log.log(
            ProposalAccepted(
                parameter=entry,
                values=arguments,
                changes=dict(zip(item.paths, values, strict=True)),
                run_id=run.run_id,
                golden_run_id=self.runs[golden].run_id,
            ),
            process_id=run.run_id,  # as the broker writes it
            parameter=entry,
        )
        await self.ran(name)
        await self.log.log(
            ConversationEnded(
                proposer=proposer,
                parameter=entry,
                outcome="accepted",
                run_id=run.run_id,
                **(ended or {}),
            ),
            process_id=conversation,
            parameter=entry,
        )


async def write_story(dbs: Any) -> Story:
    runs = _runs()
    with closing(dbs.connect("snakelab", dbs.snakelab_db)) as connection:
        insert_runs(connection, list(runs.values()), episodes_for=len(runs))
    db = Database(dbs.settings())
    async with db:
        story = Story(db, runs)
        await story.ran("seeding", purpose="seeding")
        await story.golden("seeding", 1, "seeding")
        await story.proposal("llm", "gamma", "llm", "seeding", reasoning=REASONING)
        await story.proposal("model", "learning_rate", "model", "seeding", ended={"model": FIGURES})
        await story.golden("model", 3, "promotion")
        await story.proposal("seat", "hidden_size", "external", "model", seat="alice")
        await story.proposal(
            "fallback",
            "batch_size",
            "tpe",
            "model",
            started={"fallback_for": "llm", "failure_streak": 3},
        )
        await story.ran("rotation", purpose="seed_rotation")
    backfilled(dbs)
    return story
