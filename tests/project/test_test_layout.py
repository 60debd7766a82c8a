"""The test folders mirror the code: a test of `stacks/endpoints/` is under `tests/cdk/endpoints/`, of `scripts/batch/`
under `tests/tools/batch/`, so a test is found from the module it covers without a grep. And every module that
tests/conftest.py orders or marks by path exists (a moved test would silently lose its marker)."""

from __future__ import annotations

from pathlib import Path

from support.module_marks import MODULE_LISTS

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
# Each top folder of tests/ and the code it tests; its subfolders mirror that code's subfolders.
MIRRORS = {
    "adapter": "container/semif_adapter",  # the adapter as a process on real models (doors, core, engine, deploy)
    "image": "container",  # the decision image, built and run
    "cdk": "stacks",  # the CDK app
    "security": "stacks/security",  # cdk-nag, checkov and IAM rules over the synthesized templates
    "tools": "scripts",  # the `semif` tools
    "dev": "scripts/dev",  # the bootstrap, the pins, the test models
    "client": "clients/python/semif_decision_client",  # the decision client and the SDKs on it
    "bench": "bench",  # each benchmark in its quick form
    "reliability": "bench/reliability",  # the reliability probes against the adapter
    "docs": "docs",  # the docs' links and figures
    "project": ".",  # rules over the whole repository: the import graph, the wheel, the CI workflow, this file
}
NOT_TESTS = {"support", "data", "__pycache__"}  # shared helpers and labelled sets


def test_every_test_folder_mirrors_a_folder_of_the_code():
    strays = []
    for folder in sorted(p for p in TESTS.iterdir() if p.is_dir() and p.name not in NOT_TESTS):
        if folder.name not in MIRRORS:
            strays.append(f"tests/{folder.name}/ mirrors no code folder (MIRRORS names each)")
            continue
        code = REPO / MIRRORS[folder.name]
        assert code.is_dir(), f"{MIRRORS[folder.name]} is gone: tests/{folder.name}/ mirrors nothing"
        for sub in sorted({test.parent for test in folder.rglob("test_*.py")} - {folder}):  # folders of tests
            relative = sub.relative_to(folder)
            if not (code / relative).is_dir():
                strays.append(f"tests/{folder.name}/{relative}/ has no {MIRRORS[folder.name]}/{relative}/")
    assert not strays, strays


def test_every_module_the_conftest_orders_or_marks_exists():
    missing = sorted(path for paths in MODULE_LISTS for path in paths if not (TESTS / path).is_file())
    assert not missing, f"tests/conftest.py names test modules that do not exist: {missing}"
