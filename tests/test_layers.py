"""Layers import downward only, measured on the package as installed (``txnchaos.*``): every
module's imports — module-level or inside functions, ``TYPE_CHECKING`` ones too, relative ones
resolved to their absolute names — and every ``txnchaos.<layer>`` module it names in a string
(``python -m txnchaos....`` command lines), against setup.py's ``LAYERS`` (each layer and the
layers it may import)."""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _layers() -> dict[str, tuple[str, ...]]:
    spec = importlib.util.spec_from_file_location("layers", ROOT / "scripts" / "layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: dict[str, tuple[str, ...]] = module.layers()
    return found


LAYERS = _layers()
NAMED = re.compile(r"\btxnchaos\.([a-z_]+)\b")


def installed_modules() -> Iterator[tuple[str, Path]]:
    """(module name, file) of every module of the installed ``txnchaos`` package."""
    for layer in LAYERS:
        spec = importlib.util.find_spec(f"txnchaos.{layer}")
        assert spec is not None and spec.submodule_search_locations, f"txnchaos.{layer}"
        for base in spec.submodule_search_locations:
            for path in sorted(Path(base).rglob("*.py")):
                parts = [layer, *path.relative_to(base).with_suffix("").parts]
                if parts[-1] == "__init__":
                    parts.pop()
                yield "txnchaos." + ".".join(parts), path


def imported(module: str, source: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute name) of everything ``module`` imports or names as a txnchaos module."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            yield node.lineno, name
            for alias in node.names:  # ``from .. import harness`` names a layer too
                yield node.lineno, f"{name}.{alias.name}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for m in NAMED.finditer(node.value):
                yield node.lineno, f"txnchaos.{m.group(1)}"


def upward(module: str, source: str, is_package: bool = False) -> list[str]:
    """The imports of ``module`` that reach a layer it may not import."""
    layer = module.split(".")[1]
    allowed = {layer, *LAYERS[layer]}
    out = []
    for line, name in imported(module, source, is_package):
        parts = name.split(".")
        reaches = parts[0] == "txnchaos" and len(parts) > 1 and parts[1] in LAYERS
        if reaches and parts[1] not in allowed:
            out.append(f"{module}:{line} imports {name}")
    return sorted(set(out))


def test_every_import_goes_down_the_layers() -> None:
    found = [
        problem
        for module, path in installed_modules()
        for problem in upward(module, path.read_text(encoding="utf-8"), path.name == "__init__.py")
    ]
    assert not found, "\n".join(found)


def test_the_layers_are_the_top_level_directories() -> None:
    for layer, below in LAYERS.items():
        assert (ROOT / layer / "__init__.py").is_file(), layer
        assert set(below) < set(LAYERS) and layer not in below, layer
    assert next(iter(LAYERS)) == "cluster"
    assert not LAYERS["cluster"], "the cluster imports no other layer"
    assert "harness" not in LAYERS["analysis"] and "analysis" not in LAYERS["harness"]


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("txnchaos.analysis.load", "from ..harness.run import child\n"),
        ("txnchaos.analysis.load", "def f():\n    from ..harness import cli\n"),
        ("txnchaos.analysis.load", "from .. import harness\n"),
        ("txnchaos.harness.run.child", "import txnchaos.analysis.analyze\n"),
        ("txnchaos.harness.run.child", "CMD = ['python', '-m', 'txnchaos.jobs.cli']\n"),
        (
            "txnchaos.rundir.schema",
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ..harness.cli import main\n",
        ),
        ("txnchaos.cluster.node", "from ..rundir import schema\n"),
    ],
)
def test_an_upward_import_is_caught(module: str, source: str) -> None:
    assert upward(module, source), source


def test_downward_and_sideways_imports_pass() -> None:
    assert not upward(
        "txnchaos.jobs.cli", "from ..harness.cli import main\nfrom ..analysis import x\n"
    )
    assert not upward("txnchaos.analysis.load", "from ..rundir.run_dir import RunDir\n")
    assert not upward("txnchaos.analysis.load", "from .input_uri import executor_path\n")
    assert not upward("txnchaos.harness", "from .cli import main\n", is_package=True)
