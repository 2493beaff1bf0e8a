#!/usr/bin/env bash
# Make Redis and PostgreSQL reachable for the tests and the demo.
#   .ci/services.sh up     use the servers at ONSALE_REDIS_PORT (6379) / ONSALE_PG_PORT (5432) on
#                          127.0.0.1 when they answer; otherwise start private ones from the
#                          installed binaries (installing them with apt-get when missing and run
#                          as root). Writes the connection settings to .services/env. Also
#                          installs wrk (load generator of the benchmarks) and Debian's
#                          chromium (the browser tests' headless browser) when it can.
#   .ci/services.sh down   stop the private servers this script started.
set -euo pipefail
shopt -s inherit_errexit
root=$(cd "$(dirname "$0")/.." && pwd)
state="$root/.services"
mkdir -p "$state"
redis_port=${ONSALE_REDIS_PORT:-6379}
pg_port=${ONSALE_PG_PORT:-5432}
private_redis_port=${ONSALE_PRIVATE_REDIS_PORT:-6390}
private_pg_port=${ONSALE_PRIVATE_PG_PORT:-5440}

log() { printf '[services] %s\n' "$*" >&2; }

redis_ping() { # port
  local reply=""
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  read -r -t 2 reply <&3 || true
  exec 3>&- 3<&-
  [[ "$reply" == +PONG* ]]
}

tcp_open() { # port
  { (exec 3<>"/dev/tcp/127.0.0.1/$1"); } 2>/dev/null
}

apt_install() { # package...
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    log "installing $* with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2 \
      || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2; }
  else
    log "cannot install $* (needs apt-get and root)"; return 1
  fi
}

ensure_redis() {
  if redis_ping "$redis_port"; then echo "$redis_port"; return; fi
  if redis_ping "$private_redis_port"; then echo "$private_redis_port"; return; fi
  command -v redis-server >/dev/null || apt_install redis-server
  log "no Redis on $redis_port: starting a private one on $private_redis_port"
  mkdir -p "$state/redis"
  redis-server --port "$private_redis_port" --bind 127.0.0.1 --daemonize yes \
    --dir "$state/redis" --pidfile "$state/redis/redis.pid" --logfile "$state/redis/redis.log" \
    --save '' --appendonly no >&2
  for _ in $(seq 50); do redis_ping "$private_redis_port" && break; sleep 0.1; done
  redis_ping "$private_redis_port" || { log "private Redis did not start"; exit 1; }
  echo "$private_redis_port"
}

pg_bin() { # name
  command -v "$1" 2>/dev/null && return
  ls /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -n 1
}

ensure_postgres() {
  if tcp_open "$pg_port"; then echo "$pg_port"; return; fi
  if tcp_open "$private_pg_port"; then echo "$private_pg_port"; return; fi
  [ -n "$(pg_bin initdb)" ] || apt_install postgresql
  local initdb pg_ctl data run_as=()
  initdb=$(pg_bin initdb); pg_ctl=$(pg_bin pg_ctl)
  data="$state/pg"
  if [ "$(id -u)" = 0 ]; then
    # PostgreSQL refuses to run as root: use the packaged postgres user.
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    run_as=(runuser -u postgres --)
  fi
  log "no PostgreSQL on $pg_port: starting a private one on $private_pg_port"
  mkdir -p "$data" "$state/pgsock" "$state/pglog"
  if [ "$(id -u)" = 0 ]; then chown -R postgres "$data" "$state/pgsock" "$state/pglog"; fi
  chmod 700 "$data"
  if [ ! -f "$data/PG_VERSION" ]; then
    "${run_as[@]}" "$initdb" -D "$data" -A trust -U postgres >"$state/initdb.log" 2>&1
  fi
  "${run_as[@]}" "$pg_ctl" -D "$data" -l "$state/pglog/pg.log" -w -t 30 \
    -o "-p $private_pg_port -k $state/pgsock -c listen_addresses=127.0.0.1" start >&2
  echo "$private_pg_port"
}

stop_private() {
  if [ -f "$state/redis/redis.pid" ]; then
    kill "$(cat "$state/redis/redis.pid")" 2>/dev/null || true
    rm -f "$state/redis/redis.pid"
  fi
  if [ -f "$state/pg/postmaster.pid" ]; then
    local run_as=()
    [ "$(id -u)" = 0 ] && run_as=(runuser -u postgres --)
    "${run_as[@]}" "$(pg_bin pg_ctl)" -D "$state/pg" -m fast stop >&2 || true
  fi
}

ensure_load_tools() { # best effort: the benchmarks and their smoke tests need wrk
  command -v wrk >/dev/null || apt_install wrk || log "wrk missing: the claim_rate smoke test is skipped"
  # tests/browser drive Debian's chromium through Playwright (never a browser it downloads)
  [ -x /usr/bin/chromium ] || apt_install chromium || log "chromium missing: tests/browser try again, then skip"
}

case "${1:-up}" in
  up)
    ensure_load_tools
    rport=$(ensure_redis)
    pport=$(ensure_postgres)
    cat >"$state/env" <<ENV
export ONSALE_REDIS_URL=redis://127.0.0.1:$rport/0
export ONSALE_TEST_REDIS_URL=redis://127.0.0.1:$rport/0
export ONSALE_PG_DSN=postgresql://postgres@127.0.0.1:$pport/postgres
export ONSALE_TEST_PG_DSN=postgresql://postgres@127.0.0.1:$pport/postgres
ENV
    log "Redis on 127.0.0.1:$rport, PostgreSQL on 127.0.0.1:$pport (settings in .services/env)"
    ;;
  down) stop_private ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
