"""The sections of Ax3l's settings: each a group of environment variables that belong together,
read by the services that need them (``services.py`` composes each service's class from them).

The database variables keep the names of the user's running system (``DB_HOST``...); the rest
are prefixed ``AX3L_``. Any variable may instead be given as ``<NAME>_FILE``, the path of a file
holding its value; the plain variable wins when both are set. Each field's docstring is its
description in docs/settings.md (``scripts/settings_doc.py`` writes the page; ``make
settings-doc``), in Markdown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, SecretStr, field_validator

from ax3l.shared.settings.base import Section, setting

# The orchestrator's proposers (``AX3L_PROPOSER``; ``ax3l.orchestrator.proposers.make_proposer``
# builds them), here so ``ax3l-compare`` reads the same list without importing the orchestrator.
PROPOSER_NAMES = ("llm", "tpe", "random", "external", "llm+tpe", "model", "llm+model")
# Those that ask the model server (AX3L_LLM_URL).
LLM_PROPOSERS = ("llm", "llm+tpe", "llm+model")
# Hosts the HTTP servers answer (AX3L_ALLOWED_HOSTS): loopback, and the compose services' names.
DEFAULT_ALLOWED_HOSTS = "localhost,127.0.0.1,[::1],reports,orchestrator,toolbroker"


class DbSettings(Section):
    """The database: where Ax3l's and SnakeLab's are, the login, and how a service's pool
    behaves."""

    db_host: str = setting("127.0.0.1", "DB_HOST")
    """MySQL/MariaDB host"""
    db_port: int = setting(3306, "DB_PORT", ge=1, le=65535)
    """MySQL port (`make run`/`make test` use 33306 via `.run/db.env`)"""
    db_user: str = setting("ax3l", "DB_USER")
    """Ax3l's database user"""
    db_password: SecretStr = setting(SecretStr(""), "DB_PASSWORD")
    """its password (never logged)"""
    db_name: str = setting("ax3l", AliasChoices("AX3L_DB_NAME", "DB_NAME"))
    """Ax3l's database (`DB_NAME` is read when `AX3L_DB_NAME` is unset)"""
    snakelab_db_name: str = setting("snakelab", "AX3L_SNAKELAB_DB_NAME")
    """SnakeLab's database (read only)"""
    db_pool_size: int = setting(5, "AX3L_DB_POOL_SIZE", ge=1, le=100)
    """connections per service"""
    db_pool_recycle: int = setting(280, "AX3L_DB_POOL_RECYCLE", ge=1)
    """seconds before a pooled connection is replaced (below `wait_timeout`)"""
    db_query_timeout: float = setting(30.0, "AX3L_DB_QUERY_TIMEOUT", gt=0)
    """seconds one statement may run or wait for a lock (MariaDB `max_statement_time`, MySQL
    `max_execution_time` for reads, `lock_wait_timeout`, plus a client deadline 2 s later); a
    hung query fails the step, never hangs the service"""
    db_acquire_timeout: float = setting(10.0, "AX3L_DB_ACQUIRE_TIMEOUT", gt=0)
    """seconds to get a pooled connection, connecting included"""
    db_wait_max: float = setting(2.0, "AX3L_DB_WAIT_MAX", gt=0)
    """longest pause (s) between attempts to reach the database during an outage (backoff from
    0.2 s)"""
    ax3l_version: str = setting("ax3l-0.1.0", "AX3L_VERSION")
    """stamped on every event"""


