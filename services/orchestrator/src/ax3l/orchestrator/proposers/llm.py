"""The LLM proposer: one conversation with the model server per turn.

Failures of the model (timeout, HTTP error, prose, wrong tool, wrong arguments) end the
conversation with ``llm_request_failed``; the loop retries the same entry after a backoff.
Rejections by the broker are fed back as correction prompts in the same conversation, at most
``AX3L_MAX_CORRECTIONS`` times.
"""

from __future__ import annotations

from typing import Any

from ax3l.orchestrator.comparable_history import load_history
from ax3l.orchestrator.crash_points import crash_point
from ax3l.orchestrator.event_reads import latest
from ax3l.orchestrator.llm_client import ModelClient, ModelFailure, extract_tool_call
from ax3l.orchestrator.mcp_session import bound_session
from ax3l.orchestrator.prompts import Prompt, PromptContext, conversation_prompts
from ax3l.orchestrator.proposers.base import (
    ConversationFailed,
    Proposer,
    ProposerDeps,
    TurnContext,
)

CORRECTION_NAMES = {"invalid_value": "InvalidValue", "duplicate_config": "NoDupes"}


class LlmProposer(Proposer):
    name = "llm"

    def __init__(self, deps: ProposerDeps):
        super().__init__(deps)
        settings = deps.settings
        if not settings.llm_url:
            raise ValueError("the llm proposer needs a model server URL (--url or AX3L_LLM_URL)")
        model = settings.llm_model
        self.model = ModelClient(settings.llm_url, settings.llm_timeout, model)

    async def close(self) -> None:
        await self.model.close()

    async def _prompt(
        self, prompt: Prompt, conversation_id: str, parameter: str, parent: int
    ) -> int:
        return await self.deps.log.log(
            "prompt_sent",
            prompt.text,
            process_id=conversation_id,
            parent_event_id=parent,
            source_name=prompt.source_name,
            parameter=parameter,
        )

    async def _failed(
        self, exc: ModelFailure, conversation_id: str, parameter: str, parent: int
    ) -> None:
        self.deps.status.error(f"{parameter}: model {exc.kind}: {exc.detail}")
        await self.deps.log.log(
            "llm_request_failed",
            {
                "kind": exc.kind,
                "detail": exc.detail,
                "http_status": exc.http_status,
                "parameter": parameter,
                "url": self.model.url,
            },
            process_id=conversation_id,
            parent_event_id=parent,
            parameter=parameter,
            source_name="ModelServer",
        )

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        deps = self.deps
        entry = ctx.turn.entry
        history = await load_history(deps.db, deps.schema, entry, ctx.golden.config)
        first = await latest(deps.db, "proposal_accepted") is None
        async with bound_session(entry, deps.settings, self.sessions) as session:
            prompt_ctx = PromptContext(
                entry=entry,
                schema=deps.schema,
                golden=ctx.golden,
                history=history,
                first_conversation=first,
                tool_name=session.tool.name,
                argument_names=session.tool.argument_names,
            )
            messages: list[dict[str, Any]] = []
            last_prompt = started_event_id
            for prompt in conversation_prompts(prompt_ctx):
                messages.append({"role": prompt.role, "content": prompt.text})
                last_prompt = await self._prompt(
                    prompt, conversation_id, entry.name, started_event_id
                )
            rejections = 0
            while True:
                body = self.model.request_body(messages, session.tool)
                deps.capture.record(conversation_id, "request", body)
                crash_point("model_call")
                try:
                    reply = await self.model.complete(body)
                except ModelFailure as exc:
                    await self._failed(exc, conversation_id, entry.name, last_prompt)
                    raise ConversationFailed(f"model {exc.kind}: {exc.detail}") from exc
                deps.capture.record(conversation_id, "reply", reply)
                reply_event = await deps.log.log(
                    "reply_received",
                    reply,
                    process_id=conversation_id,
                    parent_event_id=last_prompt,
                    parameter=entry.name,
                    source_name="ModelServer",
                )
                try:
                    call = extract_tool_call(reply, session.tool)
                except ModelFailure as exc:
                    await self._failed(exc, conversation_id, entry.name, reply_event)
                    raise ConversationFailed(f"model {exc.kind}: {exc.detail}") from exc
                result = await session.call(call.arguments)
                deps.capture.record(conversation_id, "tool_result", result.payload)
                if result.accepted:
                    crash_point("after_tool_accepted")
                    return str(result.payload["run_id"])
                if not result.rejected:
                    raise ConversationFailed(f"{session.tool.name} answered {result.text}")
                rejections += 1
                reason = str(result.payload.get("reason", ""))
                if rejections > deps.settings.max_corrections:
                    raise ConversationFailed(
                        f"{rejections} proposals rejected, more than the"
                        f" {deps.settings.max_corrections} corrections allowed; last: {reason}"
                    )
                code = str(result.payload.get("code", ""))
                correction = Prompt(
                    str(result.payload.get("source_name") or CORRECTION_NAMES.get(code, code)),
                    str(result.payload.get("prompt") or reason),
                )
                messages.append(call.message)
                messages.append(
                    {"role": "tool", "tool_call_id": call.call_id, "content": result.text}
                )
                messages.append({"role": correction.role, "content": correction.text})
                last_prompt = await self._prompt(
                    correction, conversation_id, entry.name, reply_event
                )
