# Sourced, never run: the SQL of Ax3l's two databases, the users and their grants, one copy for
# 01-ax3l.sh (a new compose volume) and scripts/mariadb.sh (the private MariaDB). The init
# folder runs only *.sh and *.sql files, so this one is left alone there.
#
#   ax3l_users_sql REPORTS_USER AX3L_PASSWORD SNAKELAB_PASSWORD REPORTS_PASSWORD
#
# Ax3l may only read SnakeLab's tables; the report server may only read both databases (the
# same grants as `ax3l-db grant-reports`).
ax3l_users_sql() {
  local reports_user=$1 ax3l_password=$2 snakelab_password=$3 reports_password=$4
  cat <<SQL
CREATE DATABASE IF NOT EXISTS ax3l CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE DATABASE IF NOT EXISTS snakelab CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS 'ax3l'@'%' IDENTIFIED BY '${ax3l_password}';
CREATE USER IF NOT EXISTS 'snakelab'@'%' IDENTIFIED BY '${snakelab_password}';
CREATE USER IF NOT EXISTS '${reports_user}'@'%' IDENTIFIED BY '${reports_password}';
GRANT ALL PRIVILEGES ON ax3l.* TO 'ax3l'@'%';
GRANT SELECT ON snakelab.* TO 'ax3l'@'%';
GRANT ALL PRIVILEGES ON snakelab.* TO 'snakelab'@'%';
GRANT SELECT ON ax3l.* TO '${reports_user}'@'%';
GRANT SELECT ON snakelab.* TO '${reports_user}'@'%';
SQL
}