class SnakeLabSettings(Section):
    """SnakeLab's control socket: where it is and how long its requests may take."""

    snakelab_endpoint: str = setting("tcp://127.0.0.1:41970", "AX3L_SNAKELAB_ENDPOINT")
    """SnakeLab's control socket"""
    snakelab_endpoints: str | None = setting(None, "AX3L_SNAKELAB_ENDPOINTS")
    """several SnakeLab hosts sharing one `snakelab` database, comma-separated (unset:
    `AX3L_SNAKELAB_ENDPOINT` alone); runs submitted together (a confirmation's) go to idle
    hosts, a host that does not answer is skipped until it does (each reference host needs its
    own `SNAKELAB_HOST_ID`)"""
    snakelab_timeout: float = setting(3.0, "AX3L_SNAKELAB_TIMEOUT", gt=0)
    """seconds per SnakeLab request (never retried)"""
    submit_settle_wait: float = setting(8.0, "AX3L_SUBMIT_SETTLE_WAIT", gt=0)
    """after SnakeLab did not answer a submission in time: seconds to wait for it to answer
    again before the outcome counts as unknown (the broker's wait plus the timeout must fit in
    `AX3L_ZMQ_TIMEOUT`: the broker and the orchestrator refuse to start otherwise, exit 2; the
    orchestrator waits 5 s plus the timeout plus this before it fails the step and tries again)"""

    def snakelab_hosts(self) -> list[str]:
        """The SnakeLab endpoints: AX3L_SNAKELAB_ENDPOINTS, else AX3L_SNAKELAB_ENDPOINT."""
        from ax3l.shared.snakelab_hosts import parse_endpoints

        return parse_endpoints(self.snakelab_endpoints, self.snakelab_endpoint)


class ZmqSettings(Section):
    """The tool channel: the broker binds it, the MCP servers and the seats' endpoint ask it."""

    zmq_endpoint: str = setting("tcp://127.0.0.1:61970", "AX3L_ZMQ_ENDPOINT")
    """tool channel: the broker binds it, MCP children connect to it"""
    zmq_timeout: float = setting(15.0, "AX3L_ZMQ_TIMEOUT", gt=0)
    """seconds per tool-channel request (never retried)"""
    zmq_max_message_bytes: int = setting(65536, "AX3L_ZMQ_MAX_MESSAGE_BYTES", ge=1024)
    """larger tool messages are refused"""
    config_file: Path = setting(Path("/opt/prod/ax3l/conf/ax3l.json"), "AX3L_CONFIG_FILE")
    """the user's Ax3l config; its zmq binding is the MCP server's fallback endpoint"""


class SchemaSettings(Section):
    """SnakeLab's configuration schema."""

    schema_path: Path | None = setting(None, "AX3L_SCHEMA_PATH", shown="unset: the bundled copy")
    """SnakeLab's config schema file (the only source of ranges)"""

    def schema_file(self) -> str | None:
        return None if self.schema_path is None else str(self.schema_path)


class HttpSettings(Section):
    """Where the stack's HTTP services listen and which host names they answer."""

    http_host: str = setting("127.0.0.1", "AX3L_HTTP_HOST")
    """address the REST services listen on"""
    orchestrator_port: int = setting(28871, "AX3L_ORCHESTRATOR_PORT")
    """orchestrator status API"""
    toolbroker_port: int = setting(28872, "AX3L_TOOLBROKER_PORT")
    """toolbroker REST"""
    reports_port: int = setting(28870, "AX3L_REPORTS_PORT")
    """report pages"""
    allowed_hosts: str = setting(DEFAULT_ALLOWED_HOSTS, "AX3L_ALLOWED_HOSTS")
    """host names the report server and the orchestrator's and broker's status APIs answer,
    comma-separated (`*.example.org`: its subdomains; `*`: any); a request with any other `Host`
    header gets 400 (against DNS rebinding). Add every name a service is reached under: the one
    you publish the reports under, and the orchestrator's host in `AX3L_ORCHESTRATOR_URL` when
    the report server runs elsewhere"""

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts_are_patterns(cls, value: str) -> str:
        from ax3l.shared.trusted_hosts import host_patterns

        host_patterns(value)
        return value

    def local_url(self, port: int) -> str:
        """``http://AX3L_HTTP_HOST:port``, where a service of this machine listens."""
        # A wildcard listen address is not an address to connect to.
        host = "127.0.0.1" if self.http_host in ("", "0.0.0.0", "::") else self.http_host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}"


