"""One readable sentence per event, as the user's own system words its log.

``sentence(name, content, parameter)`` reads the (possibly cut) content an event stores, as its
content model (``ax3l.shared.event_models``), and says what happened: ``High score: 37 < 45;
model.hidden_size: 224 -> 272.``, ``Model timed out after 300 s on hidden_size``, ``Proposal
accepted: hidden_size = 272 (run 3f2a1b9c)``. It returns None when the content does not hold
what the sentence needs; the list then shows the content itself. Contents are untrusted: a
value that does not fit its field reads as absent, and this only builds text, the templates
escape it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeAlias

from ax3l.shared import event_models as ev
from ax3l.shared import untrusted_json
from ax3l.shared.event_models import EventContent, read_content
from ax3l.shared.registry import BY_NAME

Builder = Callable[[Any, str | None], str | None]

# The failure kinds the orchestrator stores in llm_request_failed, worded for the list.
FAILURE_KINDS: dict[str, str] = {
    "timeout": "Model timed out",
    "connection_error": "Model server unreachable",
    "http_error": "Model server answered with an error",
    "invalid_reply": "Model reply unreadable",
    "no_tool_call": "Model answered without a tool call",
    "wrong_tool": "Model called the wrong tool",
    "wrong_arguments": "Model sent wrong arguments",
    "length": "Model reply cut at max_tokens",
    "context_overflow": "Prompt too long for the model's context",
}
DETAIL_CHARS = 120


def _text(value: Any) -> str | None:
    """A value worded as text: a non-empty string, or a number."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number(value)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _run(run_id: Any) -> str | None:
    text = _text(run_id)
    return None if text is None else f"run {text[:8]}"


