"""The LLM proposer: one conversation with the model server per turn.

Each request is capped (``AX3L_LLM_MAX_TOKENS``) and bounded by its own deadline, and the whole
conversation by ``AX3L_CONVERSATION_TIMEOUT``. The model's own mistakes (prose, a wrong tool,
wrong arguments, a reply cut at the cap) and the broker's rejections are answered by correction
prompts in the same conversation, together at most ``AX3L_MAX_CORRECTIONS`` times. What the
server does wrong (timeouts, HTTP errors, unreadable replies) ends the conversation with
``llm_request_failed``; the loop retries the same entry after a backoff, and after enough failed
conversations the fallback proposer takes the turn (``proposers/fallback.py``). A context
overflow (HTTP 400) rebuilds the opening prompts smaller and asks once more. The model's
reasoning stays in the stored reply; only its visible content is fed back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from typing import Any

from ax3l.orchestrator.llm_client import (
    ModelClient,
    ModelFailure,
    ToolCall,
    extract_grammar_call,
    extract_tool_call,
    shown_url,
)
from ax3l.orchestrator.mcp_session import BoundSession
from ax3l.orchestrator.model_corrections import correction_for, prose_of
from ax3l.orchestrator.open_values import constrained_tool, open_values
from ax3l.orchestrator.prompt_budget import (
    DEFAULT_CONTEXT_TOKENS,
    context_tokens,
    estimate_tokens,
    prompt_token_budget,
)
from ax3l.orchestrator.prompts import (
    Prompt,
    PromptContext,
    conversation_prompts,
    read_prompt_context,
)
from ax3l.orchestrator.proposers.base import (
    ConversationFailed,
    Proposer,
    ProposerDeps,
    TurnAhead,
    TurnContext,
)
from ax3l.orchestrator.proposers.pipeline import Gate, Pipeline
from ax3l.orchestrator.proposers.search_space import Key, key_of
from ax3l.orchestrator.reply_grammar import reply_grammar
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.event_models import LlmRequestFailed, PromptSent, ReplyReceived
from ax3l.shared.metrics import MODEL_FAILURES, MODEL_REQUEST_SECONDS, MODEL_REQUESTS
from ax3l.shared.wasted import failure_waste, rejection_waste

CORRECTION_NAMES = {"invalid_value": "InvalidValue", "duplicate_config": "NoDupes"}
# Prose fed back to the model is bounded: it only needs to see what it said.
PROSE_LIMIT = 2000
# How often a context overflow may shrink the opening prompts before the conversation fails.
SHRINK_RETRIES = 1
# Seconds to wait for llama-server's /props (the context size) before assuming the default.
PROPS_TIMEOUT = 5.0


@dataclasses.dataclass(frozen=True)
class LlmOptions:
    """The settings the LLM proposer reads, named as in ``Settings`` (``proposers.llm_options``
    builds it): the model server's, the conversation's bounds and ``AX3L_PIPELINE``."""

    llm_url: str
    llm_timeout: float
    llm_model: str | None
    llm_max_tokens: int
    llm_context_tokens: int | None
    conversation_timeout: float
    llm_constrained: bool
    llm_grammar: bool
    max_corrections: int
    pipeline: bool


class LlmProposer(Proposer):
    name = "llm"

    def __init__(self, deps: ProposerDeps, options: LlmOptions):
        super().__init__(deps)
        self.options = options
        self.model = ModelClient(
            options.llm_url, options.llm_timeout, options.llm_model, options.llm_max_tokens
        )
        self._context_tokens: int | None = None
        self.pipeline = Pipeline(self, self._converse)
        # Wasted asks by kind per live conversation, taken by its conversation_ended.
        self._wasted: dict[str, Counter[str]] = {}

    async def close(self) -> None:
        try:
            with contextlib.suppress(DatabaseError):
                await self.pipeline.discard("the orchestrator stopped")
        finally:
            await self.model.close()

    async def propose(self, ctx: TurnContext, note: dict[str, Any] | None = None) -> str:
        """Continue the pipelined conversation of this turn if there is one, else start one."""
        held = self.pipeline.take(ctx)
        if held is not None:
            return await self.pipeline.resume(held, ctx)
        await self.pipeline.discard(
            f"turn {ctx.turn.index} ({ctx.turn.entry.name}) on seed {ctx.golden.seed} came instead"
        )
        return await super().propose(ctx, note)

    async def speculate(self, ahead: TurnAhead, note: dict[str, Any] | None = None) -> None:
        if self.options.pipeline:
            await self.pipeline.start(ahead, note)

    def held_entry(self) -> str | None:
        return self.pipeline.entry

    async def advice(self, prompt_ctx: PromptContext) -> Prompt | None:
        """An extra prompt before the request for a value (the hybrid's TPE state); none here."""
        return None

    async def context_tokens(self) -> int:
        """The model's context per request: the setting, else llama-server's /props (asked once
        it answers), else 16,384."""
        options = self.options
        if self._context_tokens is None:
            found = await context_tokens(
                options.llm_context_tokens, options.llm_url, PROPS_TIMEOUT, self.model.http
            )
            if options.llm_context_tokens is not None or found != DEFAULT_CONTEXT_TOKENS:
                self._context_tokens = found
            return found
        return self._context_tokens

    async def _prompt(
        self, prompt: Prompt, conversation_id: str, parameter: str, parent: int
    ) -> int:
        return await self.deps.log.log(
            PromptSent(text=prompt.text),
            process_id=conversation_id,
            parent_event_id=parent,
            source_name=prompt.source_name,
            parameter=parameter,
        )

    def count_waste(self, conversation_id: str, kind: str) -> None:
        """One more ask of the conversation wasted, of ``kind`` (``ax3l.shared.wasted``)."""
        self._wasted.setdefault(conversation_id, Counter())[kind] += 1

    def wasted(self, conversation_id: str) -> dict[str, int]:
        return dict(sorted(self._wasted.pop(conversation_id, Counter()).items()))

    async def _failed(
        self, exc: ModelFailure, conversation_id: str, parameter: str, parent: int
    ) -> None:
        MODEL_FAILURES.labels(exc.kind).inc()
        self.deps.status.error(f"{parameter}: model {exc.kind}: {exc.detail}")
        wasted = failure_waste(exc.kind)
        self.count_waste(conversation_id, wasted)
        await self.deps.log.log(
            LlmRequestFailed(
                kind=exc.kind,
                wasted=wasted,
                detail=exc.detail,
                http_status=exc.http_status,
                parameter=parameter,
                url=shown_url(self.model.url),
                correctable=exc.correctable,
                **exc.facts,
            ),
            process_id=conversation_id,
            parent_event_id=parent,
            parameter=parameter,
            source_name="ModelServer",
        )

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        return await self._converse(ctx, conversation_id, started_event_id, None, self.sessions)

    async def _converse(
        self,
        ctx: TurnContext,
        conversation_id: str,
        started_event_id: int,
        gate: Gate | None,
        sessions: list[BoundSession],
    ) -> str:
        deps = self.deps
        entry = ctx.turn.entry
        read = await read_prompt_context(deps.db, deps.schema, entry, ctx.golden)
        async with deps.sessions.session(entry, sessions) as session:
            # The prompts name the tool as the broker's MCP server offers it.
            prompt_ctx = dataclasses.replace(
                read, tool_name=session.tool.name, argument_names=session.tool.argument_names
            )
            conversation = _Conversation(self, session, conversation_id, prompt_ctx, gate)
            return await conversation.run(started_event_id)


class _Conversation:
    """One conversation's messages, deadline and corrections."""

    def __init__(
        self,
        proposer: LlmProposer,
        session: BoundSession,
        conversation_id: str,
        prompt_ctx: PromptContext,
        gate: Gate | None = None,
    ):
        self.proposer = proposer
        self.gate = gate  # a pipelined conversation's first tool call waits for its turn
        self.deps, self.options = proposer.deps, proposer.options
        self.session = session
        self.conversation_id = conversation_id
        self.prompt_ctx = prompt_ctx
        self.parameter = prompt_ctx.entry.name
        self.deadline = time.monotonic() + self.options.conversation_timeout
        self.messages: list[dict[str, Any]] = []
        self.corrections = 0
        self.shrink = 0  # context overflows so far: the opening prompts are that much smaller
        self.tool = session.tool  # as sent to the model: narrowed to the open values
        self.grammar: str | None = None  # the reply's grammar (AX3L_LLM_GRAMMAR)

    async def _narrow(self) -> str:
        """Narrow what the model may answer to the values open now: the tool's schema
        (``AX3L_LLM_CONSTRAINED``) and the reply's grammar (``AX3L_LLM_GRAMMAR``, every legal
        value when unconstrained, never the golden's). The prompt's line saying what is open
        and how to answer ('' when neither is on)."""
        options, ctx = self.options, self.prompt_ctx
        if not (options.llm_constrained or options.llm_grammar):
            return ""
        tested: set[Key] = set()
        if options.llm_constrained:
            tested = await self.deps.index.existing_values(ctx.entry, ctx.golden.config)
        values = open_values(ctx.schema, ctx.entry, tested)
        lines = []
        if options.llm_constrained:
            self.tool = constrained_tool(self.session.tool, values)
            lines.append(values.describe())
        names = self.session.tool.argument_names
        if options.llm_grammar and len(names) == len(values.leaves):
            excluded = tested | {key_of(ctx.history.golden_values)}
            self.grammar = reply_grammar(ctx.schema, values, names, excluded).text
            shape = ", ".join(f'"{name}": <number>' for name in names)
            lines.append(
                f"Reply with the arguments of `{self.session.tool.name}` as one JSON object,"
                f" {{{shape}}}, and nothing else."
            )
        return "\n".join(lines)

    async def _open(self, parent: int, shrink: int) -> int:
        """Send the opening prompts, fitted to the model's context (smaller for each ``shrink``
        after a context overflow); the last prompt's event id."""
        options = self.options
        self.messages = []
        open_line = await self._narrow()
        budget = prompt_token_budget(
            await self.proposer.context_tokens(),
            options.llm_max_tokens,
            self.tool.for_model() if self.grammar is None else None,  # a grammar is no prompt
            options.max_corrections,
        ) - estimate_tokens(open_line)
        advice = await self.proposer.advice(self.prompt_ctx)
        if advice is not None:
            budget -= estimate_tokens(advice.text)
        prompts = conversation_prompts(self.prompt_ctx, max(budget, 1), shrink)
        if open_line:
            last_prompt = prompts[-1]
            prompts[-1] = Prompt(last_prompt.source_name, f"{last_prompt.text}\n\n{open_line}")
        if advice is not None:
            prompts.insert(len(prompts) - 1, advice)
        last = parent
        for prompt in prompts:
            self.messages.append({"role": prompt.role, "content": prompt.text})
            last = await self.proposer._prompt(prompt, self.conversation_id, self.parameter, parent)
        return last

    async def _request(self) -> dict[str, Any]:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            limit = self.options.conversation_timeout
            raise ModelFailure(
                "timeout",
                f"the conversation ran past its {limit:g} s deadline",
                facts={"timeout_seconds": limit},
            )
        body = self.proposer.model.request_body(self.messages, self.tool, self.grammar)
        self.deps.capture.record(self.conversation_id, "request", body)
        crash_point("model_call")
        MODEL_REQUESTS.inc()
        with MODEL_REQUEST_SECONDS.time():
            reply = await self.proposer.model.complete(body, deadline=remaining)
        self.deps.capture.record(self.conversation_id, "reply", reply)
        return reply

    def _count_correction(self, what: str) -> None:
        self.corrections += 1
        limit = self.options.max_corrections
        if self.corrections > limit:
            raise ConversationFailed(
                f"{self.corrections} replies needed a correction, more than the {limit}"
                f" corrections allowed; last: {what}"
            )

    async def run(self, started_event_id: int) -> str:
        """Ask, correct and submit until a tool call is accepted; its run id."""
        last_prompt = await self._open(started_event_id, self.shrink)
        while True:
            reply, last_prompt = await self._reply(started_event_id, last_prompt)
            reply_event = await self._log_reply(reply, last_prompt)
            call, last_prompt = await self._read_call(reply, reply_event)
            if call is None:
                continue
            if self.gate is not None:
                await self._wait_for_turn()
            run_id, last_prompt = await self._submit(call, reply_event)
            if run_id is not None:
                return run_id

    async def _reply(self, started_event_id: int, last_prompt: int) -> tuple[Any, int]:
        """The model's reply and the prompt event it answers. A context overflow opens the
        conversation again with smaller prompts (``SHRINK_RETRIES`` times); any other failure
        ends the conversation."""
        while True:
            try:
                return await self._request(), last_prompt
            except ModelFailure as exc:
                await self.proposer._failed(exc, self.conversation_id, self.parameter, last_prompt)
                if exc.kind == "context_overflow" and self.shrink < SHRINK_RETRIES:
                    self.shrink += 1
                    last_prompt = await self._open(started_event_id, self.shrink)
                    continue
                raise ConversationFailed(f"model {exc.kind}: {exc.detail}") from exc

    async def _log_reply(self, reply: dict[str, Any], last_prompt: int) -> int:
        """``reply_received`` for the reply; its event id."""
        return await self.deps.log.log(
            ReplyReceived.model_validate(reply),
            process_id=self.conversation_id,
            parent_event_id=last_prompt,
            parameter=self.parameter,
            source_name="ModelServer",
        )

    async def _read_call(
        self, reply: dict[str, Any], reply_event: int
    ) -> tuple[ToolCall | None, int]:
        """The reply's tool call and the reply's event id; when the model got it wrong, None
        and the correction's event id (a failure no correction can fix ends the conversation)."""
        extract = extract_tool_call if self.grammar is None else extract_grammar_call
        try:
            return extract(reply, self.session.tool), reply_event
        except ModelFailure as exc:
            await self.proposer._failed(exc, self.conversation_id, self.parameter, reply_event)
            if not exc.correctable:
                raise ConversationFailed(f"model {exc.kind}: {exc.detail}") from exc
            self._count_correction(f"model {exc.kind}: {exc.detail}")
            return None, await self._correct_model(exc, reply, reply_event)

    async def _wait_for_turn(self) -> None:
        """Hold the call until the loop opens the turn; then the golden is the turn's (the
        broker builds the candidate from it) and the held time is not the model's."""
        assert self.gate is not None
        ctx, waited = await self.gate()
        self.gate = None
        self.deadline += waited
        self.prompt_ctx = dataclasses.replace(self.prompt_ctx, golden=ctx.golden)

    async def _correct_model(self, failure: ModelFailure, reply: Any, reply_event: int) -> int:
        """Tell the model what was wrong with its reply; the correction's event id."""
        prose = prose_of(reply) if failure.kind != "length" else ""
        if prose:
            self.messages.append({"role": "assistant", "content": prose[:PROSE_LIMIT]})
        correction = correction_for(failure, self.session.tool)
        self.messages.append({"role": correction.role, "content": correction.text})
        return await self.proposer._prompt(
            correction, self.conversation_id, self.parameter, reply_event
        )

    async def _submit(self, call: ToolCall, reply_event: int) -> tuple[str | None, int]:
        """Submit the call: the run id when accepted, else None and the correction's event id."""
        result = await self.session.call(call.arguments)
        self.deps.capture.record(self.conversation_id, "tool_result", result.payload)
        if result.accepted:
            crash_point("after_tool_accepted")
            return str(result.payload["run_id"]), reply_event
        if not result.rejected:
            raise ConversationFailed(f"{self.session.tool.name} answered {result.text}")
        reason = str(result.payload.get("reason", ""))
        code = str(result.payload.get("code", ""))
        self.proposer.count_waste(self.conversation_id, rejection_waste(code))
        self._count_correction(reason)
        correction = Prompt(
            str(result.payload.get("source_name") or CORRECTION_NAMES.get(code, code)),
            str(result.payload.get("prompt") or reason),
        )
        self.messages.append(call.message)
        self.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": result.text})
        self.messages.append({"role": correction.role, "content": correction.text})
        await self._narrow()
        return None, await self.proposer._prompt(
            correction, self.conversation_id, self.parameter, reply_event
        )
