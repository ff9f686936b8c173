"""Every setting of Ax3l, read from the environment (and ``.env`` files when asked).

The database variables keep the names of the user's running system (``DB_HOST``...); the
rest are prefixed ``AX3L_``. Defaults match DESIGN.md.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Ax3l's settings; each field documents its environment variable."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    db_host: str = Field("127.0.0.1", validation_alias="DB_HOST", description="MySQL host")
    db_port: int = Field(3306, validation_alias="DB_PORT", ge=1, le=65535)
    db_user: str = Field("ax3l", validation_alias="DB_USER")
    db_password: SecretStr = Field(SecretStr(""), validation_alias="DB_PASSWORD")
    db_name: str = Field("ax3l", validation_alias=AliasChoices("AX3L_DB_NAME", "DB_NAME"))
    snakelab_db_name: str = Field("snakelab", validation_alias="AX3L_SNAKELAB_DB_NAME")
    db_pool_size: int = Field(5, validation_alias="AX3L_DB_POOL_SIZE", ge=1, le=100)
    db_pool_recycle: int = Field(
        280,
        validation_alias="AX3L_DB_POOL_RECYCLE",
        ge=1,
        description="seconds before a pooled connection is replaced (below wait_timeout)",
    )
    db_query_timeout: float = Field(
        30.0,
        validation_alias="AX3L_DB_QUERY_TIMEOUT",
        gt=0,
        description="seconds one statement may run (or wait for a lock) before it fails",
    )
    db_acquire_timeout: float = Field(
        10.0,
        validation_alias="AX3L_DB_ACQUIRE_TIMEOUT",
        gt=0,
        description="seconds to get a pooled connection (including connecting) before failing",
    )
    db_wait_max: float = Field(
        2.0,
        validation_alias="AX3L_DB_WAIT_MAX",
        gt=0,
        description="longest pause (s) between attempts to reach the database during an outage",
    )

    snakelab_endpoint: str = Field(
        "tcp://127.0.0.1:41970", validation_alias="AX3L_SNAKELAB_ENDPOINT"
    )
    snakelab_timeout: float = Field(3.0, validation_alias="AX3L_SNAKELAB_TIMEOUT", gt=0)
    snakelab_poll_interval: float = Field(5.0, validation_alias="AX3L_POLL_INTERVAL", gt=0)

    zmq_endpoint: str = Field("tcp://127.0.0.1:61970", validation_alias="AX3L_ZMQ_ENDPOINT")
    zmq_timeout: float = Field(15.0, validation_alias="AX3L_ZMQ_TIMEOUT", gt=0)
    zmq_max_message_bytes: int = Field(
        65536, validation_alias="AX3L_ZMQ_MAX_MESSAGE_BYTES", ge=1024
    )

    http_host: str = Field("127.0.0.1", validation_alias="AX3L_HTTP_HOST")
    orchestrator_port: int = Field(28871, validation_alias="AX3L_ORCHESTRATOR_PORT")
    toolbroker_port: int = Field(28872, validation_alias="AX3L_TOOLBROKER_PORT")
    reports_port: int = Field(28870, validation_alias="AX3L_REPORTS_PORT")

    llm_url: str | None = Field(None, validation_alias="AX3L_LLM_URL")
    llm_model: str | None = Field(None, validation_alias="AX3L_LLM_MODEL")
    llm_timeout: float = Field(300.0, validation_alias="AX3L_LLM_TIMEOUT", gt=0)
    llm_context_tokens: int | None = Field(
        None,
        validation_alias="AX3L_LLM_CONTEXT_TOKENS",
        ge=256,
        description="the model server's context per request; unset: its /props, else 16384",
    )
    llm_max_tokens: int = Field(
        4096,
        validation_alias="AX3L_LLM_MAX_TOKENS",
        ge=16,
        description="max_tokens of every model request (reasoning included); a cut reply fails",
    )
    conversation_timeout: float = Field(
        1800.0,
        validation_alias="AX3L_CONVERSATION_TIMEOUT",
        gt=0,
        description="seconds one model conversation may last, corrections included",
    )
    llm_constrained: bool = Field(
        True,
        validation_alias="AX3L_LLM_CONSTRAINED",
        description="narrow the tool schema sent to the model to the values still open",
    )
    hybrid_model_share: float = Field(
        0.3,
        validation_alias="AX3L_HYBRID_MODEL_SHARE",
        gt=0,
        le=1,
        description="share of turns the model proposes under the llm+tpe proposer",
    )
    llm_fallback: str = Field(
        "tpe",
        validation_alias="AX3L_LLM_FALLBACK",
        pattern="^(tpe|random|none)$",
        description="proposer that takes a turn the model failed repeatedly (none: retry forever)",
    )
    llm_fallback_after: int = Field(
        3,
        validation_alias="AX3L_LLM_FALLBACK_AFTER",
        ge=1,
        description="failed model conversations in a row on one turn before the fallback",
    )
    mcp_call_timeout: float = Field(45.0, validation_alias="AX3L_MCP_CALL_TIMEOUT", gt=0)
    seats_host: str = Field(
        "127.0.0.1",
        validation_alias="AX3L_SEATS_HOST",
        description="address of the seats' Streamable HTTP MCP endpoint (proposer external)",
    )
    seats_port: int = Field(
        28873, validation_alias="AX3L_SEATS_PORT", ge=0, le=65535, description="its port"
    )
    external_deadline: float = Field(
        300.0,
        validation_alias="AX3L_EXTERNAL_DEADLINE",
        gt=0,
        description="seconds a turn waits for a seat's accepted proposal before the fallback",
    )
    seat_rate_limit: int = Field(
        60,
        validation_alias="AX3L_SEAT_RATE_LIMIT",
        ge=1,
        description="tool calls one seat may make per minute; more are refused",
    )
    mcp_prepared_ahead: int = Field(
        1,
        validation_alias="AX3L_MCP_PREPARED_AHEAD",
        ge=0,
        le=6,
        description="turns after the current one whose MCP session is started in advance",
    )
    mcp_spawn: Literal["fork", "exec"] = Field(
        "fork",
        validation_alias="AX3L_MCP_SPAWN",
        description="how a conversation's MCP child starts: forked from a pre-imported"
        " parent (fork) or as a new interpreter (exec)",
    )
    pipeline: bool = Field(
        False,
        validation_alias="AX3L_PIPELINE",
        description="ask the model for the next turn while a run trains; its tool call is"
        " held until that run is compared (the model then reasons from a history that"
        " lacks the run still training)",
    )
    max_corrections: int = Field(3, validation_alias="AX3L_MAX_CORRECTIONS", ge=0)
    retry_backoff_max: float = Field(60.0, validation_alias="AX3L_RETRY_BACKOFF_MAX", gt=0)
    proposer: str | None = Field(None, validation_alias="AX3L_PROPOSER")
    seed_stagnant_rounds: int = Field(9, validation_alias="AX3L_SEED_STAGNANT_ROUNDS", ge=1)
    baseline_max_attempts: int = Field(
        3,
        validation_alias="AX3L_BASELINE_MAX_ATTEMPTS",
        ge=1,
        description="runs of a seeding or seed-rotation baseline that may fail after training"
        " before the loop stops",
    )
    infra_retry_max: int = Field(
        3,
        validation_alias="AX3L_INFRA_RETRY_MAX",
        ge=0,
        description="resubmissions of a run SnakeLab failed before its first episode",
    )
    run_deadline_seconds: float = Field(
        21600.0,
        validation_alias="AX3L_RUN_DEADLINE_SECONDS",
        gt=0,
        description="seconds after its submission a run that is not terminal counts as failed",
    )

    schema_path: Path | None = Field(
        None,
        validation_alias="AX3L_SCHEMA_PATH",
        description="SnakeLab's config schema file; the bundled copy when unset",
    )
    config_file: Path = Field(
        Path("/opt/prod/ax3l/conf/ax3l.json"),
        validation_alias="AX3L_CONFIG_FILE",
        description="the user's Ax3l config file; its zmq binding is the tool endpoint fallback",
    )
    raw_logs_enabled: bool = Field(False, validation_alias="AX3L_RAW_LOGS_ENABLED")
    output_dir: Path | None = Field(None, validation_alias="AX3L_OUTPUT_DIR")

    ax3l_version: str = Field("ax3l-0.1.0", validation_alias="AX3L_VERSION")

    def schema_file(self) -> str | None:
        return None if self.schema_path is None else str(self.schema_path)


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read once; tests override the dependency instead."""
    return Settings()