def _short(text: str, limit: int = DETAIL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def values_text(parameter: str | None, values: Any) -> str | None:
    """``hidden_size = 272`` or ``epsilon_pair: epsilon.initial = 1, epsilon.decay = 0.99``."""
    if not isinstance(values, dict) or not values:
        return None
    entry = BY_NAME.get(parameter or "")
    if entry is not None and entry.kind == "single" and len(values) == 1:
        return f"{parameter} = {_number(next(iter(values.values())))}"
    names = dict(zip(entry.value_names, entry.paths, strict=True)) if entry else {}
    parts = ", ".join(f"{names.get(k, k)} = {_number(v)}" for k, v in values.items())
    return f"{parameter}: {parts}" if parameter else parts


def _for(parameter: str | None) -> str:
    return f" for {parameter}" if parameter else ""


def _on(parameter: str | None) -> str:
    return f" on {parameter}" if parameter else ""


# -- Conversation ------------------------------------------------------------------------------

_Conversation: TypeAlias = ev.ConversationStarted | ev.ConversationResumed | ev.ConversationEnded


def _speaker(c: _Conversation, parameter: str | None) -> tuple[str | None, str | None]:
    """The conversation's proposer and its parameter (the event's own, else the row's)."""
    return _text(c.proposer), _text(c.parameter) or parameter


def _subject(proposer: str | None, parameter: str | None, pipelined: bool = False) -> str:
    """Whom a conversation's sentence is about: ``tpe conversation for gamma``,
    ``Pipelined conversation``."""
    if pipelined:
        who = f"Pipelined {proposer} conversation" if proposer else "Pipelined conversation"
    else:
        who = f"{proposer} conversation" if proposer else "Conversation"
    return f"{who}{_for(parameter)}"


def conversation_started(c: ev.ConversationStarted, parameter: str | None) -> str | None:
    proposer, parameter = _speaker(c, parameter)
    fallback_for = _text(c.fallback_for)
    if proposer and fallback_for:
        streak = _int(c.get("failure_streak"))
        failed = "model" if fallback_for == "llm" else fallback_for
        after = f" after {streak} failed {failed} conversation{'s' * (streak != 1)}"
        return f"{proposer} proposed{_for(parameter)}{after if streak else f' instead of {failed}'}"
    who = _subject(proposer, parameter)
    if c.pipelined is True:
        run = _text(c.while_run_id)
        return f"{who} started ahead, while run {run or '?'} trains"
    return f"{who} started"


def conversation_resumed(c: ev.ConversationResumed, parameter: str | None) -> str | None:
    who = _subject(*_speaker(c, parameter), pipelined=True)
    held = c.held_seconds
    if c.call_held is True and held is not None:
        return f"{who} got its turn: its call, held {held:.1f} s, goes ahead"
    return f"{who} got its turn"


def conversation_ended(c: ev.ConversationEnded, parameter: str | None) -> str | None:
    who = _subject(*_speaker(c, parameter))
    outcome = _text(c.outcome)
    if outcome == "accepted":
        run = _run(c.run_id)
        return f"{who} ended: {run + ' ' if run else ''}accepted"
    error = _text(c.error)
    if outcome == "failed" or error:
        return f"{who} failed" + (f": {_short(error)}" if error else "")
    said = _text(c.reason) or outcome
    return f"{who} ended" + (f": {_short(said)}" if said else "")


def prompt_sent(text: str, parameter: str | None, source: str | None) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not (source or parameter):
        return first
    head = f"{source or 'Prompt'}{_for(parameter)}"
    return f"{head}: {first}" if first else head


def llm_request_failed(c: ev.LlmRequestFailed, parameter: str | None) -> str | None:
    kind = _text(c.kind)
    if kind is None:
        return None
    parameter = _text(c.parameter) or parameter
    detail = _text(c.detail)
    head = FAILURE_KINDS.get(kind, f"Model failed ({kind})")
    if kind == "timeout":
        seconds = next(
            (
                c.get(k)
                for k in ("timeout_seconds", "seconds", "elapsed_seconds")
                if _text(c.get(k))
            ),
            None,
        )
        after = f" after {_number(seconds)} s" if seconds is not None else ""
        return f"{head}{after}{_on(parameter)}"
    if kind == "http_error" and (status := _int(c.http_status)) is not None:
        head = f"Model server answered HTTP {status}"
    if kind == "length" and (cap := _int(c.get("max_tokens"))) is not None:
        head = f"Model reply cut at max_tokens ({cap})"
    sentence = f"{head}{_on(parameter)}"
    if detail and kind not in ("length", "context_overflow"):
        sentence += f": {_short(detail)}"
    return sentence


# -- Tool --------------------------------------------------------------------------------------


def tool_request_received(c: ev.ToolRequestReceived, parameter: str | None) -> str | None:
    text = c.text
    if text is None:
        method = _text(c.get("method"))
        return None if method is None else f"Tool request {_short(method, 60)}{_for(parameter)}"
    try:
        request = untrusted_json.loads(text)
    except ValueError:
        request = None
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        size = _int(c.size_bytes)
        return "Tool request received" + (f" ({size} bytes, unreadable)" if size else "")
    payload = request.get("payload")
    payload = payload if isinstance(payload, dict) else {}
    named = _text(payload.get("parameter")) or _text(payload.get("pair")) or parameter
    values = {k: v for k, v in payload.items() if k.startswith("value")}
    proposed = values_text(named, values) if values else None
    method = _short(request["method"], 60)
    return f"Tool request {method}" + (f": {proposed}" if proposed else _for(named))


def tool_execution_started(c: ev.ToolExecutionStarted, parameter: str | None) -> str | None:
    method = _text(c.method) or "tool"
    return f"Executing {method}{_for(_text(c.parameter) or parameter)}"


def tool_execution_completed(c: ev.ToolExecutionCompleted, parameter: str | None) -> str | None:
    method = _text(c.method) or "Tool"
    status = _text(c.status)
    if status == "ok":
        run = _run(c.run_id)
        return f"{method} accepted" + (f": {run}" if run else "")
    if status == "rejected":
        code = _text(c.code)
        return f"{method} rejected" + (f": {code.replace('_', ' ')}" if code else "")
    return None


def tool_execution_failed(c: ev.ToolExecutionFailed, parameter: str | None) -> str | None:
    method = _text(c.method) or "Tool request"
    error = c.error or {}
    code, message = _text(error.get("code")), _text(error.get("message"))
    sentence = f"{_short(method, 60)} failed"
    if code:
        sentence += f" ({code})"
    return sentence + (f": {_short(message)}" if message else "")


# -- SnakeLab ----------------------------------------------------------------------------------


PURPOSES = {
    "seeding": "the first golden",
    "seed_rotation": "the seed rotation",
    "confirmation": "a promotion's confirmation",
}


def simulation_submitted(c: ev.SimulationSubmitted, parameter: str | None) -> str | None:
    run = _run(c.run_id)
    if run is None:
        return None
    purpose = _text(c.purpose)
    sentence = f"{run.capitalize()} submitted"
    if purpose:
        sentence += f" for {PURPOSES.get(purpose, purpose)}"
    elif parameter:
        sentence += f" for {parameter}"
    if c.reused is True:
        sentence += " (already in SnakeLab: reused)"
    elif c.adopted is True:
        sentence += " (adopted after a restart)"
    elif (position := _int(c.queue_position)) is not None:
        sentence += f", queue position {position}"
    return sentence


def _run_state(verb: str) -> Builder:
    def build(c: ev.RunStage, parameter: str | None) -> str | None:
        run = _run(c.run_id)
        if run is None:
            return None
        sentence = f"{run.capitalize()} {verb}"
        score, episodes = _int(c.get("high_score")), _int(c.get("episode_count"))
        if score is not None:
            sentence += f": high score {score}"
            if episodes is not None:
                sentence += f" in {episodes} episodes"
        if error := _text(c.get("error")):
            sentence += f": {_short(error)}"
        return sentence

    return build


# -- Configuration -----------------------------------------------------------------------------


def round_robin_checkpoint(c: ev.RoundRobinCheckpoint, parameter: str | None) -> str | None:
    order, index = c.parameter_order, c.index
    if order is None or index is None or not 0 <= index < len(order):
        return None
    return f"Turn {index + 1} of {len(order)}: {order[index]}"


def proposal_accepted(c: ev.ProposalAccepted, parameter: str | None) -> str | None:
    parameter = _text(c.parameter) or parameter
    proposed = values_text(parameter, c.values)
    run = _run(c.run_id)
    if proposed is None:
        if parameter is None or run is None:
            return None
        return f"Proposal accepted for {parameter} ({run})"
    return f"Proposal accepted: {proposed}" + (f" ({run})" if run else "")


def _rejected(how: str) -> Builder:
    def build(c: ev.ProposalRejected, parameter: str | None) -> str | None:
        parameter = _text(c.parameter) or parameter
        proposed = values_text(parameter, c.values)
        reason = _text(c.reason)
        if proposed is None and reason is None:
            return None
        sentence = f"Proposal rejected as {how}" + (f": {proposed}" if proposed else "")
        return sentence + (f"; {_short(reason)}" if reason else "")

    return build


def parameter_space_exhausted(c: ev.ParameterSpaceExhausted, parameter: str | None) -> str | None:
    parameter = _text(c.parameter) or parameter
    choices, seed = c.choices, c.seed
    sentence = f"{parameter or 'The parameter'} exhausted"
    if choices is not None:
        sentence += f": all {choices} values ran"
        if seed is not None:
            sentence += f" on seed {seed}"
    return sentence + "; turn skipped"


def configuration_compared(c: ev.ConfigurationCompared, parameter: str | None) -> str | None:
    return _text(c.reason)


def golden_config_created(c: ev.GoldenConfigCreated, parameter: str | None) -> str | None:
    run = _run(c.run_id)
    score = _int(c.high_score)
    if run is None and score is None:
        return None
    kind = _text(c.kind)
    sentence = "New golden configuration"
    if run:
        sentence += f": {run}"
    if score is not None:
        sentence += f", high score {score}"
    if (seed := _int(c.seed)) is not None:
        sentence += f", seed {seed}"
    if kind == "model":
        mean, sd = c.get("predicted_mean"), c.get("predicted_sd")
        if isinstance(mean, int | float) and isinstance(sd, int | float):
            sentence += f" (it follows the model of every run: predicted {mean:.1f} ± {sd:.1f})"
        else:
            sentence += " (it follows the model of every run)"
    elif kind and kind != "promotion":
        sentence += f" ({kind.replace('_', ' ')})"
    return sentence


def golden_config_replaced(c: ev.GoldenConfigReplaced, parameter: str | None) -> str | None:
    run = _run(c.run_id) or _run(c.get("golden_run_id"))
    reason = _text(c.reason)
    sentence = "Golden configuration replaced" + (f" by {run}" if run else "")
    return sentence + (f": {_short(reason)}" if reason else "")


def golden_config_retained(c: ev.GoldenConfigRetained, parameter: str | None) -> str | None:
    reason = _text(c.reason)
    return "Golden configuration kept" + (f": {reason}" if reason else "")


def seed_rotation_started(c: ev.SeedRotationStarted, parameter: str | None) -> str | None:
    seed, previous = c.seed, c.previous_seed
    if seed is None:
        return None
    sentence = "Seed rotation" + (
        f" {previous} -> {seed}" if previous is not None else f" to {seed}"
    )
    if (stagnant := c.stagnant_cycles) is not None:
        sentence += f" after {stagnant} stagnant cycle{'s' * (stagnant != 1)}"
    return sentence


def golden_config_seed_incremented(
    c: ev.GoldenConfigSeedIncremented, parameter: str | None
) -> str | None:
    seed, previous = c.seed, c.previous_seed
    if seed is None:
        return None
    return "Golden seed" + (f" {previous} -> {seed}" if previous is not None else f" set to {seed}")


def _host_change(state: str) -> Callable[[ev.SnakeLabHostChange, str | None], str | None]:
    def sentence(c: ev.SnakeLabHostChange, parameter: str | None) -> str | None:
        endpoint = _text(c.endpoint)
        return None if endpoint is None else f"SnakeLab host {_short(endpoint, 80)} {state}"

    return sentence


# -- Confirmed promotions (AX3L_PROMOTION=confirm) -------------------------------------------

# How a confirmation's decision reads; another word is shown as it is.
DECISIONS = {"promoted": "promoted", "retained": "golden retained"}


def _numbers(values: list[int] | None) -> str | None:
    """``1970, 1001971``, or None for a missing or empty list."""
    return ", ".join(_number(value) for value in values) if values else None


def _seeds(values: list[int] | None) -> str | None:
    """``seeds 1001971, 1001972`` or ``seed 1001971``."""
    listed = _numbers(values)
    return None if listed is None else f"seed{'s' * (len(values or []) > 1)} {listed}"


def _beat(candidate: int | None, golden: int | None, seed: int | None) -> str | None:
    """``41 > 40 on seed 1970``: the score that started a confirmation."""
    if candidate is None:
        return None
    scores = f"{candidate} > {golden}" if golden is not None else str(candidate)
    return scores + (f" on seed {seed}" if seed is not None else "")


def promotion_confirmation_started(
    c: ev.PromotionConfirmationStarted, parameter: str | None
) -> str | None:
    candidate, seeds = _run(c.candidate_run_id), _seeds(c.seeds)
    if candidate is None and seeds is None:
        return None
    racing = _text(c.policy) == "race"
    sentence = f"{'Racing' if racing else 'Confirming'} {candidate or 'a candidate'}"
    if beat := _beat(_int(c.candidate_high_score), _int(c.golden_high_score), _int(c.seed)):
        sentence += f" ({beat})"
    golden = _run(c.golden_run_id)
    sentence += f" against golden {golden}" if golden else " against the golden"
    if racing:
        return sentence + (f" on up to {len(c.seeds or [])} more seeds" if seeds else "")
    return sentence + (f": both run on {seeds}" if seeds else "")


def _side(name: str, mean: float | None, scores: list[int] | None) -> str | None:
    """``candidate mean 40.3 (41, 40, 40)``: one side of a confirmation."""
    listed = _numbers(scores)
    if listed is None and mean is None:
        return None
    text = name + (f" mean {mean:.1f}" if mean is not None else "")
    return text + (f" ({listed})" if listed else "")


def promotion_confirmation_decided(
    c: ev.PromotionConfirmationDecided, parameter: str | None
) -> str | None:
    if _text(c.policy) == "race":
        return _race_decided(c)
    sides = [
        side
        for side in (
            _side("candidate", c.candidate_mean, c.candidate_scores),
            _side("golden", c.golden_mean, c.golden_scores),
        )
        if side
    ]
    decision = _text(c.decision)
    if not sides and decision is None:
        return None
    said = " vs ".join(sides)
    if said and (seeds := _seeds(c.seeds)):
        said += f" over {seeds}"
    if decision:
        said += (": " if said else "") + DECISIONS.get(decision, _short(decision, 60))
    problem = _text(c.problem)
    return f"Confirmation: {said}" + (f"; {_short(problem)}" if problem else "")


def _race_decided(c: ev.PromotionConfirmationDecided) -> str:
    """``Race: promoted after 3 seeds, challenger mean 45.0 vs golden 40.0 (...)``."""
    decision = _text(c.decision)
    said = "Race: " + (DECISIONS.get(decision, _short(decision, 60)) if decision else "decided")
    if isinstance(c.seeds, list) and c.seeds:
        said += f" after {len(c.seeds)} seed{'s' * (len(c.seeds) > 1)}"
    if isinstance(c.candidate_mean, int | float) and isinstance(c.golden_mean, int | float):
        said += f", challenger mean {c.candidate_mean:.1f} vs golden {c.golden_mean:.1f}"
    said += _race_figures(c.mean_difference, c.p_value, c.threshold)
    problem = _text(c.problem)
    return said + (f"; {_short(problem)}" if problem else "")


def _race_figures(difference: float | None, p_value: float | None, threshold: float | None) -> str:
    """`` (mean difference +2.3, p = 0.012, a win needs p <= 0.0333)``."""
    parts = []
    if isinstance(difference, int | float):
        parts.append(f"mean difference {difference:+.2f}")
    if isinstance(p_value, int | float):
        parts.append(f"p = {p_value:.3g}")
    if isinstance(threshold, int | float):
        parts.append(f"a win needs p <= {threshold:.3g}")
    return f" ({', '.join(parts)})" if parts else ""


RACE_VERDICTS = {
    "continue": "another round",
    "promoted": "the challenger wins",
    "retained": "the golden stays",
}


def promotion_race_round(c: ev.PromotionRaceRound, parameter: str | None) -> str | None:
    number, verdict = _int(c.round), _text(c.verdict)
    if number is None and verdict is None:
        return None
    said = f"Race round {number if number is not None else '?'}"
    if isinstance(c.seeds, list) and c.seeds:
        said += f" ({len(c.seeds)} seed{'s' * (len(c.seeds) > 1)})"
    said += _race_figures(c.mean_difference, c.p_value, c.threshold)
    if verdict:
        said += f": {RACE_VERDICTS.get(verdict, _short(verdict, 40))}"
    return said


def model_recommendation(c: ev.ModelRecommendation, parameter: str | None) -> str | None:
    problem = _text(c.problem)
    if problem:
        return f"The model of every run cannot recommend yet: {_short(problem)}"
    mean, sd = c.predicted_mean, c.predicted_sd
    if not isinstance(mean, int | float):
        return None
    estimate = f"{mean:.1f}" + (f" ± {sd:.1f}" if isinstance(sd, int | float) else "")
    runs = _int(c.runs)
    fitted = f" (fitted to {runs} runs)" if runs is not None else ""
    return f"The model of every run still recommends the golden: predicted {estimate}{fitted}"


# -- Seats (outside agents) ---------------------------------------------------------------


def _client(c: ev.SeatCall | ev.SeatCallRefused) -> str:
    """`` (from 203.0.113.7)``: the client's address as the endpoint saw it, if recorded."""
    client = _text(c.client)
    return f" (from {_short(client, 64)})" if client else ""


def seat_call(c: ev.SeatCall, parameter: str | None) -> str | None:
    seat, tool = (_text(c.seat) or "A seat") + _client(c), _text(c.tool)
    if tool is None:
        return None
    if tool == "current_turn":
        if c.open is False:
            return f"Seat {seat} asked for the turn; none is open"
        return f"Seat {seat} read the current turn{_on(parameter)}"
    if tool == "history":
        return f"Seat {seat} read the history of {_text(c.entry) or parameter or 'an entry'}"
    values = values_text(parameter, c.values)
    proposed = f"Seat {seat} proposed {values}" if values else f"Seat {seat} called {tool}"
    outcome = _text(c.outcome)
    if outcome == "accepted":
        run = _run(c.run_id)
        return f"{proposed}: accepted" + (f" ({run})" if run else "")
    if outcome == "rejected":
        return f"{proposed}: rejected ({_short(_text(c.reason) or _text(c.code) or '')})"
    if outcome in ("error", "not_delivered"):
        return f"{proposed}: not delivered ({_short(_text(c.error) or '')})"
    return proposed


def seat_call_refused(c: ev.SeatCallRefused, parameter: str | None) -> str | None:
    seat, tool = _text(c.seat), _text(c.tool)
    who = (f"Seat {seat}" if seat else "A request without a valid seat token") + _client(c)
    what = f" calling {tool}" if tool else ""
    why = _text(c.message) or _text(c.reason)
    return f"{who} was refused{what}" + (f": {_short(why)}" if why else "")


# -- Notes (ax3l-db note / tag) ----------------------------------------------------------


def run_note_added(c: ev.RunNoteAdded, parameter: str | None) -> str | None:
    run, note = _run(c.run_id), _text(c.note)
    if run is None or note is None:
        return None
    return f"Note on {run}: {_short(note)}"


def _tag_change(verb: str) -> Builder:
    def build(c: ev.RunTagChange, parameter: str | None) -> str | None:
        run, tag = _run(c.run_id), _text(c.tag)
        if run is None or tag is None:
            return None
        return f"{run.capitalize()} {verb} {_short(tag, 40)}"

    return build


def alert_sent(c: ev.AlertSent, parameter: str | None) -> str | None:
    title = _text(c.title)
    severity = _text(c.severity)
    urgent = f" ({severity})" if severity in ("warning", "failure") else ""
    return None if title is None else f"Alert sent{urgent}: {_short(title)}"


def alert_failed(c: ev.AlertFailed, parameter: str | None) -> str | None:
    reason = _text(c.reason)
    return "An alert did not reach every service" + (f": {_short(reason)}" if reason else "")


BUILDERS: dict[str, Builder] = {
    ev.RunNoteAdded.event: run_note_added,
    ev.RunTagged.event: _tag_change("tagged"),
    ev.RunUntagged.event: _tag_change("untagged"),
    ev.SeatCall.event: seat_call,
    ev.SeatCallRefused.event: seat_call_refused,
    ev.ConversationStarted.event: conversation_started,
    ev.ConversationEnded.event: conversation_ended,
    ev.LlmRequestFailed.event: llm_request_failed,
    ev.ToolRequestReceived.event: tool_request_received,
    ev.ToolExecutionStarted.event: tool_execution_started,
    ev.ToolExecutionCompleted.event: tool_execution_completed,
    ev.ToolExecutionFailed.event: tool_execution_failed,
    ev.SimulationSubmitted.event: simulation_submitted,
    ev.SimulationQueued.event: _run_state("queued"),
    ev.SimulationStarted.event: _run_state("started"),
    ev.SimulationCompleted.event: _run_state("completed"),
    ev.SimulationCancelled.event: _run_state("cancelled"),
    ev.SimulationFailed.event: _run_state("failed"),
    ev.SimulationRestarted.event: _run_state("restarted"),
    ev.SnakeLabHostDown.event: _host_change("does not answer: skipped until it does"),
    ev.SnakeLabHostUp.event: _host_change("answers again"),
    ev.RoundRobinCheckpoint.event: round_robin_checkpoint,
    ev.ProposalAccepted.event: proposal_accepted,
    ev.ConversationResumed.event: conversation_resumed,
    ev.ProposalRejectedInvalid.event: _rejected("invalid"),
    ev.ProposalRejectedDuplicate.event: _rejected("a duplicate"),
    ev.ParameterSpaceExhausted.event: parameter_space_exhausted,
    ev.ConfigurationCompared.event: configuration_compared,
    ev.GoldenConfigCreated.event: golden_config_created,
    ev.GoldenConfigReplaced.event: golden_config_replaced,
    ev.GoldenConfigRetained.event: golden_config_retained,
    ev.SeedRotationStarted.event: seed_rotation_started,
    ev.GoldenConfigSeedIncremented.event: golden_config_seed_incremented,
    ev.PromotionConfirmationStarted.event: promotion_confirmation_started,
    ev.PromotionConfirmationDecided.event: promotion_confirmation_decided,
    ev.PromotionRaceRound.event: promotion_race_round,
    ev.ModelRecommendation.event: model_recommendation,
    ev.AlertSent.event: alert_sent,
    ev.AlertFailed.event: alert_failed,
}


def sentence(name: str, content: Any, parameter: str | None = None) -> str | None:
    """The event said in one sentence, or None when its content does not tell enough.

    ``content`` is the parsed content (an object, or for some events text); prompts and
    replies are worded by ``event_contents.summary`` because they need their source and
    reply parsing.
    """
    build = BUILDERS.get(name)
    if build is None or not isinstance(content, dict):
        return None
    model: EventContent = read_content(name, content)
    try:
        return build(model, parameter)
    except (TypeError, ValueError, AttributeError):
        # A content of an older or foreign shape: show it as it is instead.
        return None
