"""Comparing proposers, models and seats by what their turns achieved in this experiment."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ProposerStats(BaseModel):
    """One proposer (llm, tpe, random, ...) over the whole history."""

    model_config = ConfigDict(frozen=True)

    proposer: str
    conversations: int
    proposals: int
    scored_runs: int
    mean_score: float | None
    best_score: int | None
    new_goldens: int
    fallback_turns: int = Field(description="turns it took because the model failed them")
    fallback_proposals: int = Field(description="accepted proposals of those fallback turns")
    turns_lost_to_fallback: int = Field(
        description="turns it failed that a fallback proposer then took"
    )


class ModelStats(BaseModel):
    """One model the model server has answered as."""

    model_config = ConfigDict(frozen=True)

    model: str = Field(
        description="the `model` the server named in its replies, else AX3L_LLM_MODEL"
    )
    conversations: int
    accepted_proposals: int
    wasted_turns: int = Field(description="failed model requests and rejected proposals")
    wasted_kinds: dict[str, int] = Field(
        description="per `llm_request_failed` kind and per `proposal_rejected_*` event"
    )
    fallback_turns: int = Field(description="turns a fallback proposer took from it")
    requests: int = Field(description="requests with a known duration")
    median_seconds: float | None = Field(
        description="per request: llama-server's timings, else prompt to reply event"
    )
    p95_seconds: float | None
    completion_tokens: int
    completion_tokens_per_accepted: float | None
    new_goldens: int


class SeatStats(BaseModel):
    """One seat of the external proposer (an outside agent), counted like a model."""

    model_config = ConfigDict(frozen=True)

    seat: str = Field(description="the seat's name (an outside agent of the external proposer)")
    calls: int = Field(description="tool calls at the seats' endpoint, refused ones included")
    refused_calls: int
    turns_taken: int = Field(description="turns in which it submitted at least once")
    accepted_proposals: int
    wasted_submissions: int = Field(description="submissions rejected or refused")
    wasted_kinds: dict[str, int] = Field(
        description="per rejection code (invalid_value, duplicate_config) and refusal reason"
    )
    median_seconds_to_submission: float | None = Field(
        description="from the turn's opening to its accepted submission"
    )
    new_goldens: int


class ProposersOut(BaseModel):
    proposers: list[ProposerStats]
    compared: bool
    models: list[ModelStats] = Field(description="the model leaderboard")
    seats: list[SeatStats] = Field(default_factory=list, description="the seat leaderboard")
