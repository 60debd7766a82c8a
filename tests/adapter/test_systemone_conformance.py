"""The public conformance suite (`jevcompat`, pinned, from PyPI), unmodified, against the adapter started exactly as
the image starts it: once without auth and once with a key. Every MUST and SHOULD of SPEC 0.1 must pass."""

from __future__ import annotations

import pytest
from jevcompat.spec import REQUIREMENTS
from support.jevcompat_run import KEY, jevcompat

from scripts.dev.tiny_model import tiny_model
from semif_adapter.doors.api_keys import HASH_PREFIX, digest

pytestmark = pytest.mark.slow


def outcomes(report: dict) -> dict[str, str]:
    return {result["id"]: result["status"] for result in report["results"]}


def test_conformant_without_and_with_a_key_every_must_and_should(start_adapter, tmp_path):
    """On the tiny model (scripts/dev/tiny_model.py): the suite tests what the doors answer, shapes, errors, limits and
    auth, not what a model knows; the local API front runs it on the embedded model (tests/tools/local)."""
    keys = tmp_path / "keys.txt"
    keys.write_text(f"# the test's key\nconformance {HASH_PREFIX}{digest(KEY).hex()}\n")
    model = {"SM_LLAMA_CPP_MODEL": str(tiny_model())}
    # One adapter and one suite after the other: at once, two adapters' decodes (each on every core) slow each other
    # down many times over.
    open_port = start_adapter(model)
    open_port.wait_settled()
    keyed = start_adapter({**model, "SEMIF_API_KEYS_FILE": str(keys)})
    keyed.wait_settled()
    plain = jevcompat(open_port.url, tmp_path / "open.json")
    guarded = jevcompat(keyed.url, tmp_path / "keyed.json", "--key", KEY)
    for report in (plain, guarded):
        assert report["summary"]["verdict"] == "conformant", report["summary"]
        assert not report["inconclusive"] and not report["case_errors"] and report["aborted"] is None
    runs = [outcomes(plain), outcomes(guarded)]
    failed = sorted(req for run in runs for req, status in run.items() if status == "fail")
    untested = sorted(req for req in REQUIREMENTS if not any(run.get(req) == "pass" for run in runs))
    assert not failed and not untested, {"failed": failed, "untested": untested}
    assert sum(r.level == "MUST" for r in REQUIREMENTS.values()) == 33
    assert sum(r.level == "SHOULD" for r in REQUIREMENTS.values()) == 15
    assert KEY not in keyed.logs()  # keys are never logged; the caller's key id is
    assert '"key_id": "conformance"' in keyed.logs()
