"""The ``ax3l`` database's tables: the user's three (unchanged) plus Ax3l's own.

``events``, ``event_messages`` and ``experiment_highscores`` keep the exact names and
columns of the user's running system so existing databases work as they are. Extra indexes
and tables are Ax3l's own and are added by ``ax3l-db`` without touching existing rows.

This module describes the newest schema revision (``ax3l.shared.db.upgrades``): a fresh
database is created from it. Changing a table that exists needs a revision under
``migrations/versions/`` as well; a new table of Ax3l's own is created at start.
"""

from __future__ import annotations

TABLE_OPTIONS = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"


def create_table(name: str, *definitions: str) -> str:
    """``CREATE TABLE IF NOT EXISTS name`` with its columns, keys and constraints, one a line,
    and the options every table of Ax3l's and SnakeLab's has."""
    body = ",\n".join(f"  {definition}" for definition in definitions)
    return f"\nCREATE TABLE IF NOT EXISTS {name} (\n{body}\n) {TABLE_OPTIONS}\n"


def cascading_key(constraint: str, column: str, parent: str, parent_column: str = "") -> str:
    """A foreign key whose rows go with their parent row (``parent_column``: ``column``)."""
    return (
        f"CONSTRAINT {constraint} FOREIGN KEY ({column})\n"
        f"    REFERENCES {parent} ({parent_column or column}) ON DELETE CASCADE"
    )


EVENTS = create_table(
    "events",
    "event_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY",
    "occurred_at DATETIME(6) NOT NULL",
    "name VARCHAR(100) NOT NULL",
    "category VARCHAR(50) NOT NULL",
    "log_level VARCHAR(10) NOT NULL",
    "process_id CHAR(36) NULL",
    "parent_event_id BIGINT UNSIGNED NULL",
    "source_name VARCHAR(255) NULL",
    "parameter VARCHAR(100) NULL",
    "ax3l_version VARCHAR(100) NULL",
    "KEY idx_events_occurred (occurred_at, event_id)",
    "KEY idx_events_name (name, occurred_at)",
    "KEY idx_events_process (process_id, event_id)",
    cascading_key("fk_events_parent", "parent_event_id", "events", "event_id"),
)

EVENT_MESSAGES = create_table(
    "event_messages",
    "event_id BIGINT UNSIGNED NOT NULL PRIMARY KEY",
    "content LONGTEXT NOT NULL",
    cascading_key("fk_event_messages_event", "event_id", "events"),
)

EXPERIMENT_HIGHSCORES = create_table(
    "experiment_highscores",
    "event_id BIGINT UNSIGNED NOT NULL PRIMARY KEY",
    "simulations BIGINT UNSIGNED NOT NULL",
    "score INT NOT NULL",
    "seed BIGINT NULL",
    cascading_key("fk_experiment_highscores_event", "event_id", "events"),
)

META = create_table(
    "ax3l_meta",
    "name VARCHAR(64) NOT NULL PRIMARY KEY",
    "value VARCHAR(255) NOT NULL",
)

# The user's tables, in creation order (foreign keys point backwards).
USER_TABLES: tuple[tuple[str, str], ...] = (
    ("events", EVENTS),
    ("event_messages", EVENT_MESSAGES),
    ("experiment_highscores", EXPERIMENT_HIGHSCORES),
)

# Ax3l's own tables; services add theirs here so ``ax3l-db`` creates everything.
OWN_TABLES: list[tuple[str, str]] = [("ax3l_meta", META)]

# Ax3l's own indexes on the user's tables: (table, index name, columns).
OWN_INDEXES: list[tuple[str, str, str]] = [
    ("events", "idx_events_name_id", "name, event_id"),
    ("events", "idx_events_category_id", "category, event_id"),
    ("events", "idx_events_parameter_id", "parameter, event_id"),
    ("events", "idx_events_parent", "parent_event_id"),
    # The report's Prompt + Parameter filter: without it MySQL intersects two indexes and sorts.
    ("events", "idx_events_name_parameter_id", "name, parameter, event_id"),
]

