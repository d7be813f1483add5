#!/usr/bin/env bash
# Makes a fresh clone ready to run: .venv with the project (editable) and its test extras,
# Java for PySpark and, with --docker, a private Docker engine for this repository.
#
# Idempotent and fast when everything is in place. One line per step on stdout.
#
#   scripts/bootstrap.sh            venv + deps + Java
#   scripts/bootstrap.sh --docker   also install/start dockerd; writes var/docker/env
#                                   (`. var/docker/env` exports DOCKER_HOST)
#
# Environment:
#   PYTHON                          interpreter for the venv (default: python3.11)
#   TXNCHAOS_DOCKERD_STARTED_FILE   if set and this run starts dockerd, its PID is written
#                                   there (scripts/test.sh uses it to stop only what it started)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.txnchaos-deps.sha256"
WANT_DOCKER=0

for arg in "$@"; do
    case "$arg" in
        --docker) WANT_DOCKER=1 ;;
        -h | --help)
            sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "bootstrap: unknown argument: $arg (try --help)" >&2
            exit 2
            ;;
    esac
done

log() { printf '[bootstrap] %s\n' "$*"; }
die() {
    printf '[bootstrap] ERROR: %s\n' "$*" >&2
    exit 1
}

# ---------------------------------------------------------------- system packages (apt)
APT_UPDATED=0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
fi

apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install $* by hand"
    if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
        die "need root (or passwordless sudo) to install: $*"
    fi
    local aptlog="$ROOT/var/log/apt.log"
    mkdir -p "$(dirname "$aptlog")"
    if [ "$APT_UPDATED" -eq 0 ]; then
        log "apt-get update"
        if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update >"$aptlog" 2>&1; then
            tail -n 20 "$aptlog" >&2
            die "apt-get update failed (full log: $aptlog)"
        fi
        APT_UPDATED=1
    fi
    # Packages must not start system services (docker.io would start a machine-wide dockerd
    # on /var/run/docker.sock): a policy-rc.d that says "no" while installing, unless the
    # machine already has one.
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null && $SUDO chmod +x "$policy" &&
            made_policy=1
    fi
    log "apt-get install -y $*"
    local ok=1
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        "$@" >>"$aptlog" 2>&1 || ok=0
    if [ "$made_policy" -eq 1 ]; then $SUDO rm -f "$policy"; fi
    if [ "$ok" -eq 0 ]; then
        tail -n 20 "$aptlog" >&2
        die "apt-get install $* failed (full log: $aptlog)"
    fi
}

# ---------------------------------------------------------------- python venv
PYTHON="${PYTHON:-python3.11}"
venv_ok() {
    [ -x "$VENV/bin/python" ] &&
        "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' 2>/dev/null
}
if venv_ok; then
    log "venv: $VENV ok ($("$VENV/bin/python" -V 2>&1))"
else
    command -v "$PYTHON" >/dev/null 2>&1 ||
        die "$PYTHON not found (the project needs Python >= 3.11; set PYTHON=/path/to/python3.11)"
    if [ -e "$VENV" ]; then
        log "venv: $VENV is broken or too old, recreating"
        rm -rf "$VENV"
    fi
    log "venv: creating $VENV with $("$PYTHON" -V 2>&1)"
    "$PYTHON" -m venv "$VENV" || die "python -m venv failed (on Debian: apt-get install python3-venv)"
fi

# ---------------------------------------------------------------- project + test deps
deps_hash() {
    (
        cd "$ROOT"
        "$VENV/bin/python" -V 2>&1
        for f in pyproject.toml setup.py setup.cfg; do
            if [ -f "$f" ]; then sha256sum "$f"; fi
        done
    ) | sha256sum | cut -c1-64
}
WANT_HASH="$(deps_hash)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT_HASH" ] && [ -x "$VENV/bin/txnchaos" ]; then
    log "deps: up to date (stamp $(cut -c1-12 "$STAMP"))"
else
    piplog="$ROOT/var/log/pip-install.log"
    mkdir -p "$(dirname "$piplog")"
    log "deps: pip install -e '.[test,docs]' (log: var/log/pip-install.log)"
    t0=$SECONDS
    if ! (cd "$ROOT" && "$VENV/bin/python" -m pip install --disable-pip-version-check \
        -e '.[test,docs]' >"$piplog" 2>&1); then
        tail -n 30 "$piplog" >&2
        rm -f "$STAMP"
        die "pip install -e '.[test,docs]' failed (full log: $piplog)"
    fi
    printf '%s\n' "$WANT_HASH" >"$STAMP"
    log "deps: installed in $((SECONDS - t0))s"
fi

# ---------------------------------------------------------------- java (PySpark)
if java -version >/dev/null 2>&1; then
    log "java: $(java -version 2>&1 | head -n 1)"
else
    apt_install openjdk-17-jre-headless
    java -version >/dev/null 2>&1 || die "java still missing after installing openjdk-17-jre-headless"
    log "java: $(java -version 2>&1 | head -n 1)"
fi

# ---------------------------------------------------------------- maven (Apache Kafka's releases)
# `--launcher kafka` and its tests fetch Apache Kafka's release jars from Maven Central with
# mvn (harness/maven.py), once per release into ~/.cache/txnchaos.
if command -v mvn >/dev/null 2>&1; then
    log "maven: $(mvn -v 2>/dev/null | head -n 1 | sed 's/\x1b\[[0-9;]*m//g')"
else
    apt_install maven
    command -v mvn >/dev/null 2>&1 || die "mvn still missing after installing maven"
    log "maven: $(mvn -v 2>/dev/null | head -n 1 | sed 's/\x1b\[[0-9;]*m//g')"
