"""The event contract: one pydantic model per event's content, named after its event.

Every writer builds one of these and hands it to ``EventLog``; every reader turns a stored
content back into one (``read_content``, or the typed reads of ``ax3l.shared.db.event_reads``).
The name is the model's (``ProposalAccepted.event``); its category and usual level stay in
``ax3l.shared.events.CATALOG``.

Two promises, both pinned by ``shared/tests/test_event_models.py``:

* **Stored bytes do not change.** A model remembers the keys it was given, in the order given,
  and stores exactly those (``stored()``): no key is added, dropped or moved, and strict
  validation never converts a value, so ``to_content(model)`` is the text the dict-based writer
  stored. Keys a writer adds only sometimes are optional fields, left out unless given.
* **Every stored row still reads.** Each field is optional (rows of older versions lack keys)
  and unknown keys are kept (``extra="allow"``). A value that does not fit its field (a row
  written by hand or by an old version) reads as None instead of failing the whole row;
  ``get`` tells an absent key from a stored null.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Self, TypeVar, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from ax3l.shared.events import CATALOG, Category, Level, category_of, default_level

C = TypeVar("C", bound="EventContent")

# Every name in the catalog has its model here (each subclass below that sets ``event``).
MODELS: dict[str, type[EventContent]] = {}


class EventContent(BaseModel):
    """The content of one event; a subclass per event name sets ``event``."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True, protected_namespaces=())

    event: ClassVar[str] = ""
    _keys: tuple[str, ...] = PrivateAttr(default=())

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        name = cls.__dict__.get("event")
        if name:
            if name not in CATALOG:
                raise ValueError(f"{cls.__name__}.event {name!r} is not in the event catalog")
            if name in MODELS:
                raise ValueError(
                    f"{name!r} has two models: {MODELS[name].__name__}, {cls.__name__}"
                )
            MODELS[name] = cls

    @model_validator(mode="wrap")
    @classmethod
    def _remember_keys(cls, data: Any, handler: Any) -> Any:
        model = handler(data)
        if isinstance(data, dict) and isinstance(model, EventContent):
            model._keys = tuple(data)
        return model

    @classmethod
    def category(cls) -> Category:
        """The event's category, from the catalog."""
        return category_of(cls.event)

    @classmethod
    def level(cls) -> Level:
        """The event's usual level, from the catalog."""
        return default_level(cls.event)

    def keys(self) -> tuple[str, ...]:
        """The content's keys, in the order they are stored."""
        return self._keys

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key`` (None when it did not fit), ``default`` when absent."""
        if key not in self._keys:
            return default
        if key in type(self).model_fields:
            return getattr(self, key)
        return (self.__pydantic_extra__ or {}).get(key)

    def stored(self) -> Any:
        """What ``EventLog`` stores as JSON: the given keys, in the given order."""
        return {key: self.get(key) for key in self._keys}

    @classmethod
    def from_stored(cls, content: Any) -> Self:
        """The model of a parsed stored content; never fails (see the module docstring)."""
        if not isinstance(content, dict):
            return cls._lenient({})
        try:
            return cls.model_validate(content)
        except ValidationError as exc:
            misfits = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
            return cls._lenient({k: None if k in misfits else v for k, v in content.items()})

    @classmethod
    def _lenient(cls, content: dict[str, Any]) -> Self:
        values = {name: None for name in cls.model_fields} | content
        model = cast(Self, cls.model_construct(_fields_set=set(content), **values))
        model._keys = tuple(content)
        return model


class TextContent(EventContent):
    """A content stored as plain text, not JSON (a prompt)."""

    text: str | None = None

    def stored(self) -> Any:
        return self.text

    @classmethod
    def from_stored(cls, content: Any) -> Self:
        if isinstance(content, str):
            return cls(text=content)
        return cls._lenient({} if content is None else {"text": json.dumps(content)})


def model_of(name: str) -> type[EventContent]:
    """The content model of event ``name`` (the bare ``EventContent`` for an unknown name)."""
    return MODELS.get(name, EventContent)


def read_content(name: str, content: Any) -> EventContent:
    """A parsed stored content as the model of its event ``name``."""
    return model_of(name).from_stored(content)


# -- Conversation ---------------------------------------------------------------------------


class ConversationStarted(EventContent):
    """A proposer took a turn (``Proposer.log_started``); a fallback or a pipelined start adds
    ``fallback_for``, ``pipelined``, ``while_run_id`` and the like."""

    event: ClassVar[str] = "conversation_started"
    proposer: str | None = None
    parameter: str | None = None
    index: int | None = None
    loop_process_id: str | None = None
    checkpoint_event_id: int | None = None
    golden_run_id: str | None = None
    seed: int | None = None
    pipelined: bool | None = None
    while_run_id: str | None = None
    fallback_for: str | None = None
    hybrid_role: str | None = None


class ConversationEnded(EventContent):
    """A conversation ended: ``outcome`` is ``accepted`` (with ``run_id`` and ``mcp_sessions``,
    each ``{spawn_seconds, prepared, wait_seconds, close_seconds?}``), ``failed`` (with
    ``error``) or ``discarded`` (a pipelined one, with ``reason``)."""

    event: ClassVar[str] = "conversation_ended"
    proposer: str | None = None
    parameter: str | None = None
    outcome: str | None = None
    run_id: str | None = None
    error: str | None = None
    reason: str | None = None
    pipelined: bool | None = None
    mcp_sessions: list[dict[str, Any]] | None = None
    # An LLM conversation's wasted asks by kind (ax3l.shared.wasted), when it wasted any.
    wasted: dict[str, int] | None = None


class ConversationResumed(EventContent):
    """A pipelined conversation was handed its turn (AX3L_PIPELINE)."""

    event: ClassVar[str] = "conversation_resumed"
    proposer: str | None = None
    parameter: str | None = None
    index: int | None = None
    checkpoint_event_id: int | None = None
    golden_run_id: str | None = None
    seed: int | None = None
    while_run_id: str | None = None
    call_held: bool | None = None
    held_seconds: float | None = None
    ahead_seconds: float | None = None


class PromptSent(TextContent):
    """A prompt to the model, stored as its text."""

    event: ClassVar[str] = "prompt_sent"


class ReplyReceived(EventContent):
    """The model server's reply, stored as it came (its keys are the server's)."""

    event: ClassVar[str] = "reply_received"


# -- LLM ------------------------------------------------------------------------------------


class LlmRequestFailed(EventContent):
    """A model request failed or its reply was unusable; ``ModelFailure.facts`` are added
    (``timeout_seconds`` for a timeout, ``max_tokens`` for a cut reply). ``wasted`` is the
    ask's waste kind (``ax3l.shared.wasted``)."""

    event: ClassVar[str] = "llm_request_failed"
    kind: str | None = None
    wasted: str | None = None
    detail: str | None = None
    http_status: int | None = None
    parameter: str | None = None
    url: str | None = None
    correctable: bool | None = None


