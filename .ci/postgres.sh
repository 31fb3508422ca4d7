# A throwaway PostgreSQL cluster for the outbox's tests, sourced by .ci/run:
#
#   . .ci/postgres.sh && start_postgres
#
# installs PostgreSQL from Debian's packages when it is absent, creates a cluster in a temp dir
# (initdb), starts it on a Unix socket in that dir only (no TCP port, so nothing to collide
# with), creates a database, and exports OUTBOX_DATABASE_URL and CI_REQUIRES_POSTGRES=1. The
# cluster is stopped and its dir removed on exit (stop_postgres, set as the EXIT trap).
# initdb refuses to run as root: as root, the cluster belongs to the `postgres` user Debian's
# package creates (or to a `pgci` user created here).
#
# Alone, for a local run of the PostgreSQL tests:
#
#   bash -c '. .ci/postgres.sh && start_postgres && cargo test -p hodoflow-outbox --features postgres --test outbox_postgres'

# shellcheck source=.ci/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

postgres_bin_dir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$dir" ] && [ -x "$dir/pg_ctl" ] && echo "$dir"
}

install_postgres() {
  postgres_bin_dir >/dev/null && return 0
  apt_install PostgreSQL postgresql || return 1
  postgres_bin_dir >/dev/null || { echo "apt-get installed postgresql, but no /usr/lib/postgresql/*/bin/pg_ctl" >&2; return 1; }
}

# Runs "$@" as the cluster's owner.
as_pg_owner() {
  if [ -z "${PG_OWNER:-}" ]; then
    "$@"
  elif command -v runuser >/dev/null; then
    runuser -u "$PG_OWNER" -- "$@"
  else
    su -s /bin/sh "$PG_OWNER" -c "$(printf '%q ' "$@")"
  fi
}

start_postgres() {
  local started=$SECONDS bin
  install_postgres || return 1
  bin=$(postgres_bin_dir)
  PG_OWNER=
  if [ "$(id -u)" -eq 0 ]; then
    if id postgres >/dev/null 2>&1; then
      PG_OWNER=postgres
    else
      id pgci >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin pgci
      PG_OWNER=pgci
    fi
  fi
  # In /tmp, not $TMPDIR: a Unix socket's path must stay under 108 bytes.
  PG_DIR=$(mktemp -d /tmp/outbox-pg.XXXXXX)
  chmod 755 "$PG_DIR"
  [ -z "$PG_OWNER" ] || chown "$PG_OWNER" "$PG_DIR"
  PG_BIN=$bin
  trap stop_postgres EXIT
  trap 'exit 130' INT TERM
  as_pg_owner "$bin/initdb" -D "$PG_DIR/data" -U outbox -A trust -E UTF8 --locale=C --no-sync \
    >"$PG_DIR/initdb.log" 2>&1 || { cat "$PG_DIR/initdb.log" >&2; return 1; }
  # fsync off: a throwaway cluster; a crash loses nothing anyone keeps.
  as_pg_owner "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-c listen_addresses='' -k $PG_DIR -p 5432 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null || { cat "$PG_DIR/server.log" >&2; return 1; }
  local tries=0
  until "$bin/pg_isready" -q -h "$PG_DIR" -p 5432; do
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || { echo "PostgreSQL did not get ready" >&2; cat "$PG_DIR/server.log" >&2; return 1; }
    sleep 0.1
  done
  as_pg_owner "$bin/createdb" -h "$PG_DIR" -p 5432 -U outbox outbox
  export OUTBOX_DATABASE_URL="postgresql://outbox@localhost/outbox?host=$PG_DIR&port=5432"
  export CI_REQUIRES_POSTGRES=1
  echo "== PostgreSQL $("$bin/postgres" --version | awk '{print $3}') ready on $PG_DIR in $((SECONDS - started)) s: OUTBOX_DATABASE_URL=$OUTBOX_DATABASE_URL"
}

stop_postgres() {
  [ -n "${PG_DIR:-}" ] && [ -d "$PG_DIR" ] || return 0
  as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
  PG_DIR=
}
