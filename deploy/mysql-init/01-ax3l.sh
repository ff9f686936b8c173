#!/bin/bash
# Runs once, when the database volume is new: both databases, Ax3l's and SnakeLab's users,
# Ax3l's SELECT-only grant on SnakeLab's tables, and the report server's SELECT-only user on
# both (the same grants as `ax3l-db grant-reports`).
set -euo pipefail
reports_user=${AX3L_REPORTS_DB_USER:-ax3l_reports}
mariadb --protocol=socket -uroot -p"${MYSQL_ROOT_PASSWORD}" <<SQL
CREATE DATABASE IF NOT EXISTS ax3l CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE DATABASE IF NOT EXISTS snakelab CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS 'ax3l'@'%' IDENTIFIED BY '${AX3L_DB_PASSWORD}';
CREATE USER IF NOT EXISTS 'snakelab'@'%' IDENTIFIED BY '${SNAKELAB_DB_PASSWORD}';
CREATE USER IF NOT EXISTS '${reports_user}'@'%' IDENTIFIED BY '${AX3L_REPORTS_DB_PASSWORD}';
GRANT ALL PRIVILEGES ON ax3l.* TO 'ax3l'@'%';
GRANT SELECT ON snakelab.* TO 'ax3l'@'%';
GRANT ALL PRIVILEGES ON snakelab.* TO 'snakelab'@'%';
GRANT SELECT ON ax3l.* TO '${reports_user}'@'%';
GRANT SELECT ON snakelab.* TO '${reports_user}'@'%';
FLUSH PRIVILEGES;
SQL
