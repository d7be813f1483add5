"""Maps the top-level layers onto the ``txnchaos`` import package.

The repository keeps each layer at the top level (the layout shows the architecture);
installed, ``cluster/`` is ``txnchaos.cluster`` and so on. :data:`LAYERS` lists them from the
bottom up, each with the layers below it that it may import (``harness`` and ``analysis`` are
peers: neither imports the other); tests/test_layers.py fails on any other import. Metadata
lives in pyproject.toml.
"""

from setuptools import find_packages, setup

#: bottom up, each layer with the layers it may import
LAYERS: dict[str, tuple[str, ...]] = {
    "cluster": (),  # our Kafka-protocol nodes
    "rundir": ("cluster",),  # the run directory's format: written by the harness, read by all
    "harness": ("cluster", "rundir"),  # runs a scenario into a run directory
    "analysis": ("cluster", "rundir"),  # judges a run directory
    "jobs": ("cluster", "rundir", "harness", "analysis"),  # runs, then judges: the CLI
}

packages: list[str] = []
package_dir: dict[str, str] = {}
for layer in LAYERS:
    package_dir[f"txnchaos.{layer}"] = layer
    packages.append(f"txnchaos.{layer}")
    packages += [f"txnchaos.{layer}.{sub}" for sub in find_packages(layer)]

setup(packages=packages, package_dir=package_dir)