# Columns of the user's tables that must be present (name -> type prefix as MySQL reports it).
EXPECTED_COLUMNS: dict[str, dict[str, str]] = {
    "events": {
        "event_id": "bigint",
        "occurred_at": "datetime",
        "name": "varchar",
        "category": "varchar",
        "log_level": "varchar",
        "process_id": "char",
        "parent_event_id": "bigint",
        "source_name": "varchar",
        "parameter": "varchar",
        "ax3l_version": "varchar",
    },
    "event_messages": {"event_id": "bigint", "content": "longtext"},
    "experiment_highscores": {
        "event_id": "bigint",
        "simulations": "bigint",
        "score": "int",
        "seed": "bigint",
    },
}

# What ``ax3l-db reset-events`` empties, children first.
EXPERIMENT_TABLES: list[str] = ["experiment_highscores", "event_messages", "events"]

# -- the toolbroker's index over SnakeLab's runs (ax3l.shared.config_index) -------------------
# Derived data: it can be dropped at any time and is rebuilt from SnakeLab's tables. Keys are
# 64-bit hash prefixes and entries their registry position, so the index stays small enough
# for the buffer pool at hundreds of thousands of runs; every hit is verified exactly.

CONFIG_INDEX_STATE = create_table(
    "config_index_state",
    "name VARCHAR(32) NOT NULL PRIMARY KEY",
    "last_id BIGINT UNSIGNED NOT NULL",
    "last_run_id CHAR(36) NULL",
    "columns_hash CHAR(64) CHARACTER SET ascii NOT NULL",
)

CONFIG_INDEX_RUNS = create_table(
    "config_index_runs",
    "sl_id BIGINT UNSIGNED NOT NULL PRIMARY KEY",
    "config_key BIGINT UNSIGNED NOT NULL",
    "KEY idx_config_index_runs_key (config_key, sl_id)",
)

CONFIG_INDEX_CONTEXTS = create_table(
    "config_index_contexts",
    "entry TINYINT UNSIGNED NOT NULL",
    "context_key BIGINT UNSIGNED NOT NULL",
    "sl_id BIGINT UNSIGNED NOT NULL",
    "PRIMARY KEY (entry, context_key, sl_id)",
)

CONFIG_INDEX_HOLES = create_table(
    "config_index_holes",
    "lo BIGINT UNSIGNED NOT NULL PRIMARY KEY",
    "hi BIGINT UNSIGNED NOT NULL",
    "noticed_at DATETIME(6) NOT NULL",
)

# -- durable submission intents (ax3l.shared.intents) -----------------------------------------

SUBMISSION_INTENTS = create_table(
    "submission_intents",
    "intent_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY",
    "created_at DATETIME(6) NOT NULL",
    "resolved_at DATETIME(6) NULL",
    "state VARCHAR(16) NOT NULL",
    "entry VARCHAR(100) NOT NULL",
    "fingerprint CHAR(64) CHARACTER SET ascii NOT NULL",
    "run_id CHAR(36) NULL",
    "content LONGTEXT NOT NULL",
    "KEY idx_submission_intents_state (state, intent_id)",
    "KEY idx_submission_intents_run (run_id)",
)

OWN_TABLES.extend(
    [
        ("config_index_state", CONFIG_INDEX_STATE),
        ("config_index_runs", CONFIG_INDEX_RUNS),
        ("config_index_contexts", CONFIG_INDEX_CONTEXTS),
        ("config_index_holes", CONFIG_INDEX_HOLES),
        ("submission_intents", SUBMISSION_INTENTS),
    ]
)

# -- proposer comparisons (ax3l-compare; read by the report server's /comparison) -------------
# Not experiment state: ``ax3l-db reset-events`` keeps them. One row per ``ax3l-compare``
# invocation and one per repeat (a proposer's whole experiment on throwaway databases);
# ``best_so_far`` is a JSON list, the best high score among SnakeLab's runs 1..k (null before
# the first scored run), one value per run up to the budget.

COMPARISONS = create_table(
    "comparisons",
    "comparison_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY",
    "started_at DATETIME(6) NOT NULL",
    "finished_at DATETIME(6) NULL",
    "state VARCHAR(16) NOT NULL",
    "proposers VARCHAR(255) NOT NULL",
    "repeats INT UNSIGNED NOT NULL",
    "budget INT UNSIGNED NOT NULL",
    "wall_seconds DOUBLE NULL",
    "content LONGTEXT NOT NULL",
)

