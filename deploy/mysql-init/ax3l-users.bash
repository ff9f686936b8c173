# Sourced, never run: the SQL of Ax3l's two databases, the users and their grants, one copy for
# 01-ax3l.sh (a new compose volume) and scripts/mariadb.sh (the private MariaDB). The init
# folder runs only *.sh and *.sql files, so this one is left alone there.
#
#   ax3l_users_sql REPORTS_USER AX3L_PASSWORD SNAKELAB_PASSWORD REPORTS_PASSWORD
#
# Ax3l may only read SnakeLab's tables; the report server may only read both databases (the
# same grants as `ax3l-db grant-reports`). Every value is written as an escaped SQL string, so
# a quote or backslash in a password is part of the password, never of the statement.

# A single-quoted SQL string of $1: backslashes doubled, quotes doubled (as `ax3l-db` does).
ax3l_sql_string() {
  local s=${1//\\/\\\\}
  printf "'%s'" "${s//\'/\'\'}"
}

ax3l_users_sql() {
  local reports ax3l snakelab reports_password
  reports=$(ax3l_sql_string "$1")
  ax3l=$(ax3l_sql_string "$2")
  snakelab=$(ax3l_sql_string "$3")
  reports_password=$(ax3l_sql_string "$4")
  cat <<SQL
CREATE DATABASE IF NOT EXISTS ax3l CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE DATABASE IF NOT EXISTS snakelab CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS 'ax3l'@'%' IDENTIFIED BY ${ax3l};
CREATE USER IF NOT EXISTS 'snakelab'@'%' IDENTIFIED BY ${snakelab};
CREATE USER IF NOT EXISTS ${reports}@'%' IDENTIFIED BY ${reports_password};
GRANT ALL PRIVILEGES ON ax3l.* TO 'ax3l'@'%';
GRANT SELECT ON snakelab.* TO 'ax3l'@'%';
GRANT ALL PRIVILEGES ON snakelab.* TO 'snakelab'@'%';
GRANT SELECT ON ax3l.* TO ${reports}@'%';
GRANT SELECT ON snakelab.* TO ${reports}@'%';
SQL
}
