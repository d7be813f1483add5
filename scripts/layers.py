"""Prints the package's layers (setup.py's LAYERS), bottom up, one a line: for the shell
scripts that need them (typecheck.sh, build-image.sh) without running setup.py."""

from __future__ import annotations

import ast
from pathlib import Path

SETUP = Path(__file__).resolve().parents[1] / "setup.py"


def layers(setup: Path = SETUP) -> dict[str, tuple[str, ...]]:
    """LAYERS as setup.py states it: each layer and the layers it may import."""
    for node in ast.parse(setup.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "LAYERS" for t in targets):
                assert node.value is not None
                value = ast.literal_eval(node.value)
                return {k: tuple(v) for k, v in value.items()}
    raise LookupError(f"{setup} has no LAYERS")


if __name__ == "__main__":
    print("\n".join(layers()))
