-- The schema as the DDL strings of commit e587013 made it (shared/db/tables.py and the reference
-- SnakeLab's snakelab/tables.py), kept only as the reference of test_tables.py: the metadata in
-- ax3l.shared.db.tables must make the same tables. Statements end with ';' on a line of its own.

-- ax3l
CREATE TABLE IF NOT EXISTS events (
  event_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  occurred_at DATETIME(6) NOT NULL,
  name VARCHAR(100) NOT NULL,
  category VARCHAR(50) NOT NULL,
  log_level VARCHAR(10) NOT NULL,
  process_id CHAR(36) NULL,
  parent_event_id BIGINT UNSIGNED NULL,
  source_name VARCHAR(255) NULL,
  parameter VARCHAR(100) NULL,
  ax3l_version VARCHAR(100) NULL,
  KEY idx_events_occurred (occurred_at, event_id),
  KEY idx_events_name (name, occurred_at),
  KEY idx_events_process (process_id, event_id),
  CONSTRAINT fk_events_parent FOREIGN KEY (parent_event_id)
    REFERENCES events (event_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS event_messages (
  event_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  content LONGTEXT NOT NULL,
  CONSTRAINT fk_event_messages_event FOREIGN KEY (event_id)
    REFERENCES events (event_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS experiment_highscores (
  event_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  simulations BIGINT UNSIGNED NOT NULL,
  score INT NOT NULL,
  seed BIGINT NULL,
  CONSTRAINT fk_experiment_highscores_event FOREIGN KEY (event_id)
    REFERENCES events (event_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS ax3l_meta (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  value VARCHAR(255) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS config_index_state (
  name VARCHAR(32) NOT NULL PRIMARY KEY,
  last_id BIGINT UNSIGNED NOT NULL,
  last_run_id CHAR(36) NULL,
  columns_hash CHAR(64) CHARACTER SET ascii NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS config_index_runs (
  sl_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  config_key BIGINT UNSIGNED NOT NULL,
  KEY idx_config_index_runs_key (config_key, sl_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS config_index_contexts (
  entry TINYINT UNSIGNED NOT NULL,
  context_key BIGINT UNSIGNED NOT NULL,
  sl_id BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (entry, context_key, sl_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS config_index_holes (
  lo BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  hi BIGINT UNSIGNED NOT NULL,
  noticed_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS submission_intents (
  intent_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  created_at DATETIME(6) NOT NULL,
  resolved_at DATETIME(6) NULL,
  state VARCHAR(16) NOT NULL,
  entry VARCHAR(100) NOT NULL,
  fingerprint CHAR(64) CHARACTER SET ascii NOT NULL,
  run_id CHAR(36) NULL,
  content LONGTEXT NOT NULL,
  KEY idx_submission_intents_state (state, intent_id),
  KEY idx_submission_intents_run (run_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS comparisons (
  comparison_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  started_at DATETIME(6) NOT NULL,
  finished_at DATETIME(6) NULL,
  state VARCHAR(16) NOT NULL,
  proposers VARCHAR(255) NOT NULL,
  repeats INT UNSIGNED NOT NULL,
  budget INT UNSIGNED NOT NULL,
  wall_seconds DOUBLE NULL,
  content LONGTEXT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS comparison_repeats (
  comparison_id BIGINT UNSIGNED NOT NULL,
  proposer VARCHAR(100) NOT NULL,
  repeat_index INT UNSIGNED NOT NULL,
  seed BIGINT NOT NULL,
  state VARCHAR(16) NOT NULL,
  runs INT UNSIGNED NOT NULL,
  best_score INT NULL,
  best_so_far LONGTEXT NOT NULL,
  accepted_proposals INT UNSIGNED NOT NULL,
  model_turns INT UNSIGNED NOT NULL,
  wasted_turns INT UNSIGNED NOT NULL,
  wall_seconds DOUBLE NOT NULL,
  finished_at DATETIME(6) NOT NULL,
  content LONGTEXT NOT NULL,
  PRIMARY KEY (comparison_id, proposer, repeat_index),
  CONSTRAINT fk_comparison_repeats_comparison FOREIGN KEY (comparison_id)
    REFERENCES comparisons (comparison_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS comparison_retests (
  comparison_id BIGINT UNSIGNED NOT NULL,
  proposer VARCHAR(100) NOT NULL,
  repeat_index INT UNSIGNED NOT NULL,
  at_runs INT UNSIGNED NOT NULL,
  seed BIGINT NOT NULL,
  run_id CHAR(36) NULL,
  score INT NULL,
  failed_run_ids LONGTEXT NOT NULL,
  PRIMARY KEY (comparison_id, proposer, repeat_index, at_runs, seed),
  CONSTRAINT fk_comparison_retests_comparison FOREIGN KEY (comparison_id)
    REFERENCES comparisons (comparison_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS seats (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  token_hash CHAR(64) CHARACTER SET ascii NOT NULL,
  created_at DATETIME(6) NOT NULL,
  revoked_at DATETIME(6) NULL,
  UNIQUE KEY idx_seats_token (token_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE INDEX idx_events_name_id ON events (name, event_id)
;
CREATE INDEX idx_events_category_id ON events (category, event_id)
;
CREATE INDEX idx_events_parameter_id ON events (parameter, event_id)
;
CREATE INDEX idx_events_parent ON events (parent_event_id)
;
CREATE INDEX idx_events_name_parameter_id ON events (name, parameter, event_id)
;
-- snakelab
CREATE TABLE IF NOT EXISTS simulation_runs (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  run_id CHAR(36) NOT NULL,
  project_version VARCHAR(32) NOT NULL,
  config_hash CHAR(64) NOT NULL,
  status VARCHAR(16) NOT NULL,
  episode_count INT UNSIGNED NULL,
  high_score INT UNSIGNED NULL,
  created_at DATETIME(6) NOT NULL,
  started_at DATETIME(6) NULL,
  completed_at DATETIME(6) NULL,
  error_message TEXT NULL,
  high_score_snapshot JSON NULL,
  host VARCHAR(255) NULL,
  UNIQUE KEY uq_simulation_runs_run_id (run_id),
  KEY idx_simulation_runs_config_hash (config_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS configurations (
  run_id CHAR(36) NOT NULL PRIMARY KEY,
  epochs INT UNSIGNED NOT NULL,
  seed BIGINT UNSIGNED NOT NULL,
  game_board_width INT UNSIGNED NOT NULL,
  game_board_height INT UNSIGNED NOT NULL,
  game_initial_snake_length INT UNSIGNED NOT NULL,
  game_max_moves_multiplier INT UNSIGNED NOT NULL,
  game_rewards_food DOUBLE NOT NULL,
  game_rewards_wall DOUBLE NOT NULL,
  game_rewards_snake DOUBLE NOT NULL,
  game_rewards_max_moves DOUBLE NOT NULL,
  game_rewards_empty DOUBLE NOT NULL,
  game_rewards_closer_to_food DOUBLE NOT NULL,
  game_rewards_further_from_food DOUBLE NOT NULL,
  model_hidden_size INT UNSIGNED NOT NULL,
  model_layers INT UNSIGNED NOT NULL,
  model_dropout DOUBLE NOT NULL,
  training_sequence_length INT UNSIGNED NOT NULL,
  training_batch_size INT UNSIGNED NOT NULL,
  training_replay_max_frames INT UNSIGNED NOT NULL,
  training_learning_rate DOUBLE NOT NULL,
  training_gamma DOUBLE NOT NULL,
  training_tau DOUBLE NOT NULL,
  training_max_gradient_norm DOUBLE NOT NULL,
  epsilon_initial DOUBLE NOT NULL,
  epsilon_minimum DOUBLE NOT NULL,
  epsilon_decay DOUBLE NOT NULL,
  CONSTRAINT fk_configurations_run FOREIGN KEY (run_id)
    REFERENCES simulation_runs (run_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
CREATE TABLE IF NOT EXISTS simulation_episodes (
  run_id CHAR(36) NOT NULL,
  episode INT UNSIGNED NOT NULL,
  score INT UNSIGNED NOT NULL,
  steps INT UNSIGNED NOT NULL,
  epsilon DOUBLE NULL,
  loss DOUBLE NULL,
  PRIMARY KEY (run_id, episode),
  CONSTRAINT fk_simulation_episodes_run FOREIGN KEY (run_id)
    REFERENCES simulation_runs (run_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
