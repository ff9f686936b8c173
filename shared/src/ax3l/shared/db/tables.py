"""Both databases' tables, once, as SQLAlchemy Core metadata; every ``CREATE`` is made from it.

``AX3L``: the user's three tables (unchanged) plus Ax3l's own. ``events``, ``event_messages``
and ``experiment_highscores`` keep the exact names and columns of the user's running system so
existing databases work as they are. Extra indexes and tables are Ax3l's own and are added by
``ax3l-db`` without touching existing rows.

``SNAKELAB``: SnakeLab's three tables in the ``snakelab`` database, as the real SnakeLab 2.x
has them (``docs/snakelab.md``), plus the reference's ``simulation_runs.host``. Ax3l only reads
them; the reference SnakeLab and the test support create them from here.

This module describes the newest schema revision (``ax3l.shared.db.upgrades``): a fresh
database is created from it. Changing a table that exists needs a revision under
``migrations/versions/`` as well; a new table of Ax3l's own is created at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Column, ForeignKey, Index, MetaData, Table, UniqueConstraint
from sqlalchemy.dialects import mysql
from sqlalchemy.schema import CreateIndex, CreateTable

DIALECT = mysql.dialect()
NAMED = mysql.dialect(paramstyle="pyformat")  # %(name)s: rows as dicts
AX3L = MetaData()
SNAKELAB = MetaData()

BIGINT = mysql.BIGINT(unsigned=True)
UINT = mysql.INTEGER(unsigned=True)
DOUBLE = mysql.DOUBLE()
MICROS = mysql.DATETIME(fsp=6)
UUID = mysql.CHAR(36)
SHA256 = mysql.CHAR(64, charset="ascii")


def table(name: str, metadata: MetaData, *items: Any) -> Table:
    """A table with the options every table of Ax3l's and SnakeLab's has; its indexes keep
    their order (``info["keys"]``: MariaDB lists them in the order they were created)."""
    return Table(
        name,
        metadata,
        *items,
        info={"keys": [item.name for item in items if isinstance(item, Index)]},
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
    )


def key(name: str, kind: Any, *items: Any, auto: bool = False) -> Column[Any]:
    """A primary key column (``auto``: AUTO_INCREMENT)."""
    return Column(name, kind, *items, primary_key=True, autoincrement=auto)


def required(name: str, kind: Any, *items: Any) -> Column[Any]:
    """A ``NOT NULL`` column."""
    return Column(name, kind, *items, nullable=False)


def cascading(parent: str, constraint: str) -> ForeignKey:
    """A foreign key whose rows go with their parent row (``parent``: ``table.column``)."""
    return ForeignKey(parent, name=constraint, ondelete="CASCADE")


def ddl(of: Table) -> str:
    """``CREATE TABLE IF NOT EXISTS`` with every key inline, so one statement creates a table
    whole even when another process creates it at the same time; the indexes Ax3l adds to the
    user's tables (``ADDED_INDEXES``) are left out."""
    create = str(CreateTable(of, if_not_exists=True).compile(dialect=DIALECT))
    body, options = create.rsplit("\n)", 1)
    columns = {str(i.name): ", ".join(c.name for c in i.columns) for i in of.indexes}
    inline = "".join(f", \n\tKEY {name} ({columns[name]})" for name in of.info["keys"])
    return f"{body}{inline}\n){options}"


def insert(into: Table, row: Mapping[str, Any]) -> str:
    """``INSERT INTO into (columns) VALUES (%(column)s, ...)`` for ``row``'s columns: a driver
    cursor writes ``row`` (or rows with the same keys) with it, as SnakeLab or a test does."""
    return str(into.insert().compile(dialect=NAMED, column_keys=list(row)))


def add_index(index: Index) -> str:
    """``CREATE INDEX`` for one of ``ADDED_INDEXES``."""
    return str(CreateIndex(index).compile(dialect=DIALECT))