# -- Tool -----------------------------------------------------------------------------------


class ToolRequestReceived(EventContent):
    """A message reached the broker: its size and (the start of) its text."""

    event: ClassVar[str] = "tool_request_received"
    size_bytes: int | None = None
    text: str | None = None
    truncated: bool | None = None


class ToolExecutionStarted(EventContent):
    """The broker handed a request to its method's handler."""

    event: ClassVar[str] = "tool_execution_started"
    method: str | None = None
    parameter: str | None = None


class ToolExecutionCompleted(EventContent):
    """A handler answered: ``status`` ``ok`` with ``run_id``, or ``rejected`` with ``code``."""

    event: ClassVar[str] = "tool_execution_completed"
    method: str | None = None
    status: str | None = None
    run_id: str | None = None
    code: str | None = None


class ToolExecutionFailed(EventContent):
    """A request was refused or its handler failed: the reply's ``error`` (code and message),
    and for a turn refusal its ``turn_refusal`` details."""

    event: ClassVar[str] = "tool_execution_failed"
    method: str | None = None
    error: dict[str, Any] | None = None
    turn_refusal: dict[str, Any] | None = None


class SeatCall(EventContent):
    """A seat's tool call at the Streamable HTTP endpoint and how it went: a submission's
    ``outcome`` (``accepted`` with ``run_id``, ``rejected`` with the broker's ``code`` and
    ``reason``, ``error`` or ``not_delivered`` with ``error``, as the broker or the channel
    gave them)."""

    event: ClassVar[str] = "seat_call"
    seat: str | None = None
    tool: str | None = None
    open: bool | None = None
    entry: str | None = None
    values: dict[str, Any] | None = None
    checkpoint_event_id: int | None = None
    seconds_since_turn_opened: int | float | None = None
    outcome: str | None = None
    run_id: str | None = None
    code: Any = None
    reason: Any = None
    error: Any = None
    client: str | None = None  # the client's address, as the endpoint saw it


