#!/usr/bin/env bash
# A private MariaDB for development, tests and `make run`: own data directory, socket and port
# under the git-ignored run directory, so it never touches a system MySQL.
#   scripts/mariadb.sh start|stop|status|env
# Settings: AX3L_RUN_DIR (default <repo>/.run), AX3L_DEV_DB_PORT (default 33306).
# Users: ax3l (ALL on ax3l, SELECT on snakelab), snakelab (ALL on snakelab), ax3l_reports
# (SELECT on both: the report server's login), ax3l_seats (the seats' endpoint: SELECT on
# snakelab here, its few grants on ax3l's tables from `ax3l-db create`) and ax3l_admin (tests
# only: throwaway databases).
# `start` is idempotent: on a running server or an existing data directory it (re)applies the
# users and grants, so a data directory made by an older version gains the newer users.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../deploy/mysql-init/ax3l-users.bash
. "$repo/deploy/mysql-init/ax3l-users.bash"
run_dir=${AX3L_RUN_DIR:-$repo/.run}
base=$run_dir/mariadb
data=$base/data
sock=$base/mysqld.sock
pidfile=$base/mysqld.pid
port=${AX3L_DEV_DB_PORT:-33306}
envfile=$run_dir/db.env

log() { echo "mariadb: $*" >&2; }

install_if_missing() {
  if command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; then return; fi
  if [ "$(id -u)" != 0 ]; then
    log "mariadb-server is not installed; install it (apt-get install mariadb-server) and retry"
    exit 1
  fi
  log "installing mariadb-server from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-client >/dev/null
}

alive() {
  # A killed server can linger as a zombie until its parent reaps it: that is not alive.
  kill -0 "$1" 2>/dev/null || return 1
  [ ! -r "/proc/$1/stat" ] || [ "$(sed 's/^.*) \(.\).*$/\1/' "/proc/$1/stat")" != Z ]
}

running() {
  [ -f "$pidfile" ] && alive "$(cat "$pidfile")"
}

admin_sql() {
  mariadb --no-defaults --protocol=socket --socket="$sock" -uroot "$@"
}

random_secret() { head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20; }

# Seconds `start` waits for the server to accept connections (InnoDB crash recovery after a
# kill -9 can take a while).
start_wait=120

ready() { admin_sql -e "SELECT 1" >/dev/null 2>&1; }

wait_ready() {
  local deadline=$((SECONDS + start_wait))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if ready; then return 0; fi
    if [ -n "${1:-}" ] && ! alive "$1"; then return 1; fi
    sleep 0.1
  done
  ready
}

load_secrets() {
  # Secrets are made once and kept, so restarts and other shells agree; a secret added by a
  # newer version is appended to an existing file.
  umask 077
  touch "$base/secrets"
  local name
  for name in ax3l_pw snakelab_pw admin_pw reports_pw seats_pw; do
    grep -q "^$name=" "$base/secrets" || echo "$name=$(random_secret)" >>"$base/secrets"
  done
  # shellcheck disable=SC1090,SC1091
  . "$base/secrets"
}

write_env() {
  load_secrets
  umask 077
  # Written next to the file and renamed: a reader never sees it half written.
  cat >"$envfile.tmp" <<ENV
# Written by scripts/mariadb.sh: the private MariaDB of this checkout.
DB_HOST=127.0.0.1
DB_PORT=$port
DB_USER=ax3l
DB_PASSWORD=$ax3l_pw
DB_SOCKET=$sock
AX3L_DB_NAME=ax3l
AX3L_SNAKELAB_DB_NAME=snakelab
SNAKELAB_DB_HOST=127.0.0.1
SNAKELAB_DB_PORT=$port
SNAKELAB_DB_USER=snakelab
SNAKELAB_DB_PASSWORD=$snakelab_pw
SNAKELAB_DB_NAME=snakelab
AX3L_REPORTS_DB_USER=ax3l_reports
AX3L_REPORTS_DB_PASSWORD=$reports_pw
AX3L_SEATS_DB_USER=ax3l_seats
AX3L_SEATS_DB_PASSWORD=$seats_pw
AX3L_DB_ADMIN_USER=ax3l_admin
AX3L_DB_ADMIN_PASSWORD=$admin_pw
ENV
  mv -f "$envfile.tmp" "$envfile"
}

apply_users() {
  load_secrets
  {
    ax3l_users_sql ax3l_reports "$ax3l_pw" "$snakelab_pw" "$reports_pw" ax3l_seats "$seats_pw"
    echo "CREATE USER IF NOT EXISTS 'ax3l_admin'@'%' IDENTIFIED BY '$admin_pw';"
    echo "GRANT ALL PRIVILEGES ON *.* TO 'ax3l_admin'@'%' WITH GRANT OPTION;"
    echo "FLUSH PRIVILEGES;"
  } | admin_sql
}

start() {
  install_if_missing
  # A temporary directory of its own: servers sharing /tmp have collided on temp table names.
  mkdir -p "$base/tmp"
  if running; then
    # Maybe started a moment ago by someone else: wait until it answers, then make sure the
    # users of this version exist.
    if ! wait_ready "$(cat "$pidfile")"; then
      log "running but not answering after ${start_wait} s; see $base/error.log"
      exit 1
    fi
    apply_users
    write_env
    log "already running on 127.0.0.1:$port"
    return
  fi
  if [ ! -d "$data/mysql" ]; then
    log "initialising $data"
    mariadb-install-db --no-defaults --datadir="$data" --tmpdir="$base/tmp" --user="$(id -un)" \
      --auth-root-authentication-method=socket --skip-test-db >"$base/install.log" 2>&1 \
      || { cat "$base/install.log" >&2; exit 1; }
  fi
  mariadbd --no-defaults --datadir="$data" --tmpdir="$base/tmp" --socket="$sock" --port="$port" \
    --bind-address=127.0.0.1 --pid-file="$pidfile" --log-error="$base/error.log" \
    --user="$(id -un)" --skip-name-resolve --max-connections=500 \
    --innodb-buffer-pool-size=512M --innodb-flush-log-at-trx-commit=2 \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
    >/dev/null 2>&1 &
  local server=$!
  if ! wait_ready "$server"; then
    log "did not start; see $base/error.log"
    tail -20 "$base/error.log" >&2 || true
    exit 1
  fi
  apply_users
  write_env
  log "running on 127.0.0.1:$port (settings in $envfile)"
}

stop() {
  if running; then
    kill "$(cat "$pidfile")"
    for _ in $(seq 1 300); do running || break; sleep 0.1; done
    log "stopped"
  else
    log "not running"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if running; then log "running on 127.0.0.1:$port"; else log "not running"; exit 1; fi ;;
  env) cat "$envfile" ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