EVENTS = table(
    "events",
    AX3L,
    key("event_id", BIGINT, auto=True),
    required("occurred_at", MICROS),
    required("name", mysql.VARCHAR(100)),
    required("category", mysql.VARCHAR(50)),
    required("log_level", mysql.VARCHAR(10)),
    Column("process_id", UUID),
    Column("parent_event_id", BIGINT, cascading("events.event_id", "fk_events_parent")),
    Column("source_name", mysql.VARCHAR(255)),
    Column("parameter", mysql.VARCHAR(100)),
    Column("ax3l_version", mysql.VARCHAR(100)),
    Index("idx_events_occurred", "occurred_at", "event_id"),
    Index("idx_events_name", "name", "occurred_at"),
    Index("idx_events_process", "process_id", "event_id"),
)

EVENT_MESSAGES = table(
    "event_messages",
    AX3L,
    key("event_id", BIGINT, cascading("events.event_id", "fk_event_messages_event")),
    required("content", mysql.LONGTEXT()),
)

EXPERIMENT_HIGHSCORES = table(
    "experiment_highscores",
    AX3L,
    key("event_id", BIGINT, cascading("events.event_id", "fk_experiment_highscores_event")),
    required("simulations", BIGINT),
    required("score", mysql.INTEGER()),
    Column("seed", mysql.BIGINT()),
)

META = table(
    "ax3l_meta",
    AX3L,
    key("name", mysql.VARCHAR(64)),
    required("value", mysql.VARCHAR(255)),
)

# The user's tables, in creation order (foreign keys point backwards).
USER_TABLES: tuple[Table, ...] = (EVENTS, EVENT_MESSAGES, EXPERIMENT_HIGHSCORES)

# Ax3l's own tables; services add theirs here so ``ax3l-db`` creates everything.
OWN_TABLES: list[Table] = [META]

# Ax3l's own indexes on the user's ``events``, added to an existing table when missing.
ADDED_INDEXES: tuple[Index, ...] = (
    Index("idx_events_name_id", EVENTS.c.name, EVENTS.c.event_id),
    Index("idx_events_category_id", EVENTS.c.category, EVENTS.c.event_id),
    Index("idx_events_parameter_id", EVENTS.c.parameter, EVENTS.c.event_id),
    Index("idx_events_parent", EVENTS.c.parent_event_id),
    # The report's Prompt + Parameter filter: without it MySQL intersects two indexes and sorts.
    Index("idx_events_name_parameter_id", EVENTS.c.name, EVENTS.c.parameter, EVENTS.c.event_id),
)


def data_type(column: Column[Any]) -> str:
    """A column's type as ``information_schema.columns.data_type`` reports it (``bigint``)."""
    name = column.type.compile(dialect=DIALECT).split("(")[0].split()[0].lower()
    return "int" if name == "integer" else name


# Columns of the user's tables that must be present (name -> type prefix as MySQL reports it).
EXPECTED_COLUMNS: dict[str, dict[str, str]] = {
    user.name: {column.name: data_type(column) for column in user.columns} for user in USER_TABLES
}

# What ``ax3l-db reset-events`` empties, children first.
EXPERIMENT_TABLES: list[str] = [user.name for user in reversed(USER_TABLES)]

# -- the toolbroker's index over SnakeLab's runs (ax3l.shared.db.config_index) -------------------
# Derived data: it can be dropped at any time and is rebuilt from SnakeLab's tables. Keys are
# 64-bit hash prefixes and entries their registry position, so the index stays small enough
# for the buffer pool at hundreds of thousands of runs; every hit is verified exactly.

CONFIG_INDEX_STATE = table(
    "config_index_state",
    AX3L,
    key("name", mysql.VARCHAR(32)),
    required("last_id", BIGINT),
    Column("last_run_id", UUID),
    required("columns_hash", SHA256),
)

CONFIG_INDEX_RUNS = table(
    "config_index_runs",
    AX3L,
    key("sl_id", BIGINT),
    required("config_key", BIGINT),
    Index("idx_config_index_runs_key", "config_key", "sl_id"),
)

CONFIG_INDEX_CONTEXTS = table(
    "config_index_contexts",
    AX3L,
    key("entry", mysql.TINYINT(unsigned=True)),
    key("context_key", BIGINT),
    key("sl_id", BIGINT),
)