fi

# ---------------------------------------------------------------- the Java client program
# The java_* workload kinds run the official Java client through a small program
# (harness/workload/java_client/src), compiled with javac against kafka-clients fetched from
# Maven Central into the cache; recompiled only when its sources change.
if ! command -v javac >/dev/null 2>&1; then
    apt_install openjdk-17-jdk-headless
fi
command -v mvn >/dev/null 2>&1 || apt_install maven
jlog="$ROOT/var/log/java-client-build.log"
mkdir -p "$(dirname "$jlog")"
if jout="$("$VENV/bin/python" -m txnchaos.harness.workload.java_client.build 2>"$jlog")"; then
    log "java client: $jout"
else
    tail -n 20 "$jlog" >&2
    die "the Java client program did not build (full log: $jlog)"
fi

# ---------------------------------------------------------------- postgresql (dual-write tests)
# The dual-write workload's PostgreSQL adapter is tested against a real server (initdb/postgres).
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    log "postgresql: $(ls -d /usr/lib/postgresql/*/bin | head -n 1)"
else
    apt_install postgresql
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || die "initdb still missing after installing postgresql"
    log "postgresql: $(ls -d /usr/lib/postgresql/*/bin | head -n 1)"
fi

[ "$WANT_DOCKER" -eq 1 ] || {
    log "done"
    exit 0
}

# ---------------------------------------------------------------- docker engine
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
# jlink makes the Apache Kafka node image's Java runtime (harness/launch/kafka/image.py)
command -v jlink >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
if [ "${#need[@]}" -gt 0 ]; then
    # docker.io pulls in containerd, runc, iptables; debootstrap builds the local base image.
    apt_install "${need[@]}"
fi
command -v dockerd >/dev/null 2>&1 || die "dockerd not found after installing docker.io"
command -v docker >/dev/null 2>&1 || die "docker client not found after installing docker.io"

DOCKER_DIR="$ROOT/var/docker"
DATA_ROOT="$DOCKER_DIR/data"
PIDFILE="$DOCKER_DIR/dockerd.pid"
DLOG="$DOCKER_DIR/dockerd.log"
ENVFILE="$DOCKER_DIR/env"
mkdir -p "$DOCKER_DIR"

# Unix socket paths are limited to 107 bytes (sun_path is 108 with the NUL). dockerd and its
# containerd put sockets below exec-root (e.g. containerd/containerd.sock.ttrpc), so exec-root
# needs ~45 bytes of headroom. A long repo path falls back to a short per-repo dir in /tmp.
SOCK="$DOCKER_DIR/docker.sock"
EXEC_ROOT="$DOCKER_DIR/exec"
if [ "${#SOCK}" -gt 100 ] || [ "${#EXEC_ROOT}" -gt 60 ]; then
    short="/tmp/txnchaos-docker-$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)"
    mkdir -p "$short"
    SOCK="$short/docker.sock"
    EXEC_ROOT="$short/exec"
    log "docker: repo path is long, sockets go to $short"
fi
export DOCKER_HOST="unix://$SOCK"

dockerd_pid() {
    local pid
    [ -f "$PIDFILE" ] || return 1
    pid="$(cat "$PIDFILE" 2>/dev/null)"
    [ -n "$pid" ] && [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] ||
        return 1
    printf '%s\n' "$pid"
}

if pid="$(dockerd_pid)" && [ -S "$SOCK" ] && docker info >/dev/null 2>&1; then
    log "docker: dockerd already running (pid $pid)"
else
    if pid="$(dockerd_pid)"; then
        # Alive but not answering: probably still starting; give it a moment below.
        log "docker: dockerd pid $pid is running but not answering yet, waiting"
    else
        rm -f "$PIDFILE" "$SOCK"
        if pgrep -x dockerd >/dev/null 2>&1; then
            log "docker: note: another dockerd runs on this machine (pids: $(pgrep -x dockerd |
                tr '\n' ' ')); both share the docker0 bridge"
        fi
        mkdir -p "$DATA_ROOT" "$EXEC_ROOT"
        log "docker: starting dockerd (data-root var/docker/data, socket $SOCK, log var/docker/dockerd.log)"
        # setsid: own session/process group, so it survives this script and a Ctrl-C in it.
        setsid dockerd --storage-driver=overlay2 \
            --data-root "$DATA_ROOT" --exec-root "$EXEC_ROOT" \
            -H "unix://$SOCK" --pidfile "$PIDFILE" \
            >"$DLOG" 2>&1 </dev/null &
        started=$!
        if [ -n "${TXNCHAOS_DOCKERD_STARTED_FILE:-}" ]; then
            printf '%s\n' "$started" >"$TXNCHAOS_DOCKERD_STARTED_FILE"
        fi
    fi
    deadline=$((SECONDS + 90))
    until [ -S "$SOCK" ] && docker info >/dev/null 2>&1; do
        if [ -n "${started:-}" ] && ! kill -0 "$started" 2>/dev/null; then
            tail -n 25 "$DLOG" >&2
            die "dockerd exited during startup (full log: $DLOG)"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 25 "$DLOG" >&2
            die "dockerd did not answer within 90s (full log: $DLOG)"
        fi
        sleep 0.5
    done
    log "docker: dockerd ready (pid $(cat "$PIDFILE"), server $(docker version --format '{{.Server.Version}}' 2>/dev/null))"
fi

printf 'export DOCKER_HOST=%s\n' "$DOCKER_HOST" >"$ENVFILE"
log "docker: DOCKER_HOST=$DOCKER_HOST (to use it: . var/docker/env)"
log "done"
