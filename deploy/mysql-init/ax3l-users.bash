# Sourced, never run: the SQL of Ax3l's two databases, the users and their grants, one copy for
# 01-ax3l.sh (a new compose volume) and scripts/mariadb.sh (the private MariaDB). The init
# folder runs only *.sh and *.sql files, so this one is left alone there.
#
#   ax3l_users_sql REPORTS_USER AX3L_PASSWORD SNAKELAB_PASSWORD REPORTS_PASSWORD \
#     [SEATS_USER SEATS_PASSWORD]
#
# Ax3l may only read SnakeLab's tables; the report server may only read both databases (the
# same grants as `ax3l-db grant-reports`). The seats' endpoint user (when SEATS_PASSWORD is
# given) may read SnakeLab's tables here; its grants on Ax3l's tables (SELECT on seats, INSERT
# on events and event_messages, as `ax3l-db grant-seats`) need the tables, so `ax3l-db create`
# gives them as Ax3l's user, which holds its own database WITH GRANT OPTION for that. Every
# value is written as an escaped SQL string, so a quote or backslash in a password is part of
# the password, never of the statement.

# A single-quoted SQL string of $1: backslashes doubled, quotes doubled (as `ax3l-db` does).
ax3l_sql_string() {
  local s=${1//\\/\\\\}
  printf "'%s'" "${s//\'/\'\'}"
}

ax3l_users_sql() {
  local reports ax3l snakelab reports_password seats=
  reports=$(ax3l_sql_string "$1")
  ax3l=$(ax3l_sql_string "$2")
  snakelab=$(ax3l_sql_string "$3")
  reports_password=$(ax3l_sql_string "$4")
  if [ -n "${6:-}" ]; then seats=$(ax3l_sql_string "$5"); fi
  cat <<SQL
CREATE DATABASE IF NOT EXISTS ax3l CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE DATABASE IF NOT EXISTS snakelab CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS 'ax3l'@'%' IDENTIFIED BY ${ax3l};
CREATE USER IF NOT EXISTS 'snakelab'@'%' IDENTIFIED BY ${snakelab};
CREATE USER IF NOT EXISTS ${reports}@'%' IDENTIFIED BY ${reports_password};
GRANT ALL PRIVILEGES ON ax3l.* TO 'ax3l'@'%' WITH GRANT OPTION;
GRANT SELECT ON snakelab.* TO 'ax3l'@'%';
GRANT ALL PRIVILEGES ON snakelab.* TO 'snakelab'@'%';
GRANT SELECT ON ax3l.* TO ${reports}@'%';
GRANT SELECT ON snakelab.* TO ${reports}@'%';
SQL
  if [ -n "$seats" ]; then
    cat <<SQL
CREATE USER IF NOT EXISTS ${seats}@'%' IDENTIFIED BY $(ax3l_sql_string "$6");
GRANT SELECT ON snakelab.* TO ${seats}@'%';
SQL
  fi
}
