"""The standalone decision client's few copies of the adapter's schema agree with the adapter, and its request
refusals read as the endpoint's (the client needs boto3 alone, so it cannot import semif_adapter)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from semif_adapter.core.calibration import SCORING_METHODS
from semif_adapter.doors import request_schema
from semif_adapter.doors.request_schema import RequestError, validate_many, validate_request
from semif_decision_client import client

OPTIONS = [{"id": "a", "description": "A"}, {"id": "b", "description": "B"}]


def test_the_clients_field_lists_are_the_adapters() -> None:
    assert set(request_schema.DecisionRequest.model_fields) == client.REQUEST_FIELDS
    assert set(request_schema.Decision.model_fields) == client.DECISION_FIELDS
    assert set(request_schema.Option.model_fields) == client.OPTION_FIELDS
    assert client.SCORING_METHODS == SCORING_METHODS
    assert tuple(mode.value for mode in request_schema.Debias) == client.DEBIAS_MODES


@pytest.mark.parametrize("state", [42, 4.5, True])
def test_a_state_of_the_wrong_type_names_every_accepted_form_without_pydantics_prefix(state: object) -> None:
    for call, field in ((lambda: validate_request({"decision": {"id": "x", "state": state, "question": "q",
                                                                 "options": OPTIONS}}), "decision.state"),
                        (lambda: validate_many({"state": state, "decisions": [{"id": "x", "question": "q",
                                                                               "options": OPTIONS}]}), "state")):
        with pytest.raises(RequestError) as caught:
            call()
        assert caught.value.field == field
        assert caught.value.message == f"{field}: must be a non-empty string, or a non-empty JSON object or array"


def test_no_refusal_carries_pydantics_value_error_prefix() -> None:
    duplicate = [{"id": "a", "description": "A"}, {"id": "a", "description": "B"}]
    with pytest.raises(RequestError) as caught:
        validate_request({"decision": {"id": "x", "state": "s", "question": "q", "options": duplicate}})
    assert "Value error" not in caught.value.message and "appears more than once" in caught.value.message
    with pytest.raises(ValidationError, match="Value error"):  # pydantic itself does add it: the check bites
        request_schema.Decision.model_validate({"id": "x", "state": "s", "question": "q", "options": duplicate})
