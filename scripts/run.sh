#!/usr/bin/env bash
# The main job: make the checkout ready (scripts/bootstrap.sh), then run the demo:
# a local cluster, a smoke workload produced and consumed, a summary, the cluster stopped.
# Arguments go to `txnchaos demo`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/txnchaos" demo "$@"