class LlmSettings(Section):
    """The model server and the conversations the LLM proposers hold with it."""

    llm_url: str | None = setting(None, "AX3L_LLM_URL")
    """llama-server base URL (e.g. `http://127.0.0.1:27770`); unset: the `tpe` proposer"""
    llm_model: str | None = setting(None, "AX3L_LLM_MODEL")
    """`model` sent to the chat completions endpoint, only when set"""
    llm_timeout: float = setting(300.0, "AX3L_LLM_TIMEOUT", gt=0)
    """seconds per LLM request (a deadline for the whole request)"""
    llm_max_tokens: int = setting(4096, "AX3L_LLM_MAX_TOKENS", ge=16)
    """`max_tokens` of every model request, reasoning included; a reply cut there is a `length`
    failure, corrected in the conversation"""
    llm_context_tokens: int | None = setting(
        None,
        "AX3L_LLM_CONTEXT_TOKENS",
        ge=256,
        shown="unset: llama-server's `/props`, else `16384`",
    )
    """the model's context per request; the opening prompts get it minus `AX3L_LLM_MAX_TOKENS`,
    the tool, the template and room for the corrections, and the comparable history is
    summarised to fit"""
    llm_constrained: bool = setting(True, "AX3L_LLM_CONSTRAINED")
    """constrained proposals: the tool schema sent to the model offers only the open values (a
    finite single's untested values as `enum`, the reward pair's as `anyOf`, ranges for
    continuous settings) and the prompt lists them; `false` sends the tool as discovered"""
    llm_grammar: bool = setting(False, "AX3L_LLM_GRAMMAR")
    """`true`: every proposal request carries a GBNF `grammar` that llama-server enforces
    instead of the tool: the reply is the tool's arguments as one JSON object whose values are
    legal and open (a finite entry's open values; a continuous one's every decimal in range at
    the proposers' precision, the tested ones excluded; with `AX3L_LLM_CONSTRAINED=false` every
    legal value but the golden's). Only llama-server enforces it (see [A model that never wastes
    a turn](model-server.md#a-model-that-never-wastes-a-turn))"""
    conversation_timeout: float = setting(1800.0, "AX3L_CONVERSATION_TIMEOUT", gt=0)
    """seconds one model conversation may last, corrections included"""
    llm_fallback: str = setting("tpe", "AX3L_LLM_FALLBACK", pattern="^(tpe|random|none)$")
    """proposer that takes a turn the model failed `AX3L_LLM_FALLBACK_AFTER` times in a row:
    `tpe`, `random` or `none` (retry the model forever)"""
    llm_fallback_after: int = setting(3, "AX3L_LLM_FALLBACK_AFTER", ge=1)
    """failed model conversations in a row on one turn before the fallback takes it"""
    llm_share: float = setting(
        0.3, AliasChoices("AX3L_LLM_SHARE", "AX3L_HYBRID_MODEL_SHARE"), gt=0, le=1
    )
    """share of the turns the LLM decides under `llm+tpe` and `llm+model`: after `n` accepted
    proposals a draw seeded by `AX3L_PROPOSER_SEED` (0 when unset) and `n`, so a restart gives a
    turn to the same proposer and two arms of a comparison repeat give the LLM the same steps
    (`AX3L_HYBRID_MODEL_SHARE`, its former name, is read when it is unset)"""
    raw_logs_enabled: bool = setting(False, "AX3L_RAW_LOGS_ENABLED")
    """raw capture files of LLM traffic"""
    output_dir: Path | None = setting(
        None,
        "AX3L_OUTPUT_DIR",
        shown="unset: `ax3l-capture` in the working directory",
    )
    """capture directory (also `--output PATH`)"""


