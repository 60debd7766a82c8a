"""`decision.calibration`: a fitted calibration file deployed as SEMIF_CALIBRATION, refused at synth when bad."""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk.assertions import Template
from cdk_support import load, problems, synth

from semif_adapter.core.calibration import parse_calibration

DOCUMENT = {"format": "semif-calibration-v1", "methods": {"pmi": {"temperature": 1.8}},
            "fitted": {"cases": 166, "note": "provenance is kept in the file, not in the environment"}}


def calibration_file(tmp_path: Path, document: object) -> str:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return str(path)


def test_the_calibration_file_reaches_the_decision_model_as_its_canonical_document(tmp_path):
    path = calibration_file(tmp_path, DOCUMENT)
    deployment = load("dev", {"decision": {"calibration": path}})
    value = deployment.settings.decision.calibration_setting()
    assert value is not None and "fitted" not in value
    assert parse_calibration(value).sha256 == parse_calibration(json.dumps(DOCUMENT)).sha256  # same parameters
    _, stack = synth("dev", tmp_path / "out", {"decision": {"calibration": path}})
    models = Template.from_stack(stack).find_resources("AWS::SageMaker::Model")
    environments = [m["Properties"]["PrimaryContainer"]["Environment"] for m in models.values()]
    assert [e.get("SEMIF_CALIBRATION") for e in environments].count(value) == 1  # the decision model only


def test_a_bad_calibration_is_refused_at_synth_naming_the_key(tmp_path):
    key = "environments.dev.decision.calibration"
    bad = calibration_file(tmp_path, {"format": "semif-calibration-v1", "methods": {"pmi": {"temperature": -1}}})
    assert "methods.pmi.temperature" in problems("dev", {"decision": {"calibration": bad}})[key]
    assert "cannot be read" in problems("dev", {"decision": {"calibration": str(tmp_path / "missing.json")}})[key]
    assert "not valid JSON" in problems("dev", {"decision": {"calibration": calibration_file(tmp_path, "{")}})[key]
    twice = {"decision": {"calibration": calibration_file(tmp_path, DOCUMENT),
                          "env": {"SEMIF_CALIBRATION": json.dumps(DOCUMENT)}}}
    assert "given twice" in problems("dev", twice)[key]
    assert "decision endpoint" in problems("dev", {"chat": {"calibration": bad}})["environments.dev.chat.calibration"]


def test_a_bad_calibration_in_the_environment_is_refused_with_the_variable_named():
    found = problems("dev", {"decision": {"env": {"SEMIF_CALIBRATION": '{"format": "semif-calibration-v1"}'}}})
    assert "methods" in found["environments.dev.decision.env.SEMIF_CALIBRATION"]
