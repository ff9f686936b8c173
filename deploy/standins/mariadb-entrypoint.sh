#!/bin/bash
# The official mariadb image's entry point contract, for the stand-in built from Debian's
# mariadb-server: MARIADB_* (or MYSQL_*) variables and their _FILE forms, a root password
# that is required unless MARIADB_ALLOW_EMPTY_ROOT_PASSWORD is set, root@MARIADB_ROOT_HOST (%),
# an optional database and user, and /docker-entrypoint-initdb.d (*.sh run or sourced, *.sql
# and *.sql.gz fed to the client) run once, when the data directory is new, against a server
# that listens on no network port; then the server runs as the mysql user.
set -euo pipefail
[ "${1:0:1}" = "-" ] && set -- mariadbd "$@"
case "$1" in mariadbd | mysqld) ;; *) exec "$@" ;; esac

if [ "$(id -u)" = 0 ]; then
  find /var/lib/mysql /run/mysqld \! -user mysql -exec chown mysql:mysql '{}' +
  exec setpriv --reuid=mysql --regid=mysql --init-groups "$0" "$@"
fi

# MARIADB_X, else MYSQL_X, else the contents of the file named by either's _FILE form.
setting() {
  local name
  for name in "MARIADB_$1" "MYSQL_$1"; do
    if [ -n "${!name:-}" ]; then printf '%s' "${!name}"; return; fi
    local file="${name}_FILE"
    if [ -n "${!file:-}" ]; then cat "${!file}"; return; fi
  done
}
sql_string() { local s=${1//\\/\\\\}; printf "'%s'" "${s//\'/\\\'}"; }

datadir=/var/lib/mysql
socket=/run/mysqld/mysqld.sock
if [ ! -d "$datadir/mysql" ]; then
  root_password=$(setting ROOT_PASSWORD)
  if [ -z "$root_password" ] && [ -z "$(setting ALLOW_EMPTY_ROOT_PASSWORD)" ]; then
    echo "error: database is uninitialized and MARIADB_ROOT_PASSWORD is not set" >&2
    exit 1
  fi
  root_host=$(setting ROOT_HOST); root_host=${root_host:-%}
  echo "entrypoint: initializing $datadir" >&2
  mariadb-install-db --datadir="$datadir" --rpm --auth-root-authentication-method=normal \
    --skip-test-db --skip-log-bin --default-time-zone=SYSTEM >/dev/null
  "$@" --skip-networking --socket="$socket" --skip-log-bin &
  server=$!
  for _ in $(seq 300); do
    mariadb-admin --socket="$socket" -uroot ping --silent 2>/dev/null && break
    kill -0 "$server" 2>/dev/null || { echo "error: the server did not start" >&2; exit 1; }
    sleep 0.2
  done
  client=(mariadb --protocol=socket --socket="$socket" -uroot)
  password=$(sql_string "$root_password")
  {
    echo "DROP USER IF EXISTS root@'127.0.0.1', root@'::1';"
    echo "EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\\'', @@hostname, '\\'');"
    echo "SET PASSWORD FOR 'root'@'localhost' = PASSWORD($password);"
    if [ "$root_host" != localhost ]; then
      echo "CREATE USER 'root'@'$root_host' IDENTIFIED BY $password;"
      echo "GRANT ALL ON *.* TO 'root'@'$root_host' WITH GRANT OPTION;"
    fi
    database=$(setting DATABASE)
    [ -n "$database" ] && echo "CREATE DATABASE IF NOT EXISTS \`$database\`;"
    user=$(setting USER)
    if [ -n "$user" ]; then
      echo "CREATE USER $(sql_string "$user")@'%' IDENTIFIED BY $(sql_string "$(setting PASSWORD)");"
      [ -n "$database" ] && echo "GRANT ALL ON \`$database\`.* TO '$user'@'%';"
    fi
  } | "${client[@]}"
  # Root's password reaches the clients through the environment, never a command line.
  [ -z "$root_password" ] || export MYSQL_PWD=$root_password
  for file in /docker-entrypoint-initdb.d/*; do
    case "$file" in
      *.sh) echo "entrypoint: running $file" >&2
            if [ -x "$file" ]; then "$file"; else . "$file"; fi ;;
      *.sql) echo "entrypoint: running $file" >&2; "${client[@]}" <"$file" ;;
      *.sql.gz) echo "entrypoint: running $file" >&2; gunzip -c "$file" | "${client[@]}" ;;
      *) ;;
    esac
  done
  kill "$server"
  wait "$server" || true
  unset MYSQL_PWD root_password
  echo "entrypoint: initialization done" >&2
fi
exec "$@"