class McpSettings(Section):
    """How the orchestrator runs a conversation's MCP server (its child process)."""

    mcp_call_timeout: float = setting(45.0, "AX3L_MCP_CALL_TIMEOUT", gt=0)
    """seconds per MCP tool call"""
    mcp_prepared_ahead: int = setting(1, "AX3L_MCP_PREPARED_AHEAD", ge=0, le=6)
    """turns after the current one whose MCP session is started in advance (while the run
    trains), so a conversation need not wait for its child; `0`: each conversation starts its
    own"""
    mcp_spawn: Literal["fork", "exec"] = setting("fork", "AX3L_MCP_SPAWN")
    """how a conversation's MCP child starts: `fork`ed from a pre-imported zygote (about 30 ms;
    the import second is paid once per orchestrator) or `exec`, a new interpreter per
    conversation (about a second of CPU)"""


class LoopSettings(Section):
    """The experiment loop: its proposer, its waits, its retries and when it gives up."""

    proposer: str | None = setting(
        None,
        "AX3L_PROPOSER",
        shown="unset: `llm` with a URL, else `tpe`",
    )
    """`llm`, `tpe`, `random`, `model` (the value the model of every run expects to improve
    most, see [The model of every run](user-guide.md#the-model-of-every-run-and-racing)),
    `external` (seats take the turns, see [Connect your own agent](agents.md)), `llm+tpe` (a
    hybrid: TPE proposes most turns, the LLM a share of them with TPE's state in its prompt) or
    `llm+model` (a hybrid: the model proposer proposes most turns, the LLM a share of them with
    the model of every run's estimates and suggestion in its prompt)"""
    proposer_seed: int | None = setting(None, "AX3L_PROPOSER_SEED", ge=0)
    """seed of the `random`, `tpe` and `model` proposers' draws (unset: a fresh one at each
    start); `ax3l-compare` sets each repeat's, so an uninterrupted repeat is reproducible and a
    Ray comparison equals a local one"""
    snakelab_poll_interval: float = setting(5.0, "AX3L_POLL_INTERVAL", gt=0)
    """seconds between `simulation.status` polls of a run (after its submission the waits start
    at 10 ms and double up to this, so a short run's end is seen at once)"""
    pipeline: bool = setting(False, "AX3L_PIPELINE", shown="`off`")
    """`on`: while a run trains, the model is already asked for the next turn; its tool call is
    held until that run is compared and the turn's checkpoint written, then executed (a value
    that became a duplicate is corrected as usual). Off by default: the model then reasons from
    a history that lacks the run still training. Any restart, rotation or skip simply discards
    the held conversation"""
    max_corrections: int = setting(3, "AX3L_MAX_CORRECTIONS", ge=0)
    """corrections within one conversation (the broker's rejections and the model's own
    mistakes: prose, wrong tool, wrong arguments, a cut reply) before it ends"""
    retry_backoff_max: float = setting(60.0, "AX3L_RETRY_BACKOFF_MAX", gt=0)
    """longest backoff (s) between retries of a failed conversation"""
    unexpected_failure_limit: int = setting(10, "AX3L_UNEXPECTED_FAILURE_LIMIT", ge=1)
    """times in a row the same unexpected failure of a loop step (its type and place) is retried
    before the loop stops with a message naming it (see [Unexpected
    failures](operations.md#unexpected-failures))"""
    seed_stagnant_rounds: int = setting(9, "AX3L_SEED_STAGNANT_ROUNDS", ge=1)
    """stagnant cycles before the seed rotates"""
    baseline_max_attempts: int = setting(3, "AX3L_BASELINE_MAX_ATTEMPTS", ge=1)
    """runs of a seeding or seed-rotation baseline that may end without a high score after
    training; then the loop stops naming the run and its error"""
    infra_retry_max: int = setting(3, "AX3L_INFRA_RETRY_MAX", ge=0)
    """resubmissions, as the same step, of a run SnakeLab failed before its first episode (also
    bounds such failures of a baseline)"""
    run_deadline_seconds: float = setting(21600.0, "AX3L_RUN_DEADLINE_SECONDS", gt=0)
    """seconds after its submission a run that is still not terminal is logged and treated as
    failed"""
    external_deadline: float = setting(300.0, "AX3L_EXTERNAL_DEADLINE", gt=0)
    """seconds a turn waits for a seat's accepted submission before the fallback proposer
    (`AX3L_LLM_FALLBACK`) takes it (`none`: the turn is offered again)"""