class SeatCallRefused(EventContent):
    """A seat's call refused before its tool ran (``reason``), or by its tool (``message``)."""

    event: ClassVar[str] = "seat_call_refused"
    seat: str | None = None
    tool: str | None = None
    reason: str | None = None
    message: str | None = None
    values: dict[str, Any] | None = None
    checkpoint_event_id: int | None = None
    client: str | None = None  # the client's address, as the endpoint saw it


# -- SnakeLab -------------------------------------------------------------------------------


class SimulationSubmitted(EventContent):
    """A run was recorded: by the broker with its proposal (``queue_position``, ``adopted``), or
    by the orchestrator for a baseline or a retry (``purpose``, ``attempt``, ``retry_of``...)."""

    event: ClassVar[str] = "simulation_submitted"
    run_id: str | None = None
    config: dict[str, Any] | None = None
    queue_position: int | None = None
    adopted: bool | None = None
    purpose: str | None = None
    reason: str | None = None
    retry_of: str | None = None
    attempt: int | None = None
    reused: bool | None = None
    infrastructure_failure: bool | None = None
    proposal_event_id: int | None = None
    proposal_run_id: str | None = None
    failed_error: str | None = None
    host: str | None = None  # the SnakeLab endpoint it was sent to, with several hosts


class SnakeLabHostChange(EventContent):
    """One of several SnakeLab hosts (``AX3L_SNAKELAB_ENDPOINTS``) stopped or started answering."""

    endpoint: str | None = None


class SnakeLabHostDown(SnakeLabHostChange):
    """The host is skipped until it answers again."""

    event: ClassVar[str] = "snakelab_host_down"


class SnakeLabHostUp(SnakeLabHostChange):
    event: ClassVar[str] = "snakelab_host_up"


class RunStage(EventContent):
    """A stage of a run as the orchestrator saw it."""

    run_id: str | None = None
    state: str | None = None


class SimulationQueued(RunStage):
    event: ClassVar[str] = "simulation_queued"


class SimulationStarted(RunStage):
    event: ClassVar[str] = "simulation_started"


class SimulationRestarted(RunStage):
    event: ClassVar[str] = "simulation_restarted"


class RunEnded(RunStage):
    """A run's end (``RunWaiter._finish``); ``timed_out`` and ``never_trained`` only when so."""

    high_score: int | None = None
    episode_count: int | None = None
    error: str | None = None
    timed_out: bool | None = None
    never_trained: bool | None = None


class SimulationCompleted(RunEnded):
    event: ClassVar[str] = "simulation_completed"


class SimulationFailed(RunEnded):
    event: ClassVar[str] = "simulation_failed"


class SimulationCancelled(RunEnded):
    event: ClassVar[str] = "simulation_cancelled"


# -- Configuration --------------------------------------------------------------------------


class RoundRobinCheckpoint(EventContent):
    """The turn's position, stored before anyone is asked for a proposal."""

    event: ClassVar[str] = "round_robin_checkpoint"
    parameter_order: list[str] | None = None
    index: int | None = None


class ProposalAccepted(EventContent):
    """The broker submitted a proposal (``checkpoint_event_id`` names its turn; ``adopted``
    when a reconciler recorded a run SnakeLab created anyway)."""

    event: ClassVar[str] = "proposal_accepted"
    parameter: str | None = None
    values: dict[str, Any] | None = None
    changes: dict[str, Any] | None = None
    run_id: str | None = None
    config: dict[str, Any] | None = None
    golden_run_id: str | None = None
    golden_event_id: int | None = None
    checkpoint_event_id: int | None = None
    adopted: bool | None = None
    proposer: str | None = None


class ProposalRejected(EventContent):
    """A refused proposal: its values (printable), the code, reason and correction prompt."""

    parameter: str | None = None
    values: dict[str, Any] | None = None
    code: str | None = None
    reason: str | None = None
    prompt: str | None = None
    run_ids: list[str] | None = None
    checkpoint_event_id: int | None = None


class ProposalRejectedInvalid(ProposalRejected):
    event: ClassVar[str] = "proposal_rejected_invalid"


class ProposalRejectedDuplicate(ProposalRejected):
    """``run_ids`` are the stored runs the candidate duplicates."""

    event: ClassVar[str] = "proposal_rejected_duplicate"


class ParameterSpaceExhausted(EventContent):
    """A finite entry's every choice already ran on this seed: the turn was skipped."""

    event: ClassVar[str] = "parameter_space_exhausted"
    parameter: str | None = None
    index: int | None = None
    seed: int | None = None
    golden_run_id: str | None = None
    choices: int | None = None


