"""What each run tried and who chose it, why: its golden configuration of its time, the
difference from it, the proposer (a seat by name), the model's reasoning, the ``model``
proposer's prediction, a fallback's cause, on ``/api/runs``, ``/runs``, the dashboard and the
run's page (with its events in sentences and its learning curve beside its golden's).

One small experiment written as the services write it: a seeding run, a model's proposal with
its reasoning, a ``model`` proposer's proposal that became golden, a seat's submission, a
fallback's proposal and a seed rotation of the golden.
"""

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
    return story


async def test_rows_say_what_each_run_tried_against_its_golden_and_why(
    snakelab_tables, make_client
):
    """/api/runs names each run's golden of its time, the score difference and what differs
    (the seed for a rotation), its proposer (a seat by name) and why it was chosen; /runs and
    the dashboard show it, escaped, the changed value marked."""
    story = await write_story(snakelab_tables)
    runs = story.runs
    async with make_client(snakelab_tables) as http:
        listed = (await http.get("/api/runs")).json()["runs"]
        rows = {run["run_id"]: run for run in listed}

        def row(name: str) -> dict[str, Any]:
            return rows[runs[name].run_id]

        assert row("seeding")["golden_run_id"] is None
        assert row("seeding")["changes"] is None
        llm = row("llm")
        assert (llm["golden_run_id"], llm["golden_high_score"], llm["score_difference"]) == (
            runs["seeding"].run_id,
            40,
            -2,
        )
        assert llm["changes"] == "training.gamma: 0.96 -> 0.97"
        assert llm["changed"] == ["training_gamma"]
        assert llm["proposer"] == "llm"
        assert llm["reason"].startswith("“Gamma 0.97 should value the food further ahead.")
        model = row("model")
        assert model["reason"] == (
            "predicted 44.12 ± 2.3 against the best predicted 41"
            " (expected improvement 1.2, of 129 choices, 5 runs fitted)"
        )
        assert model["changes"] == "training.learning_rate: 0.0021 -> 0.0011"
        seat = row("seat")
        assert (seat["proposer"], seat["seat"], seat["reason"]) == (
            "external",
            "alice",
            "seat alice",
        )
        assert (seat["golden_run_id"], seat["score_difference"]) == (runs["model"].run_id, -2)
        assert seat["changes"] == "model.hidden_size: 224 -> 256"
        fallback = row("fallback")
        assert fallback["proposer"] == "tpe"
        assert (
            fallback["reason"] == "tpe proposed for batch_size after 3 failed model conversations"
        )
        assert fallback["score_difference"] == 1
        rotation = row("rotation")
        assert (rotation["proposer"], rotation["entry"]) == ("ax3l", "seed_rotation")
        assert (rotation["golden_run_id"], rotation["score_difference"]) == (
            runs["model"].run_id,
            -10,
        )
        assert rotation["changes"] == "seed: 1970 -> 1971"
        assert rotation["reason"] is None

        by_difference = (
            await http.get("/api/runs", params={"sort": "score_difference", "order": "asc"})
        ).json()["runs"]
        assert [run["score_difference"] for run in by_difference] == [-10, -2, -2, 1, 3, None]

        page = (await http.get("/runs")).text
        line = page[page.index(f'data-run-id="{runs["llm"].run_id}"') :].split("</tr>")[0]
        assert '<td class="num changed" title="training.gamma: 0.96 -&gt; 0.97">0.97</td>' in line
        assert '<td class="num difference worse"' in line and "−2</td>" in line
        assert "&lt;script&gt;window.__pwned" in line and "<script>window" not in page
        assert '<svg class="sparkline"' in line
        seat_line = page[page.index(f'data-run-id="{runs["seat"].run_id}"') :].split("</tr>")[0]
        assert '<span class="seat">(alice)</span>' in seat_line

        dashboard = (await http.get("/")).text
        last = dashboard[dashboard.index('id="dash-last-runs"') :]
        assert "seed: 1970 -&gt; 1971" in last and "−10</td>" in last
        assert "tpe proposed for batch_size after 3 failed model conversations" in last


async def test_a_run_page_shows_its_golden_its_chooser_and_its_events_in_sentences(
    snakelab_tables, make_client
):
    """The run page says what the run tried against its golden of its time, who chose it
    (reasoning, prediction, seat) and its events as sentences; its curve has the golden's."""
    story = await write_story(snakelab_tables)
    runs = story.runs
    async with make_client(snakelab_tables) as http:
        found = (await http.get(f"/api/simulations/{runs['llm'].run_id}")).json()
        assert found["reason"]["reasoning"] == REASONING
        assert found["reason"]["reply_event_id"] == story.reply_id
        assert found["reason"]["conversation_id"] == story.conversations["llm"]
        assert found["row"]["score_difference"] == -2
        said = {event["name"]: event["summary"] for event in found["events"]}
        assert (
            said["proposal_accepted"]
            == f"Proposal accepted: gamma = 0.97 (run {runs['llm'].run_id[:8]})"
        )
        assert said["simulation_completed"].endswith("completed: high score 38")

        page = (await http.get(f"/simulations/{runs['llm'].run_id}")).text
        tried = page[page.index('id="run-tried"') :].split("</table>")[0]
        assert '<th class="mono">training.gamma</th><td class="num">0.96</td>' in tried
        assert '<td class="num changed">0.97</td>' in tried
        assert 'id="run-difference">−2</strong>' in page
        assert '<a href="/proposers">llm</a>' in page
        assert "&lt;script&gt;window.__pwned" in page and "<script>window" not in page
        assert f'href="/events/{story.reply_id}"' in page
        assert "Proposal accepted: gamma = 0.97" in page
        assert '"dash": "dash"' in page or '"dash":"dash"' in page  # the golden's curve

        model_page = (await http.get(f"/simulations/{runs['model'].run_id}")).text
        figures = model_page[model_page.index('id="run-model"') :].split("</dl>")[0]
        assert '<dt>predicted mean</dt><dd class="mono">44.12</dd>' in figures
        assert '<dt>expected improvement</dt><dd class="mono">1.2</dd>' in figures

        seat_page = (await http.get(f"/simulations/{runs['seat'].run_id}")).text
        assert 'seat <span id="run-seat">alice</span>' in seat_page

        rotation_page = (await http.get(f"/simulations/{runs['rotation'].run_id}")).text
        assert '<th class="mono">seed</th><td class="num">1970</td>' in rotation_page
        assert 'id="run-difference">−10</strong>' in rotation_page
        assert "The loop submitted it itself (seed_rotation)." in rotation_page

        seeding_page = (await http.get(f"/simulations/{runs['seeding'].run_id}")).text
        assert "The experiment's first run" in seeding_page