CONFIG_INDEX_HOLES = table(
    "config_index_holes",
    AX3L,
    key("lo", BIGINT),
    required("hi", BIGINT),
    required("noticed_at", MICROS),
)

# -- durable submission intents (ax3l.shared.db.intents) -----------------------------------------

SUBMISSION_INTENTS = table(
    "submission_intents",
    AX3L,
    key("intent_id", BIGINT, auto=True),
    required("created_at", MICROS),
    Column("resolved_at", MICROS),
    required("state", mysql.VARCHAR(16)),
    required("entry", mysql.VARCHAR(100)),
    required("fingerprint", SHA256),
    Column("run_id", UUID),
    required("content", mysql.LONGTEXT()),
    Index("idx_submission_intents_state", "state", "intent_id"),
    Index("idx_submission_intents_run", "run_id"),
)

OWN_TABLES.extend(
    [
        CONFIG_INDEX_STATE,
        CONFIG_INDEX_RUNS,
        CONFIG_INDEX_CONTEXTS,
        CONFIG_INDEX_HOLES,
        SUBMISSION_INTENTS,
    ]
)

# -- proposer comparisons (ax3l-compare; read by the report server's /comparison) -------------
# Not experiment state: ``ax3l-db reset-events`` keeps them. One row per ``ax3l-compare``
# invocation and one per repeat (a proposer's whole experiment on throwaway databases);
# ``best_so_far`` is a JSON list, the best high score among SnakeLab's runs 1..k (null before
# the first scored run), one value per run up to the budget.

COMPARISONS = table(
    "comparisons",
    AX3L,
    key("comparison_id", BIGINT, auto=True),
    required("started_at", MICROS),
    Column("finished_at", MICROS),
    required("state", mysql.VARCHAR(16)),
    required("proposers", mysql.VARCHAR(255)),
    required("repeats", UINT),
    required("budget", UINT),
    Column("wall_seconds", DOUBLE),
    required("content", mysql.LONGTEXT()),
)

COMPARISON_REPEATS = table(
    "comparison_repeats",
    AX3L,
    key(
        "comparison_id",
        BIGINT,
        cascading("comparisons.comparison_id", "fk_comparison_repeats_comparison"),
    ),
    key("proposer", mysql.VARCHAR(100)),
    key("repeat_index", UINT),
    required("seed", mysql.BIGINT()),
    required("state", mysql.VARCHAR(16)),
    required("runs", UINT),
    Column("best_score", mysql.INTEGER()),
    required("best_so_far", mysql.LONGTEXT()),
    required("accepted_proposals", UINT),
    required("model_turns", UINT),
    required("wasted_turns", UINT),
    required("wall_seconds", DOUBLE),
    required("finished_at", MICROS),
    required("content", mysql.LONGTEXT()),
)

# A repeat's held-out re-tests (``ax3l-compare --retest``): its recommendation after ``at_runs``
# runs on one held-out seed, the run that counts (``run_id``, ``score``) and, as a JSON list,
# the runs of that seed that failed and were run again. The recommendation itself (config,
# golden run, the surrogate's expected score) is in the repeat's ``content``.
COMPARISON_RETESTS = table(
    "comparison_retests",
    AX3L,
    key(
        "comparison_id",
        BIGINT,
        cascading("comparisons.comparison_id", "fk_comparison_retests_comparison"),
    ),
    key("proposer", mysql.VARCHAR(100)),
    key("repeat_index", UINT),
    key("at_runs", UINT),
    key("seed", mysql.BIGINT()),
    Column("run_id", UUID),
    Column("score", mysql.INTEGER()),
    required("failed_run_ids", mysql.LONGTEXT()),
)

OWN_TABLES.extend([COMPARISONS, COMPARISON_REPEATS, COMPARISON_RETESTS])

# -- seats: outside agents that may take the turns of the ``external`` proposer --------------
# Only a SHA-256 of each token is stored; the token itself is printed once by ``ax3l-seats``.

SEATS = table(
    "seats",
    AX3L,
    key("name", mysql.VARCHAR(64)),
    required("token_hash", SHA256),
    required("created_at", MICROS),
    Column("revoked_at", MICROS),
    UniqueConstraint("token_hash", name="idx_seats_token"),
)

