#!/bin/bash
# Runs once, when the database volume is new: both databases, Ax3l's and SnakeLab's users,
# the report server's SELECT-only user and, when its password is given, the seats' endpoint's
# user (the SQL is in ax3l-users.bash, shared with
# scripts/mariadb.sh). Passwords come from compose secrets (the *_FILE variables) or, for a
# hand-made container, the variables themselves; none is ever on a command line: the client
# reads root's from its environment (MYSQL_PWD).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/ax3l-users.bash"

# The value of the first of the variables set, else the contents of the file its _FILE names.
secret() {
  local name file
  for name in "$@"; do
    if [ -n "${!name:-}" ]; then printf '%s' "${!name}"; return; fi
  done
  for name in "$@"; do
    file="${name}_FILE"
    if [ -n "${!file:-}" ]; then cat "${!file}"; return; fi
  done
  echo "01-ax3l.sh: set $1 or ${1}_FILE" >&2
  exit 1
}

root_password=$(secret MARIADB_ROOT_PASSWORD MYSQL_ROOT_PASSWORD)
ax3l_password=$(secret AX3L_DB_PASSWORD)
snakelab_password=$(secret SNAKELAB_DB_PASSWORD)
reports_password=$(secret AX3L_REPORTS_DB_PASSWORD)
seats_password=
if [ -n "${AX3L_SEATS_DB_PASSWORD:-}${AX3L_SEATS_DB_PASSWORD_FILE:-}" ]; then
  seats_password=$(secret AX3L_SEATS_DB_PASSWORD)
fi
{
  ax3l_users_sql "${AX3L_REPORTS_DB_USER:-ax3l_reports}" "$ax3l_password" \
    "$snakelab_password" "$reports_password" "${AX3L_SEATS_DB_USER:-ax3l_seats}" \
    "$seats_password"
  echo "FLUSH PRIVILEGES;"
} | MYSQL_PWD=$root_password mariadb --protocol=socket -uroot
