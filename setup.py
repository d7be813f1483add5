"""Maps the three top-level layers onto the ``txnchaos`` import package.

The repository keeps ``cluster/``, ``harness/`` and ``analysis/`` at the top level
(the layout shows the architecture); installed, they are ``txnchaos.cluster``,
``txnchaos.harness`` and ``txnchaos.analysis``. Metadata lives in pyproject.toml.
"""

from setuptools import find_packages, setup

LAYERS = ("cluster", "harness", "analysis")

packages: list[str] = []
package_dir: dict[str, str] = {}
for layer in LAYERS:
    package_dir[f"txnchaos.{layer}"] = layer
    packages.append(f"txnchaos.{layer}")
    packages += [f"txnchaos.{layer}.{sub}" for sub in find_packages(layer)]

setup(packages=packages, package_dir=package_dir)
