#!/bin/bash
# Runs once, when the database volume is new: both databases, Ax3l's and SnakeLab's users and
# the report server's SELECT-only user (the SQL is in ax3l-users.bash, shared with
# scripts/mariadb.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/ax3l-users.bash"
{
  ax3l_users_sql "${AX3L_REPORTS_DB_USER:-ax3l_reports}" "${AX3L_DB_PASSWORD}" \
    "${SNAKELAB_DB_PASSWORD}" "${AX3L_REPORTS_DB_PASSWORD}"
  echo "FLUSH PRIVILEGES;"
} | mariadb --protocol=socket -uroot -p"${MYSQL_ROOT_PASSWORD}"