class ConfigurationCompared(EventContent):
    """A run compared with the golden: ``decision`` is ``promoted``, ``retained`` or ``failed``;
    ``proposal_run_id`` and ``never_trained`` only for a retried step; under confirm, a run
    that beat the golden's high score is promoted only when its confirmation's mean is higher."""

    event: ClassVar[str] = "configuration_compared"
    golden_run_id: str | None = None
    latest_run_id: str | None = None
    current_golden_run_id: str | None = None
    reason: str | None = None
    parameter: str | None = None
    index: int | None = None
    high_score: int | None = None
    golden_high_score: int | None = None
    seed: int | None = None
    state: str | None = None
    changes: dict[str, Any] | None = None
    decision: str | None = None
    proposal_run_id: str | None = None
    never_trained: bool | None = None
    # AX3L_PROMOTION=confirm, after the run beat the golden: the means its confirmation
    # compared (promotion_confirmation_decided), or why it could not.
    candidate_mean: float | None = None
    golden_mean: float | None = None
    confirmation_problem: str | None = None


class GoldenConfig(EventContent):
    """A golden configuration and why it is one: the loop's and the broker's reference
    (``ax3l.shared.db.reads.current_golden``) and a point of the reports' pages.

    Its first six fields are required: every golden Ax3l writes has them, and the loop cannot
    go on without them. A lenient read of an odd row (``from_stored``) still never fails and
    leaves a missing one None, so the reports check them. Ax3l writes whole numbers; a whole
    float (a hand-edited row) in an otherwise whole row reads as its int.
    """

    run_id: str
    config: dict[str, Any]
    high_score: int
    seed: int
    simulations: int
    reason: str
    kind: str | None = None
    parameter: str | None = None
    index: int | None = None
    previous_run_id: str | None = None
    previous_high_score: int | None = None
    previous_seed: int | None = None
    proposer: str | None = None
    # AX3L_PROMOTION=confirm: the golden's scores on the current seed and the confirmation
    # seeds (in that order), their runs and their mean.
    confirmation_seeds: list[int] | None = None
    confirmation_scores: list[int] | None = None
    confirmation_runs: list[str] | None = None
    mean_high_score: float | None = None

    @field_validator("high_score", "seed", "simulations", mode="before")
    @classmethod
    def _whole_float(cls, value: Any) -> Any:
        return int(value) if isinstance(value, float) and value.is_integer() else value


class GoldenConfigCreated(GoldenConfig):
    """``kind`` is ``seeding``, ``promotion``, ``seed_rotation`` or ``adopted`` (``ax3l-db
    adopt``: an existing SnakeLab history's best run of its newest seed); stored with its
    ``experiment_highscores`` row."""

    event: ClassVar[str] = "golden_config_created"


class GoldenConfigReplaced(GoldenConfig):
    event: ClassVar[str] = "golden_config_replaced"


class GoldenConfigRetained(EventContent):
    """A compared run did not beat the golden configuration."""

    event: ClassVar[str] = "golden_config_retained"
    golden_run_id: str | None = None
    run_id: str | None = None
    reason: str | None = None
    parameter: str | None = None
    index: int | None = None


class SeedRotationStarted(EventContent):
    """The decision to rotate, with the exact config the baseline run uses."""

    event: ClassVar[str] = "seed_rotation_started"
    config: dict[str, Any] | None = None
    seed: int | None = None
    previous_seed: int | None = None
    golden_run_id: str | None = None
    golden_event_id: int | None = None
    golden_high_score: int | None = None
    stagnant_cycles: int | None = None


class GoldenConfigSeedIncremented(EventContent):
    """The rotation's seed step, written once per rotation."""

    event: ClassVar[str] = "golden_config_seed_incremented"
    seed: int | None = None
    previous_seed: int | None = None
    golden_run_id: str | None = None


class PromotionConfirmationStarted(EventContent):
    """Under ``AX3L_PROMOTION=confirm`` or ``race`` (``policy``; None: confirm, as histories
    before races wrote it): ``candidate_run_id`` beat the golden's high score on ``seed``; both
    configurations now run on ``seeds`` (a confirmation's seeds, or every seed a race may use)
    before the decision. ``candidate_config`` and ``golden_config`` are the configurations on
    ``seed``; ``alpha`` is a race's ``AX3L_RACE_ALPHA``."""

    event: ClassVar[str] = "promotion_confirmation_started"
    candidate_run_id: str | None = None
    golden_run_id: str | None = None
    golden_event_id: int | None = None
    seed: int | None = None
    seeds: list[int] | None = None
    candidate_high_score: int | None = None
    golden_high_score: int | None = None
    candidate_config: dict[str, Any] | None = None
    golden_config: dict[str, Any] | None = None
    parameter: str | None = None
    index: int | None = None
    policy: str | None = None
    alpha: float | None = None