class PromotionSettings(Section):
    """How a better run is promoted to golden, and what the golden is."""

    promotion: Literal["single", "confirm", "race"] = setting("single", "AX3L_PROMOTION")
    """how a run that beats the golden's high score is promoted: `single` is the spec's rule (at
    once); `confirm` (opt-in) first runs the candidate and the golden on `AX3L_CONFIRM_SEEDS`
    more seeds and promotes only when the candidate's mean over the shared seeds is strictly
    higher (see [Confirmed promotions](user-guide.md#confirmed-promotions)); `race` (opt-in)
    races them on 1, then 2, then 4... more seeds and promotes only on a paired win (see
    [Racing](user-guide.md#the-model-of-every-run-and-racing)). Restart the orchestrator to
    change it; it takes effect at the next step"""
    confirm_seeds: int = setting(2, "AX3L_CONFIRM_SEEDS", ge=1, le=10)
    """extra seeds of a confirmation (1 to 10): seed + 1,000,001 onwards, a range no seed
    rotation reaches"""
    race_max_seeds: int = setting(8, "AX3L_RACE_MAX_SEEDS", ge=3, le=64)
    """most seeds a race runs (3 to 64; seed + 1,000,001 onwards, as a confirmation's)"""
    race_alpha: float = setting(0.1, "AX3L_RACE_ALPHA", gt=0, lt=1)
    """a race promotes a challenger no better than the golden at most this often (a one-sided
    paired t-test, the level split over the rounds that can promote)"""
    golden: Literal["spec", "model"] = setting("spec", "AX3L_GOLDEN")
    """`spec`: the golden is the last promoted run's configuration (the spec's rule); `model`
    (opt-in): after each comparison the golden follows the model of every run, the configuration
    run on the current seed with the best predicted mean (see [The model of every
    run](user-guide.md#the-model-of-every-run-and-racing))"""
    model_lower_bound: float = setting(0.0, "AX3L_MODEL_LOWER_BOUND", ge=0, le=3)
    """the model recommends the best predicted mean minus this many sds (0 to 3; 0: the best
    mean)"""


