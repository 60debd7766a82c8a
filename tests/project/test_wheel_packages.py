"""Every package of the checkout that the toolkit's wheel installs is listed in pyproject.toml (setuptools is given
the list, so a new subpackage left out of it would be missing from an installed toolkit: `cdk synth` from the wheel
would fail at its first import). The slow wheel test (tests/project/test_installed_wheels.py) installs it for real."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKOUT_ONLY = {"semif_sagemaker.tools.dev"}  # scripts/dev/: bootstrap, locks, test models (docs/architecture.md)
HARNESS = REPO / "bench"  # the measuring harness: beside the product, never in the wheel


def test_every_package_directory_is_in_the_wheels_package_list() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    roots = {name: REPO / directory for name, directory in setuptools["package-dir"].items()
             if name in ("semif_sagemaker.cdk", "semif_sagemaker.tools", "semif_adapter")}
    missing = []
    for name, root in roots.items():
        for init in root.rglob("__init__.py"):
            package = ".".join([name, *init.parent.relative_to(root).parts])
            if package not in listed | CHECKOUT_ONLY:
                missing.append(package)
    assert missing == [], missing


def test_the_measuring_harness_is_not_in_the_wheel() -> None:
    """bench/ runs from a checkout only (`python -m bench.<subject>`): no package or package directory points into it,
    and the tools that are installed do not import it."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert not [name for name in setuptools["packages"] if name.split(".")[0] == "bench"]
    roots = [(REPO / directory).resolve() for directory in setuptools["package-dir"].values()]
    assert not [root for root in roots if root.is_relative_to(HARNESS) or HARNESS.is_relative_to(root)]
    shipped = [REPO / "scripts", REPO / "stacks", REPO / "container" / "semif_adapter", REPO / "semif_sagemaker"]
    importing = [path.relative_to(REPO).as_posix() for root in shipped for path in root.rglob("*.py")
                 if any(line.startswith(("from bench", "import bench")) for line in path.read_text().splitlines())]
    assert importing == [], importing
