"""The model leaderboard on the Proposers page and in /api/proposers."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ax3l.shared import event_models as ev
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.registry import PARAMETER_ORDER

MODEL = "gemma-3-270m-it-Q4_K_M.gguf"


def _reply(model: str | None, tokens: int, prompt_ms: float, predicted_ms: float) -> dict:
    reply: dict[str, Any] = {
        "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant"}}],
        "usage": {"completion_tokens": tokens, "prompt_tokens": 900},
        "timings": {"prompt_ms": prompt_ms, "predicted_ms": predicted_ms},
    }
    if model is not None:
        reply["model"] = model
    return reply


class History:
    def __init__(self, log: EventLog):
        self.log = log
        self.checkpoint = 0

    async def turn(self, index: int) -> None:
        self.checkpoint = await self.log.log(
            ev.RoundRobinCheckpoint(parameter_order=list(PARAMETER_ORDER), index=index)
        )

    async def conversation(self, proposer: str, **extra: Any) -> str:
        conversation = str(uuid.uuid4())
        await self.log.log(
            ev.ConversationStarted(proposer=proposer, checkpoint_event_id=self.checkpoint, **extra),
            process_id=conversation,
        )
        return conversation

    async def exchange(self, conversation: str, reply: dict | None, failure: dict | None) -> None:
        prompt = await self.log.log(ev.PromptSent(text="Choose a value."), process_id=conversation)
        parent = prompt
        if reply is not None:
            parent = await self.log.log(
                ev.ReplyReceived.model_validate(reply),
                process_id=conversation,
                parent_event_id=prompt,
            )
        if failure is not None:
            await self.log.log(
                ev.LlmRequestFailed.model_validate(failure),
                process_id=conversation,
                parent_event_id=parent,
            )

    async def broker(self, model: type[ev.EventContent], run_id: str | None = None) -> None:
        content: dict[str, Any] = {"parameter": "hidden_size", "values": {"value": 224}}
        if run_id is not None:
            content["run_id"] = run_id
        await self.log.log(model.model_validate(content), process_id=run_id or str(uuid.uuid4()))


async def test_leaderboard_counts_a_models_turns_waste_timings_tokens_and_goldens(
    snakelab_tables, make_client
):
    """Per model: its conversations, accepted proposals, wasted turns by kind (failed requests
    and the broker's rejections in its conversations), the fallback turns it lost, median/p95
    seconds per request from llama-server's timings, tokens per accepted proposal, new goldens;
    a classical proposer's turns count for no model."""
    run_1, run_2, run_3 = (f"00000000-0000-4000-8000-00000000000{i}" for i in (1, 2, 3))
    async with Database(snakelab_tables.settings()) as db:
        history = History(EventLog(db))
        await history.turn(0)
        first = await history.conversation("llm")
        await history.exchange(
            first,
            _reply(MODEL, 300, 100, 900),
            {"kind": "no_tool_call", "detail": "prose", "correctable": True},
        )
        await history.exchange(first, _reply(MODEL, 100, 500, 1500), None)
        await history.broker(ev.ProposalRejectedDuplicate)
        await history.exchange(first, _reply(MODEL, 200, 1000, 2000), None)
        await history.broker(ev.ProposalAccepted, run_1)
        await history.log.log("golden_config_created", {"run_id": run_1, "high_score": 47})

        await history.turn(1)
        failing = await history.conversation("llm")
        await history.exchange(
            failing, None, {"kind": "timeout", "detail": "300 s", "correctable": False}
        )
        await history.conversation("tpe", fallback_for="llm", failure_streak=3)
        await history.broker(ev.ProposalAccepted, run_2)

        await history.turn(2)
        await history.conversation("tpe")
        await history.broker(ev.ProposalRejectedInvalid)
        await history.broker(ev.ProposalAccepted, run_3)
        await history.log.log("golden_config_created", {"run_id": run_3, "high_score": 48})

    async with make_client(snakelab_tables, AX3L_LLM_MODEL="configured-model") as http:
        found = (await http.get("/api/proposers")).json()
        models = {m["model"]: m for m in found["models"]}
        # The failing conversation's model server never named a model: the configured one.
        assert set(models) == {MODEL, "configured-model"}
        gemma = models[MODEL]
        assert {k: gemma[k] for k in ("conversations", "accepted_proposals", "new_goldens")} == {
            "conversations": 1,
            "accepted_proposals": 1,
            "new_goldens": 1,
        }
        assert gemma["wasted_turns"] == 2
        assert gemma["wasted_kinds"] == {"no_tool_call": 1, "proposal_rejected_duplicate": 1}
        assert gemma["requests"] == 3
        assert gemma["median_seconds"] == pytest.approx(2.0)  # 1 s, 2 s, 3 s
        assert gemma["p95_seconds"] == pytest.approx(2.9)
        assert gemma["completion_tokens_per_accepted"] == pytest.approx(600.0)
        assert gemma["fallback_turns"] == 0
        configured = models["configured-model"]
        assert (configured["conversations"], configured["accepted_proposals"]) == (1, 0)
        assert configured["wasted_kinds"] == {"timeout": 1}
        assert configured["fallback_turns"] == 1
        assert configured["completion_tokens_per_accepted"] is None
        assert configured["requests"] == 1  # the timed-out request, timed by its events

        page = (await http.get("/proposers")).text
        row = page[page.index(f'data-model="{MODEL}"') :].split("</tr>")[0]
        assert '<td class="num wasted">2</td>' in row
        assert "no_tool_call 1, proposal_rejected_duplicate 1" in row
        assert '<td class="num median-seconds">2.00</td>' in row
        assert '<td class="num tokens-per-accepted">600.0</td>' in row
        assert 'href="/comparison"' in page
