#!/usr/bin/env bash
# Writes the compose deployment's secrets: one file per password in DIR (default ./secrets, or
# AX3L_SECRETS_DIR), random unless it exists already (a secret is never replaced: the database
# volume was initialised with it). The folder is 0700, so on the host only its owner reads
# them; the files are 0644 so that the containers' own users (mysql, ax3l) can read the copy
# mounted at /run/secrets/<name>. compose.yaml reads them from the same folder. It also makes
# an empty notify_urls (the alerts' apprise URLs, which hold tokens; empty: no alerts) unless it
# exists: write your URLs into it.
#
#   scripts/compose-secrets.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${AX3L_SECRETS_DIR:-./secrets}}
names=(mysql_root_password ax3l_db_password snakelab_db_password reports_db_password
  seats_db_password)
umask 077
mkdir -p "$dir"
chmod 700 "$dir"
for name in "${names[@]}"; do
  file=$dir/$name
  if [ -s "$file" ]; then
    echo "compose-secrets: $file kept" >&2
  else
    # 32 hex characters from the kernel's random source.
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$file.new"
    mv "$file.new" "$file"
    echo "compose-secrets: $file written" >&2
  fi
  chmod 644 "$file"
done
if [ ! -e "$dir/notify_urls" ]; then
  : >"$dir/notify_urls"
  echo "compose-secrets: $dir/notify_urls written (empty: no alerts)" >&2
fi
chmod 644 "$dir/notify_urls"
