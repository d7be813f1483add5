#!/usr/bin/env bash
# The main job: make the checkout ready (scripts/bootstrap.sh: venv, dependencies, Java for
# PySpark), then run the smoke scenario: a local cluster behind fault proxies, transactional
# producers, read_committed consumers and a copier under request delays, a dropped and a
# reordered request, a node kill and restart and a producer crash; then the verdict and
# report (runs/smoke-*/verdict.json, report.html).
# Arguments go to `txnchaos run` (e.g. --seed 7, --out DIR, --no-analyze; --launcher kafka runs
# the same scenario against Apache Kafka's own release, fetched with Maven on first use:
# docs/apache-kafka.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/txnchaos" run scenarios/smoke.yaml "$@"