COMPARISON_REPEATS = create_table(
    "comparison_repeats",
    "comparison_id BIGINT UNSIGNED NOT NULL",
    "proposer VARCHAR(100) NOT NULL",
    "repeat_index INT UNSIGNED NOT NULL",
    "seed BIGINT NOT NULL",
    "state VARCHAR(16) NOT NULL",
    "runs INT UNSIGNED NOT NULL",
    "best_score INT NULL",
    "best_so_far LONGTEXT NOT NULL",
    "accepted_proposals INT UNSIGNED NOT NULL",
    "model_turns INT UNSIGNED NOT NULL",
    "wasted_turns INT UNSIGNED NOT NULL",
    "wall_seconds DOUBLE NOT NULL",
    "finished_at DATETIME(6) NOT NULL",
    "content LONGTEXT NOT NULL",
    "PRIMARY KEY (comparison_id, proposer, repeat_index)",
    cascading_key("fk_comparison_repeats_comparison", "comparison_id", "comparisons"),
)

# A repeat's held-out re-tests (``ax3l-compare --retest``): its recommendation after ``at_runs``
# runs on one held-out seed, the run that counts (``run_id``, ``score``) and, as a JSON list,
# the runs of that seed that failed and were run again. The recommendation itself (config,
# golden run, the surrogate's expected score) is in the repeat's ``content``.
COMPARISON_RETESTS = create_table(
    "comparison_retests",
    "comparison_id BIGINT UNSIGNED NOT NULL",
    "proposer VARCHAR(100) NOT NULL",
    "repeat_index INT UNSIGNED NOT NULL",
    "at_runs INT UNSIGNED NOT NULL",
    "seed BIGINT NOT NULL",
    "run_id CHAR(36) NULL",
    "score INT NULL",
    "failed_run_ids LONGTEXT NOT NULL",
    "PRIMARY KEY (comparison_id, proposer, repeat_index, at_runs, seed)",
    cascading_key("fk_comparison_retests_comparison", "comparison_id", "comparisons"),
)

OWN_TABLES.extend(
    [
        ("comparisons", COMPARISONS),
        ("comparison_repeats", COMPARISON_REPEATS),
        ("comparison_retests", COMPARISON_RETESTS),
    ]
)

# -- seats: outside agents that may take the turns of the ``external`` proposer --------------
# Only a SHA-256 of each token is stored; the token itself is printed once by ``ax3l-seats``.

SEATS = create_table(
    "seats",
    "name VARCHAR(64) NOT NULL PRIMARY KEY",
    "token_hash CHAR(64) CHARACTER SET ascii NOT NULL",
    "created_at DATETIME(6) NOT NULL",
    "revoked_at DATETIME(6) NULL",
    "UNIQUE KEY idx_seats_token (token_hash)",
)

OWN_TABLES.append(("seats", SEATS))

# -- who produced each run (``ax3l.shared.run_provenance``) -----------------------------------
# One row per run Ax3l made, written in the transaction of the event that made it (``event_id``:
# the broker's ``proposal_accepted``, the loop's ``simulation_submitted``); revision 0003
# back-filled older histories. ``golden_run_id`` is the golden of its time, ``conversation_id``
# the process of the conversation that proposed it.

RUN_PROVENANCE = create_table(
    "run_provenance",
    "run_id VARCHAR(64) NOT NULL PRIMARY KEY",
    "event_id BIGINT UNSIGNED NOT NULL",
    "proposer VARCHAR(100) NULL",
    "entry VARCHAR(100) NULL",
    "purpose VARCHAR(100) NULL",
    "retry_of VARCHAR(64) NULL",
    "proposal_event_id BIGINT UNSIGNED NULL",
    "golden_run_id VARCHAR(64) NULL",
    "conversation_id CHAR(36) NULL",
    "KEY idx_run_provenance_event (event_id)",
    cascading_key("fk_run_provenance_event", "event_id", "events"),
)

OWN_TABLES.append(("run_provenance", RUN_PROVENANCE))
EXPERIMENT_TABLES.insert(0, "run_provenance")