class PromotionConfirmationDecided(EventContent):
    """The trial's outcome: both score lists over ``seeds`` (a confirmation's: the current seed
    first; a race's: the race seeds it used, the triggering run left out), their runs and means;
    ``decision`` is ``promoted`` or ``retained``; ``problem`` names a run that ended without a
    score. A race adds its ``mean_difference``, last ``p_value`` and the ``threshold`` a win
    needed."""

    event: ClassVar[str] = "promotion_confirmation_decided"
    candidate_run_id: str | None = None
    golden_run_id: str | None = None
    seeds: list[int] | None = None
    candidate_scores: list[int] | None = None
    golden_scores: list[int] | None = None
    candidate_runs: list[str] | None = None
    golden_runs: list[str] | None = None
    candidate_mean: float | None = None
    golden_mean: float | None = None
    decision: str | None = None
    problem: str | None = None
    policy: str | None = None
    mean_difference: float | None = None
    p_value: float | None = None
    threshold: float | None = None


class PromotionRaceRound(EventContent):
    """A round of a race (``AX3L_PROMOTION=race``): the scores of both configurations on the race
    seeds so far, their mean paired difference, the one-sided p-value (None below three seeds),
    the ``threshold`` a p-value must reach for a win and the ``verdict``: ``continue``,
    ``promoted`` or ``retained``."""

    event: ClassVar[str] = "promotion_race_round"
    candidate_run_id: str | None = None
    golden_run_id: str | None = None
    round: int | None = None
    seeds: list[int] | None = None
    candidate_scores: list[int] | None = None
    golden_scores: list[int] | None = None
    candidate_runs: list[str] | None = None
    golden_runs: list[str] | None = None
    mean_difference: float | None = None
    p_value: float | None = None
    threshold: float | None = None
    verdict: str | None = None


class ModelRecommendation(EventContent):
    """Under ``AX3L_GOLDEN=model``, after a comparison: the configuration the model of every run
    recommends (``ax3l.shared.run_model``: the best predicted mean among configurations run on
    the current seed), its ``run_id`` there, ``predicted_mean`` and ``predicted_sd``, the
    ``runs`` and ``seeds`` behind the fit, and whether the golden followed it
    (``golden_changed``; the new golden's event is written with this one)."""

    event: ClassVar[str] = "model_recommendation"
    run_id: str | None = None
    config: dict[str, Any] | None = None
    predicted_mean: float | None = None
    predicted_sd: float | None = None
    config_runs: int | None = None
    runs: int | None = None
    seeds: int | None = None
    golden_run_id: str | None = None
    golden_predicted_mean: float | None = None
    golden_changed: bool | None = None
    problem: str | None = None


# -- Alerts (AX3L_NOTIFY_URLS) ---------------------------------------------------------------


class AlertSent(EventContent):
    """A notification, claimed once: written *before* it is sent, so a restart never sends it
    again (at most once; ``ax3l.shared.alerts``). ``key`` names what it is about (e.g.
    ``golden:<event id>``); ``kind`` is ``new_golden``, ``seed_rotation``, ``loop_stopped``,
    ``service_gave_up``, ``stall`` or ``burst`` (several events of one look in one message);
    ``services`` counts the notification URLs (never the URLs: they hold tokens); ``severity``
    is apprise's type (``info``, ``success``, ``warning``, ``failure``) and ``link`` the report
    page it is about."""

    event: ClassVar[str] = "alert_sent"
    key: str | None = None
    kind: str | None = None
    title: str | None = None
    body: str | None = None
    services: int | None = None
    severity: str | None = None
    link: str | None = None


class AlertFailed(EventContent):
    """The claimed alert (its ``alert_sent`` is the parent event) did not reach every service;
    it is not sent again."""

    event: ClassVar[str] = "alert_failed"
    key: str | None = None
    kind: str | None = None
    reason: str | None = None


# -- Notes (ax3l-db note / tag) ---------------------------------------------------------------


class RunNoteAdded(EventContent):
    """A person's note on a run (``ax3l.shared.run_notes``), in their words."""

    event: ClassVar[str] = "run_note_added"
    run_id: str | None = None
    note: str | None = None


class RunTagChange(EventContent):
    run_id: str | None = None
    tag: str | None = None


class RunTagged(RunTagChange):
    """A tag put on a run."""

    event: ClassVar[str] = "run_tagged"


class RunUntagged(RunTagChange):
    """A tag taken off a run."""

    event: ClassVar[str] = "run_untagged"
