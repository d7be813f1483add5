"""`txnchaos node` runs through the CLI module, so importing it must stay light: a node
that imported pyarrow or librdkafka would start their threads before it pins itself
to its CPUs (`cluster up --cpus`), and pay their start-up time on every restart."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyarrow", "confluent_kafka", "locust", "pyspark", "jinja2", "matplotlib")


def test_importing_the_cli_imports_no_heavy_library() -> None:
    code = (
        "import sys, txnchaos.harness.cli\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