OWN_TABLES.append(SEATS)

# -- who produced each run (``ax3l.shared.db.run_provenance``) -----------------------------------
# One row per run Ax3l made, written in the transaction of the event that made it (``event_id``:
# the broker's ``proposal_accepted``, the loop's ``simulation_submitted``); revision 0003
# back-filled older histories. ``golden_run_id`` is the golden of its time, ``conversation_id``
# the process of the conversation that proposed it.

RUN_PROVENANCE = table(
    "run_provenance",
    AX3L,
    key("run_id", mysql.VARCHAR(64)),
    required("event_id", BIGINT, cascading("events.event_id", "fk_run_provenance_event")),
    Column("proposer", mysql.VARCHAR(100)),
    Column("entry", mysql.VARCHAR(100)),
    Column("purpose", mysql.VARCHAR(100)),
    Column("retry_of", mysql.VARCHAR(64)),
    Column("proposal_event_id", BIGINT),
    Column("golden_run_id", mysql.VARCHAR(64)),
    Column("conversation_id", UUID),
    Index("idx_run_provenance_event", "event_id"),
)

OWN_TABLES.append(RUN_PROVENANCE)
EXPERIMENT_TABLES.insert(0, "run_provenance")

# -- SnakeLab's tables (the ``snakelab`` database; Ax3l has SELECT only) -----------------------

SIMULATION_RUNS = table(
    "simulation_runs",
    SNAKELAB,
    key("id", BIGINT, auto=True),
    required("run_id", UUID),
    required("project_version", mysql.VARCHAR(32)),
    required("config_hash", mysql.CHAR(64)),
    required("status", mysql.VARCHAR(16)),
    Column("episode_count", UINT),
    Column("high_score", UINT),
    required("created_at", MICROS),
    Column("started_at", MICROS),
    Column("completed_at", MICROS),
    Column("error_message", mysql.TEXT()),
    Column("high_score_snapshot", mysql.JSON()),
    # The reference's own column (the real SnakeLab has none): the host that ran the run, so a
    # host's restart fails only its own unfinished runs when several share one database.
    Column("host", mysql.VARCHAR(255)),
    UniqueConstraint("run_id", name="uq_simulation_runs_run_id"),
    Index("idx_simulation_runs_config_hash", "config_hash"),
)

# The 26 numeric columns: every leaf of a configuration, dots replaced by underscores.
CONFIGURATIONS = table(
    "configurations",
    SNAKELAB,
    key("run_id", UUID, cascading("simulation_runs.run_id", "fk_configurations_run")),
    required("epochs", UINT),
    required("seed", BIGINT),
    *(
        required(f"game_{name}", UINT)
        for name in ("board_width", "board_height", "initial_snake_length", "max_moves_multiplier")
    ),
    *(
        required(f"game_rewards_{name}", DOUBLE)
        for name in (
            *("food", "wall", "snake", "max_moves", "empty"),
            *("closer_to_food", "further_from_food"),
        )
    ),
    required("model_hidden_size", UINT),
    required("model_layers", UINT),
    required("model_dropout", DOUBLE),
    required("training_sequence_length", UINT),
    required("training_batch_size", UINT),
    required("training_replay_max_frames", UINT),
    *(
        required(f"training_{name}", DOUBLE)
        for name in ("learning_rate", "gamma", "tau", "max_gradient_norm")
    ),
    *(required(f"epsilon_{name}", DOUBLE) for name in ("initial", "minimum", "decay")),
)

SIMULATION_EPISODES = table(
    "simulation_episodes",
    SNAKELAB,
    key("run_id", UUID, cascading("simulation_runs.run_id", "fk_simulation_episodes_run")),
    key("episode", UINT),
    required("score", UINT),
    required("steps", UINT),
    Column("epsilon", DOUBLE),
    Column("loss", DOUBLE),
)

SNAKELAB_TABLES: tuple[Table, ...] = (SIMULATION_RUNS, CONFIGURATIONS, SIMULATION_EPISODES)
