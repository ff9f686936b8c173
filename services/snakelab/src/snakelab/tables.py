"""SnakeLab's tables in the ``snakelab`` database, as the real SnakeLab 2.x has them, plus the
reference's ``simulation_runs.host`` (added to an older table at startup)."""

from __future__ import annotations

from ax3l.shared.db.tables import cascading_key, create_table

SIMULATION_RUNS = create_table(
    "simulation_runs",
    "id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY",
    "run_id CHAR(36) NOT NULL",
    "project_version VARCHAR(32) NOT NULL",
    "config_hash CHAR(64) NOT NULL",
    "status VARCHAR(16) NOT NULL",
    "episode_count INT UNSIGNED NULL",
    "high_score INT UNSIGNED NULL",
    "created_at DATETIME(6) NOT NULL",
    "started_at DATETIME(6) NULL",
    "completed_at DATETIME(6) NULL",
    "error_message TEXT NULL",
    "high_score_snapshot JSON NULL",
    # The reference's own column (the real SnakeLab has none): the host that ran the run, so a
    # host's restart fails only its own unfinished runs when several share one database.
    "host VARCHAR(255) NULL",
    "UNIQUE KEY uq_simulation_runs_run_id (run_id)",
    "KEY idx_simulation_runs_config_hash (config_hash)",
)

CONFIGURATIONS = create_table(
    "configurations",
    "run_id CHAR(36) NOT NULL PRIMARY KEY",
    "epochs INT UNSIGNED NOT NULL",
    "seed BIGINT UNSIGNED NOT NULL",
    "game_board_width INT UNSIGNED NOT NULL",
    "game_board_height INT UNSIGNED NOT NULL",
    "game_initial_snake_length INT UNSIGNED NOT NULL",
    "game_max_moves_multiplier INT UNSIGNED NOT NULL",
    "game_rewards_food DOUBLE NOT NULL",
    "game_rewards_wall DOUBLE NOT NULL",
    "game_rewards_snake DOUBLE NOT NULL",
    "game_rewards_max_moves DOUBLE NOT NULL",
    "game_rewards_empty DOUBLE NOT NULL",
    "game_rewards_closer_to_food DOUBLE NOT NULL",
    "game_rewards_further_from_food DOUBLE NOT NULL",
    "model_hidden_size INT UNSIGNED NOT NULL",
    "model_layers INT UNSIGNED NOT NULL",
    "model_dropout DOUBLE NOT NULL",
    "training_sequence_length INT UNSIGNED NOT NULL",
    "training_batch_size INT UNSIGNED NOT NULL",
    "training_replay_max_frames INT UNSIGNED NOT NULL",
    "training_learning_rate DOUBLE NOT NULL",
    "training_gamma DOUBLE NOT NULL",
    "training_tau DOUBLE NOT NULL",
    "training_max_gradient_norm DOUBLE NOT NULL",
    "epsilon_initial DOUBLE NOT NULL",
    "epsilon_minimum DOUBLE NOT NULL",
    "epsilon_decay DOUBLE NOT NULL",
    cascading_key("fk_configurations_run", "run_id", "simulation_runs"),
)

SIMULATION_EPISODES = create_table(
    "simulation_episodes",
    "run_id CHAR(36) NOT NULL",
    "episode INT UNSIGNED NOT NULL",
    "score INT UNSIGNED NOT NULL",
    "steps INT UNSIGNED NOT NULL",
    "epsilon DOUBLE NULL",
    "loss DOUBLE NULL",
    "PRIMARY KEY (run_id, episode)",
    cascading_key("fk_simulation_episodes_run", "run_id", "simulation_runs"),
)

ALL_TABLES: tuple[tuple[str, str], ...] = (
    ("simulation_runs", SIMULATION_RUNS),
    ("configurations", CONFIGURATIONS),
    ("simulation_episodes", SIMULATION_EPISODES),
)
