#!/usr/bin/env bash
# Type-check the package with mypy (config: [tool.mypy] in pyproject.toml).
#
# The repository keeps the layers (setup.py's LAYERS: cluster/, rundir/, harness/, ...) at the
# top level while the code imports them as txnchaos.cluster etc. (setup.py maps them); mypy
# cannot follow the editable install's import hook, so this builds var/typecheck/txnchaos/ out
# of symlinks to the layers and checks that package, then the benchmarks (bench/*.py) against it.
# Arguments go to mypy's check of the package.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TREE="$ROOT/var/typecheck"
mkdir -p "$TREE/txnchaos"
: >"$TREE/txnchaos/__init__.py"
LAYERS="$("$ROOT/.venv/bin/python" "$ROOT/scripts/layers.py")"
for layer in $LAYERS; do
    ln -sfn "$ROOT/$layer" "$TREE/txnchaos/$layer"
done
# test support shared by tests/ and bench/ (not installed): checked beside the package
ln -sfn "$ROOT/txnchaos_testing" "$TREE/txnchaos_testing"
cd "$TREE"
"$ROOT/.venv/bin/mypy" --config-file "$ROOT/pyproject.toml" \
    --cache-dir "$ROOT/var/typecheck/.mypy_cache" \
    --python-executable "$ROOT/.venv/bin/python" -p txnchaos -p txnchaos_testing "$@"
# the benchmarks import the package as installed; here they find it in the tree above
MYPYPATH="$TREE" exec "$ROOT/.venv/bin/mypy" --config-file "$ROOT/pyproject.toml" \
    --cache-dir "$ROOT/var/typecheck/.mypy_cache-bench" \
    --python-executable "$ROOT/.venv/bin/python" "$ROOT"/bench/*.py