class SeatsSettings(Section):
    """The seats' MCP endpoint (the proposer ``external``): where it listens, whom it answers,
    its limits and its own database login."""

    seats_host: str = setting("127.0.0.1", "AX3L_SEATS_HOST")
    """address the seats' Streamable HTTP MCP endpoint listens on (proposer `external`; put TLS
    in front with a reverse proxy)"""
    seats_port: int = setting(28873, "AX3L_SEATS_PORT", ge=0, le=65535)
    """its port (path `/mcp`)"""
    seat_rate_limit: int = setting(60, "AX3L_SEAT_RATE_LIMIT", ge=1)
    """tool calls one seat may make per minute; more are refused with a tool error"""
    seats_allowed_hosts: str = setting("", "AX3L_SEATS_ALLOWED_HOSTS")
    """`Host` headers the seats' endpoint answers besides 127.0.0.1, localhost and [::1] (any
    port): comma-separated `host`, `host:port` or `host:*` (the name your TLS proxy publishes);
    an `Origin` header must be `http(s)://` one of them. Others get 421/403 before any token is
    read, whatever the bind address"""
    seats_trusted_proxies: str = setting("", "AX3L_SEATS_TRUSTED_PROXIES")
    """addresses or networks (comma-separated) of reverse proxies whose `X-Forwarded-For` names
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
    """seconds the seats' endpoint trusts its in-memory copy of the seats table: a revoked token
    stops working, and a new seat's token starts working, within this bound"""
    seats_process: bool = setting(True, "AX3L_SEATS_PROCESS")
    """without `AX3L_SEATS_BOARD_SOCKET`: run the seats' endpoint as the orchestrator's child
    process (the orchestrator keeps the turn board and shares it over a local socket pair), so a
    flood at it costs the loop's process nothing; `false`: inside the orchestrator"""
    seats_board_socket: str | None = setting(
        None,
        "AX3L_SEATS_BOARD_SOCKET",
        shown="unset (`/run/ax3l-board/board.sock` in compose, `.run/seats/board.sock` in"
        " `make run` with the proposer `external`)",
    )
    """a unix socket's path: the seats' endpoint runs as a service of its own (`python -m
    ax3l.orchestrator.seat_process serve`, compose's `seats`) listening there, and the
    orchestrator keeps the turn board through it (JSON lines); unset: the orchestrator starts
    the endpoint as its child process (`AX3L_SEATS_PROCESS`)"""
    seats_db_user: str | None = setting(
        None,
        "AX3L_SEATS_DB_USER",
        shown="unset (`ax3l_seats` in `make run` and compose)",
    )
    """the seats' endpoint process's own database user: it may read `seats` and SnakeLab's
    tables, nothing more (`ax3l-db grant-seats`); unset: `DB_USER`"""
    seats_db_password: SecretStr = setting(SecretStr(""), "AX3L_SEATS_DB_PASSWORD", shown="unset")
    """its password (set both or neither)"""
    seat_turn_share: float = setting(1.0, "AX3L_SEAT_TURN_SHARE", gt=0, le=1)
    """largest share of the last 10 turns won by seats that one seat may win; a seat over it is
    refused with reason `over_share` (1: no quota, the first accepted submission wins)"""


class AlertSettings(HttpSettings):
    """Alerts: where they go, what counts as a stall, and the report pages they link to."""

    notify_urls: SecretStr | None = setting(None, "AX3L_NOTIFY_URLS")
    """apprise URLs (space or comma separated) that alerts go to, e.g.
    `ntfy://ntfy.sh/my-topic`, `mailto://...`, `tgram://...`, `slack://...`, `json://host/path`;
    unset or empty: no alerts (see [Alerts](operations.md#alerts); compose reads it from the
    secret file `notify_urls`)"""
    stall_factor: float = setting(3.0, "AX3L_STALL_FACTOR", gt=0)
    """a stall alert goes out when no run has completed for this many times the median run time,
    and for a minute at least"""
    alert_poll_interval: float = setting(30.0, "AX3L_ALERT_POLL_INTERVAL", gt=0)
    """seconds between the orchestrator's looks for new goldens, seed rotations and stalls to
    alert on"""
    reports_url: str | None = setting(
        None,
        "AX3L_REPORTS_URL",
        shown="unset (`http://AX3L_HTTP_HOST:AX3L_REPORTS_PORT`)",
    )
    """the report server's address as the alerts' readers open it (the machine's name, a proxy's
    URL); each alert ends with the address of its page there"""

    def reports_link(self) -> str:
        """The report server's base URL in alerts' links: AX3L_REPORTS_URL, else the local
        one."""
        return (self.reports_url or self.local_url(self.reports_port)).rstrip("/")


class AdminLoginSettings(Section):
    """The private MariaDB's administrator: never passed to any service."""

    admin_user: str | None = setting(
        None,
        "AX3L_DB_ADMIN_USER",
        shown="unset (the private MariaDB's in `.run/db.env`)",
    )
    """a login that may create and drop databases and grant on them: read only by `ax3l-compare`
    (each repeat's throwaway databases), `ax3l-db backup`/`restore` and the tests, never passed
    to any service"""
    admin_password: SecretStr = setting(
        SecretStr(""),
        "AX3L_DB_ADMIN_PASSWORD",
        shown="unset (the private MariaDB's in `.run/db.env`)",
    )
    """its password"""
