#!/usr/bin/env bash
# The whole test suite, as CI runs it (`bash .ci/run` calls this):
#   1. scripts/bootstrap.sh --docker   venv, deps, Java, a Docker engine for this repo
#   2. scripts/build-image.sh          node image, rebuilt only when its inputs changed
#   3. ruff check . and ruff format --check ., then mypy (scripts/typecheck.sh), then the
#      documentation site (mkdocs build --strict: a broken link between pages fails it)
#   4. pytest over tests/ with a per-test timeout, in two worker processes (pytest-xdist,
#      one test file per worker at a time): most integration tests wait on real nodes and
#      timed runs, so two workers halve the wall time even on two cores
# Exits non-zero when any step fails (lint failures do not stop the tests from running).
# A dockerd started by this run is stopped at the end (by PID); one that was already
# running is left alone.
#
# Environment: TXNCHAOS_TEST_TIMEOUT (per-test seconds, default 300), TXNCHAOS_TEST_WORKERS
# (pytest-xdist workers, default 2; 0 runs in this process). Arguments go to pytest (e.g.
# scripts/test.sh tests/docker -x; a later -n overrides the workers); none means tests/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[test] %s\n' "$*"; }

STARTED_FILE="$(mktemp "${TMPDIR:-/tmp}/txnchaos-dockerd-started.XXXXXX")"
export TXNCHAOS_DOCKERD_STARTED_FILE="$STARTED_FILE"

# shellcheck disable=SC2317 # called from the EXIT trap
stop_our_dockerd() {
    local pid
    pid="$(cat "$STARTED_FILE" 2>/dev/null || true)"
    rm -f "$STARTED_FILE"
    [ -n "$pid" ] || return 0
    if [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
        log "stopping the dockerd this run started (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 60); do
            [ -d "/proc/$pid" ] || return 0
            sleep 0.5
        done
        log "dockerd pid $pid did not stop within 30s; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
}
trap stop_our_dockerd EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

T0=$SECONDS
bash scripts/bootstrap.sh --docker
# shellcheck disable=SC1091
. var/docker/env
export DOCKER_HOST
status=0
# A failed image build is reported but does not hide the lint and test results.
bash scripts/build-image.sh || {
    status=1
    log "image build FAILED (the docker tests will say more)"
}

log "ruff check ."
.venv/bin/ruff check . || status=1
log "ruff format --check ."
.venv/bin/ruff format --check . || status=1
log "mypy (scripts/typecheck.sh)"
bash scripts/typecheck.sh || status=1
log "mkdocs build --strict (the documentation site, into var/site)"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir var/site || status=1

mkdir -p var/log
PYLOG="var/log/pytest.log"
log "pytest tests (per-test timeout ${TXNCHAOS_TEST_TIMEOUT:-300}s; log: $PYLOG)"
set +e
# No arguments: everything under tests/. With arguments (paths, -k, -x ...) pytest gets them
# as they are; without a path among them it falls back to testpaths (tests) from pyproject.
[ "$#" -gt 0 ] || set -- tests
# --continue-on-collection-errors: one module that fails to import must not hide the rest.
.venv/bin/python -m pytest -p no:cacheprovider --continue-on-collection-errors \
    --timeout="${TXNCHAOS_TEST_TIMEOUT:-300}" --durations=40 \
    -n "${TXNCHAOS_TEST_WORKERS:-2}" --dist loadfile "$@" 2>&1 | tee "$PYLOG"
pytest_status=${PIPESTATUS[0]}
set -e
[ "$pytest_status" -eq 0 ] || status=1

summary="$(grep -E '^=+ .* in [0-9.]+s' "$PYLOG" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')"
log "pytest: ${summary:-no summary line (exit $pytest_status)}"
log "total $((SECONDS - T0))s: $([ "$status" -eq 0 ] && echo OK || echo FAILED)"
exit "$status"
