"""Every setting of Ax3l, read from the environment (and ``.env`` files when asked).

The database variables keep the names of the user's running system (``DB_HOST``...); the
rest are prefixed ``AX3L_``. docs/settings.md lists every variable with its default
(tests/test_settings_documented.py keeps the two equal). Any variable may instead be given as
``<NAME>_FILE``, the path of a file holding its value (compose secrets, ``/run/secrets/...``);
the plain variable wins when both are set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

# The orchestrator's proposers (``AX3L_PROPOSER``; ``ax3l.orchestrator.proposers.make_proposer``
# builds them), here so ``ax3l-compare`` reads the same list without importing the orchestrator.
PROPOSER_NAMES = ("llm", "tpe", "random", "external", "llm+tpe", "model", "llm+model")
# Those that ask the model server (AX3L_LLM_URL).
LLM_PROPOSERS = ("llm", "llm+tpe", "llm+model")


def setting(default: Any, variable: str | AliasChoices, **limits: Any) -> Any:
    """A field read from the environment variable ``variable`` (or any of its choices), with
    its default and its limits (``ge``, ``gt``, ``le``, ``pattern``); the string under the field
    is its description."""
    return Field(default, validation_alias=variable, **limits)


# Hosts the HTTP servers answer (AX3L_ALLOWED_HOSTS): loopback, and the compose services' names.
DEFAULT_ALLOWED_HOSTS = "localhost,127.0.0.1,[::1],reports,orchestrator,toolbroker"


def read_value_file(variable: str, path: str) -> str:
    """The value in the file ``path`` named by ``<variable>_FILE``, without its trailing
    newline; an unreadable file is a clear error naming the variable."""
    try:
        return Path(path).read_text().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{variable}_FILE={path}: cannot read it ({exc})") from None


def variable_names(field: FieldInfo) -> list[str]:
    """The environment variables of a field, in the order they are tried."""
    alias = field.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
    return [choice for choice in choices if isinstance(choice, str)]


class FileVariables(PydanticBaseSettingsSource):
    """``<NAME>_FILE`` for every variable ``NAME`` that is not set itself: the file's contents."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str] | None = None):
        super().__init__(settings_cls)
        self.env = os.environ if env is None else env

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every field at once

    def __call__(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for field in self.settings_cls.model_fields.values():
            for name in variable_names(field):
                path = self.env.get(f"{name}_FILE")
                if path and name not in self.env:
                    found[name] = read_value_file(name, path)
        return found


class Settings(BaseSettings):
    """Ax3l's settings; each field documents its environment variable."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment, then ``<NAME>_FILE`` variables, then the defaults' other sources."""
        return (
            init_settings,
            env_settings,
            FileVariables(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )

    model_config = SettingsConfigDict(
        extra="ignore", populate_by_name=True, use_attribute_docstrings=True
    )

    db_host: str = setting("127.0.0.1", "DB_HOST")
    """MySQL host"""
    db_port: int = setting(3306, "DB_PORT", ge=1, le=65535)
    db_user: str = setting("ax3l", "DB_USER")
    db_password: SecretStr = setting(SecretStr(""), "DB_PASSWORD")
    db_name: str = setting("ax3l", AliasChoices("AX3L_DB_NAME", "DB_NAME"))
    snakelab_db_name: str = setting("snakelab", "AX3L_SNAKELAB_DB_NAME")
    db_pool_size: int = setting(5, "AX3L_DB_POOL_SIZE", ge=1, le=100)
    db_pool_recycle: int = setting(280, "AX3L_DB_POOL_RECYCLE", ge=1)
    """seconds before a pooled connection is replaced (below wait_timeout)"""
    db_query_timeout: float = setting(30.0, "AX3L_DB_QUERY_TIMEOUT", gt=0)
    """seconds one statement may run (or wait for a lock) before it fails"""
    db_acquire_timeout: float = setting(10.0, "AX3L_DB_ACQUIRE_TIMEOUT", gt=0)
    """seconds to get a pooled connection (including connecting) before failing"""
    db_wait_max: float = setting(2.0, "AX3L_DB_WAIT_MAX", gt=0)
    """longest pause (s) between attempts to reach the database during an outage"""

    snakelab_endpoint: str = setting("tcp://127.0.0.1:41970", "AX3L_SNAKELAB_ENDPOINT")
    snakelab_endpoints: str | None = setting(None, "AX3L_SNAKELAB_ENDPOINTS")
    """several SnakeLab hosts sharing one snakelab database, comma-separated (unset:
    AX3L_SNAKELAB_ENDPOINT alone); runs submitted together go to idle hosts"""
    snakelab_timeout: float = setting(3.0, "AX3L_SNAKELAB_TIMEOUT", gt=0)
    snakelab_poll_interval: float = setting(5.0, "AX3L_POLL_INTERVAL", gt=0)
    submit_settle_wait: float = setting(8.0, "AX3L_SUBMIT_SETTLE_WAIT", gt=0)
    """seconds to wait for SnakeLab to answer again after it did not answer a submission in
    time, before the outcome is settled (run adopted or known not to exist); the broker's wait
    must fit in the tool channel's timeout together with AX3L_SNAKELAB_TIMEOUT (checked at
    start: ``tool_channel.settle_does_not_fit``)"""

    zmq_endpoint: str = setting("tcp://127.0.0.1:61970", "AX3L_ZMQ_ENDPOINT")
    zmq_timeout: float = setting(15.0, "AX3L_ZMQ_TIMEOUT", gt=0)
    zmq_max_message_bytes: int = setting(65536, "AX3L_ZMQ_MAX_MESSAGE_BYTES", ge=1024)

    http_host: str = setting("127.0.0.1", "AX3L_HTTP_HOST")
    orchestrator_port: int = setting(28871, "AX3L_ORCHESTRATOR_PORT")
    toolbroker_port: int = setting(28872, "AX3L_TOOLBROKER_PORT")
    reports_port: int = setting(28870, "AX3L_REPORTS_PORT")
    allowed_hosts: str = setting(DEFAULT_ALLOWED_HOSTS, "AX3L_ALLOWED_HOSTS")
    """Host names the report server and the status APIs answer, comma-separated (``*.example.org``
    for subdomains, ``*`` for any); any other Host header gets 400 (DNS rebinding)"""

    llm_url: str | None = setting(None, "AX3L_LLM_URL")
    llm_model: str | None = setting(None, "AX3L_LLM_MODEL")
    llm_timeout: float = setting(300.0, "AX3L_LLM_TIMEOUT", gt=0)
    llm_context_tokens: int | None = setting(None, "AX3L_LLM_CONTEXT_TOKENS", ge=256)
    """the model server's context per request; unset: its /props, else 16384"""
    llm_max_tokens: int = setting(4096, "AX3L_LLM_MAX_TOKENS", ge=16)
    """max_tokens of every model request (reasoning included); a cut reply fails"""
    conversation_timeout: float = setting(1800.0, "AX3L_CONVERSATION_TIMEOUT", gt=0)
    """seconds one model conversation may last, corrections included"""
    llm_constrained: bool = setting(True, "AX3L_LLM_CONSTRAINED")
    """narrow the tool schema sent to the model to the values still open"""
    llm_grammar: bool = setting(False, "AX3L_LLM_GRAMMAR")
    """the reply forced by a grammar llama-server enforces: the tool's arguments as one JSON
    object of legal, open values (reply_grammar.py); off: the tool-calling request"""
    llm_share: float = setting(
        0.3, AliasChoices("AX3L_LLM_SHARE", "AX3L_HYBRID_MODEL_SHARE"), gt=0, le=1
    )
    """share of turns the LLM decides under llm+tpe and llm+model (a seeded draw per turn);
    AX3L_HYBRID_MODEL_SHARE is its former name"""
    llm_fallback: str = setting("tpe", "AX3L_LLM_FALLBACK", pattern="^(tpe|random|none)$")
    """proposer that takes a turn the model failed repeatedly (none: retry forever)"""
    llm_fallback_after: int = setting(3, "AX3L_LLM_FALLBACK_AFTER", ge=1)
    """failed model conversations in a row on one turn before the fallback"""
    mcp_call_timeout: float = setting(45.0, "AX3L_MCP_CALL_TIMEOUT", gt=0)
    seats_host: str = setting("127.0.0.1", "AX3L_SEATS_HOST")
    """address of the seats' Streamable HTTP MCP endpoint (proposer external)"""
    seats_port: int = setting(28873, "AX3L_SEATS_PORT", ge=0, le=65535)
    """its port"""
    external_deadline: float = setting(300.0, "AX3L_EXTERNAL_DEADLINE", gt=0)
    """seconds a turn waits for a seat's accepted proposal before the fallback"""
    seat_rate_limit: int = setting(60, "AX3L_SEAT_RATE_LIMIT", ge=1)
    """tool calls one seat may make per minute; more are refused"""
    seats_allowed_hosts: str = setting("", "AX3L_SEATS_ALLOWED_HOSTS")
    """Host headers the seats' endpoint answers besides 127.0.0.1, localhost and [::1] (any
    port): comma-separated host, host:port or host:* (e.g. the name a TLS proxy publishes);
    an Origin header must be http(s):// one of the same"""
    seats_trusted_proxies: str = setting("", "AX3L_SEATS_TRUSTED_PROXIES")
    """addresses or networks (comma-separated) of reverse proxies whose X-Forwarded-For names
    the seats' client; unset: the socket's peer is the client"""
    seats_max_connections: int = setting(64, "AX3L_SEATS_MAX_CONNECTIONS", ge=1)
    """concurrent connections and requests the seats' endpoint serves; more get 503"""
    seats_rate_global: float = setting(200.0, "AX3L_SEATS_RATE_GLOBAL", gt=0)
    """requests a second the seats' endpoint takes from all clients without a seat's token
    together (bursts of twice that); more get 429; a seat's requests never draw on it"""
    seats_rate_per_address: float = setting(20.0, "AX3L_SEATS_RATE_PER_ADDRESS", gt=0)
    """requests a second it takes from one client address without a seat's token (IPv6: one
    /64), and from each seat (bursts of twice that); more get 429"""
    seat_token_refresh: float = setting(5.0, "AX3L_SEAT_TOKEN_REFRESH", gt=0, le=300)
    """seconds the seats' endpoint trusts its copy of the seats table: a revoked token stops
    working (and a new one starts) within this bound"""
    seats_process: bool = setting(True, "AX3L_SEATS_PROCESS")
    """run the seats' endpoint in a process of its own, so a flood at it costs the loop's
    process nothing (false: inside the orchestrator)"""
    seats_board_socket: str | None = setting(None, "AX3L_SEATS_BOARD_SOCKET")
    """a unix socket's path: the seats' endpoint runs as a service of its own (compose's seats,
    make run's with the proposer external) listening there, and the orchestrator keeps the turn
    board through it; unset: the orchestrator starts the endpoint as its child process"""
    seats_db_user: str | None = setting(None, "AX3L_SEATS_DB_USER")
    """the seats' endpoint process's own database user: it may read seats and SnakeLab's
    tables, nothing more (``ax3l-db grant-seats``); unset: DB_USER"""
    seats_db_password: SecretStr = setting(SecretStr(""), "AX3L_SEATS_DB_PASSWORD")
    """its password (set both or neither)"""
    seat_turn_share: float = setting(1.0, "AX3L_SEAT_TURN_SHARE", gt=0, le=1)
    """largest share of the last 10 turns won by seats that one seat may win; a seat over it
    is refused with a reason (1: no quota, the first accepted submission wins)"""
    mcp_prepared_ahead: int = setting(1, "AX3L_MCP_PREPARED_AHEAD", ge=0, le=6)
    """turns after the current one whose MCP session is started in advance"""
    mcp_spawn: Literal["fork", "exec"] = setting("fork", "AX3L_MCP_SPAWN")
    """how a conversation's MCP child starts: forked from a pre-imported parent (fork) or as a new
    interpreter (exec)"""
    pipeline: bool = setting(False, "AX3L_PIPELINE")
    """ask the model for the next turn while a run trains; its tool call is held until that run is
    compared (the model then reasons from a history that lacks the run still training)"""
    max_corrections: int = setting(3, "AX3L_MAX_CORRECTIONS", ge=0)
    retry_backoff_max: float = setting(60.0, "AX3L_RETRY_BACKOFF_MAX", gt=0)
    unexpected_failure_limit: int = setting(10, "AX3L_UNEXPECTED_FAILURE_LIMIT", ge=1)
    """times in a row the same unexpected failure of a loop step (its type and place) is
    retried before the loop stops with a message naming it"""
    proposer: str | None = setting(None, "AX3L_PROPOSER")
    proposer_seed: int | None = setting(None, "AX3L_PROPOSER_SEED", ge=0)
    """seed of the random and tpe proposers' draws (unset: a fresh one each start);
    ax3l-compare sets it per repeat, so an uninterrupted repeat is reproducible"""
    seed_stagnant_rounds: int = setting(9, "AX3L_SEED_STAGNANT_ROUNDS", ge=1)
    baseline_max_attempts: int = setting(3, "AX3L_BASELINE_MAX_ATTEMPTS", ge=1)
    """runs of a seeding or seed-rotation baseline that may fail after training before the loop
    stops"""
    promotion: Literal["single", "confirm", "race"] = setting("single", "AX3L_PROMOTION")
    """how a run that beats the golden's high score is promoted: single (the spec's rule: at
    once), confirm (the candidate and the golden first run on AX3L_CONFIRM_SEEDS more seeds,
    and the candidate is promoted only when its mean over the shared seeds is strictly higher)
    or race (they run on 1, then 2, then 4... more seeds, up to AX3L_RACE_MAX_SEEDS, and the
    candidate is promoted only on a paired t-test win at AX3L_RACE_ALPHA; a loser is stopped
    as soon as its mean difference is 0 or less); a change takes effect at the orchestrator's
    next step after its restart"""
    confirm_seeds: int = setting(2, "AX3L_CONFIRM_SEEDS", ge=1, le=10)
    """extra seeds of a confirmation under AX3L_PROMOTION=confirm: seed + 1,000,001 onwards,
    a range no seed rotation reaches"""
    race_max_seeds: int = setting(8, "AX3L_RACE_MAX_SEEDS", ge=3, le=64)
    """most seeds a race runs (seed + 1,000,001 onwards, as a confirmation's) under
    AX3L_PROMOTION=race"""
    race_alpha: float = setting(0.1, "AX3L_RACE_ALPHA", gt=0, lt=1)
    """a race promotes an equal challenger at most this often (split over its rounds)"""
    golden: Literal["spec", "model"] = setting("spec", "AX3L_GOLDEN")
    """spec: the golden is the last promoted run's configuration (the spec's rule); model:
    after each comparison the golden follows the model of every run (the configuration run on
    the current seed with the best predicted mean)"""
    model_lower_bound: float = setting(0.0, "AX3L_MODEL_LOWER_BOUND", ge=0, le=3)
    """the run model recommends the best predicted mean minus this many sds (0: the best
    mean)"""
    infra_retry_max: int = setting(3, "AX3L_INFRA_RETRY_MAX", ge=0)
    """resubmissions of a run SnakeLab failed before its first episode"""
    run_deadline_seconds: float = setting(21600.0, "AX3L_RUN_DEADLINE_SECONDS", gt=0)
    """seconds after its submission a run that is not terminal counts as failed"""
    notify_urls: SecretStr | None = setting(None, "AX3L_NOTIFY_URLS")
    """apprise URLs (space or comma separated: ntfy, mailto, tgram, slack, json webhooks...)
    that alerts go to; unset or empty: no alerts"""
    stall_factor: float = setting(3.0, "AX3L_STALL_FACTOR", gt=0)
    """a stall alert goes out when no run has completed for this many median run times, and for a
    minute at least"""
    alert_poll_interval: float = setting(30.0, "AX3L_ALERT_POLL_INTERVAL", gt=0)
    """seconds between the orchestrator's looks for alerts (goldens, seed rotations, stalls)"""
    reports_url: str | None = setting(None, "AX3L_REPORTS_URL")
    """the report server's address as the alerts' readers open it (a phone: the machine's name
    or a proxy's URL); each alert links to its page there; unset: AX3L_HTTP_HOST and
    AX3L_REPORTS_PORT (http://127.0.0.1:28870)"""

    schema_path: Path | None = setting(None, "AX3L_SCHEMA_PATH")
    """SnakeLab's config schema file; the bundled copy when unset"""
    config_file: Path = setting(Path("/opt/prod/ax3l/conf/ax3l.json"), "AX3L_CONFIG_FILE")
    """the user's Ax3l config file; its zmq binding is the tool endpoint fallback"""
    raw_logs_enabled: bool = setting(False, "AX3L_RAW_LOGS_ENABLED")
    output_dir: Path | None = setting(None, "AX3L_OUTPUT_DIR")

    ax3l_version: str = setting("ax3l-0.1.0", "AX3L_VERSION")

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts_are_patterns(cls, value: str) -> str:
        from ax3l.shared.trusted_hosts import host_patterns

        host_patterns(value)
        return value

    def snakelab_hosts(self) -> list[str]:
        """The SnakeLab endpoints: AX3L_SNAKELAB_ENDPOINTS, else AX3L_SNAKELAB_ENDPOINT."""
        from ax3l.shared.snakelab_hosts import parse_endpoints

        return parse_endpoints(self.snakelab_endpoints, self.snakelab_endpoint)

    def schema_file(self) -> str | None:
        return None if self.schema_path is None else str(self.schema_path)

    def local_url(self, port: int) -> str:
        """``http://AX3L_HTTP_HOST:port``, where a service of this machine listens."""
        # A wildcard listen address is not an address to connect to.
        host = "127.0.0.1" if self.http_host in ("", "0.0.0.0", "::") else self.http_host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}"

    def reports_link(self) -> str:
        """The report server's base URL in alerts' links: AX3L_REPORTS_URL, else the local
        one."""
        return (self.reports_url or self.local_url(self.reports_port)).rstrip("/")


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read once; tests override the dependency instead."""
    return Settings()
