#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on loopback for the store tests and
# prints the line that points them at it:
#
#   eval "$(.ci/postgres.sh)"     # exports CHORUS_PG_DSN
#   .ci/postgres.sh stop          # stops the server and removes its directory
#
# Idempotent: Debian's postgresql package is installed only when the server
# binaries are missing, and a server this script started before (still
# running) is reused. The cluster lives in $CHORUS_PG_STATE (default
# ${TMPDIR:-/tmp}/chorus-ci-postgres), runs as the postgres user when this
# runs as root (initdb refuses root), trusts local connections and listens on
# 127.0.0.1 only, with fsync on. Only the export line goes to stdout.
set -euo pipefail

state="${CHORUS_PG_STATE:-${TMPDIR:-/tmp}/chorus-ci-postgres}"
export LC_ALL=C

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# find_bindir prints the directory holding initdb and pg_ctl. Debian keeps
# them in /usr/lib/postgresql/<version>/bin, off PATH; pg_config --bindir may
# name the client's directory instead.
find_bindir() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5nr); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			echo "$d"
			return 0
		fi
	done
	if command -v pg_config >/dev/null 2>&1; then
		d="$(pg_config --bindir 2>/dev/null || true)"
		if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			echo "$d"
			return 0
		fi
	fi
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
		return 0
	fi
	return 1
}

# as_pg runs a command as the postgres user when we are root.
as_pg() {
	if [ "$(id -u)" -ne 0 ]; then
		"$@"
	elif command -v runuser >/dev/null 2>&1; then
		runuser -u postgres -- "$@"
	else
		su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
	fi
}

dsn() { printf "postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable" "$1"; }

# port_free succeeds when nothing accepts connections on 127.0.0.1:$1.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [ "${1:-start}" = stop ]; then
	if [ -d "$state/data" ] && bindir="$(find_bindir)"; then
		as_pg "$bindir/pg_ctl" -D "$state/data" -m fast -w stop >&2 || true
	fi
	rm -rf "$state"
	log "stopped; removed $state"
	exit 0
fi
[ "${1:-start}" = start ] || die "usage: $0 [start|stop]"

if ! bindir="$(find_bindir)"; then
	[ "$(id -u)" -eq 0 ] || die "the PostgreSQL server binaries are missing, and installing them needs root"
	log "installing Debian's postgresql package"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq postgresql >&2
	bindir="$(find_bindir)" || die "postgresql is installed but initdb and pg_ctl are nowhere to be found"
fi

# Reuse the server a previous run started, if it still answers.
if [ -f "$state/port" ] && [ -d "$state/data" ]; then
	port="$(cat "$state/port")"
	if as_pg "$bindir/pg_ctl" -D "$state/data" status >/dev/null 2>&1 &&
		"$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; then
		log "reusing the server in $state on port $port"
		echo "export CHORUS_PG_DSN='$(dsn "$port")'"
		exit 0
	fi
	log "discarding the stale cluster in $state"
	as_pg "$bindir/pg_ctl" -D "$state/data" -m immediate -w stop >/dev/null 2>&1 || true
fi

rm -rf "$state"
mkdir -p "$state"
chmod 700 "$state"
if [ "$(id -u)" -eq 0 ]; then
	id postgres >/dev/null 2>&1 || die "running as root, initdb refuses root, and there is no postgres user to run it as"
	chown postgres: "$state"
fi

log "initdb with $bindir into $state/data"
if ! as_pg "$bindir/initdb" -D "$state/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$state/initdb.log" 2>&1; then
	cat "$state/initdb.log" >&2
	die "initdb failed"
fi

started=
for port in $(shuf -i 20000-60000 -n 8 2>/dev/null || seq 54329 2 54343); do
	port_free "$port" || continue
	if as_pg "$bindir/pg_ctl" -D "$state/data" -l "$state/server.log" -w -t 90 \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $state -c fsync=on -c synchronous_commit=on -c max_connections=200" \
		start >&2; then
		started=1
		break
	fi
	tail -n 20 "$state/server.log" >&2 || true
done
[ -n "$started" ] || die "the server did not start; see $state/server.log"

for _ in $(seq 1 120); do
	if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; then
		break
	fi
	sleep 0.5
done
"$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -Atc 'SELECT 1' >/dev/null ||
	die "the server on port $port does not accept connections; see $state/server.log"
echo "$port" >"$state/port"
log "PostgreSQL ($("$bindir/postgres" --version)) ready on 127.0.0.1:$port, data in $state"
echo "export CHORUS_PG_DSN='$(dsn "$port")'"
