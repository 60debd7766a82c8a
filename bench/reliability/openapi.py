"""An OpenAPI 3.1 description of the decision adapter, generated from its own pydantic models.

The request schema is `DecisionRequest.model_json_schema()`, not a second copy
that could drift. Responses are described here (the adapter renders them
without a model): the decision document and the JSON error envelope, with the
statuses the adapter documents for each route.
"""

from __future__ import annotations

from typing import Any

from semif_adapter.doors.request_schema import DecisionRequest

REF = "#/components/schemas/{model}"
NUMBER_LIST = {"type": "array", "items": {"type": "number"}}
ERROR = {
    "type": "object", "required": ["error"], "additionalProperties": False,
    "properties": {"error": {
        "type": "object", "required": ["code", "message"], "additionalProperties": False,
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string"}}}},
}
DECIDED = {
    "type": "object",
    "required": ["decision_id", "option_ids", "probabilities", "option_logits", "scoring", "warnings", "calibration",
                 "allowed_token_mass", "temperature", "debias", "timing", "model", "prompt"],
    "properties": {
        "decision_id": {"type": "string"}, "option_ids": {"type": "array", "items": {"type": "string"}},
        "probabilities": NUMBER_LIST, "option_logits": NUMBER_LIST,
        "scoring": {"enum": ["letters", "likelihood", "pmi"]},
        "warnings": {"type": "array", "items": {"enum": ["low_option_mass", "near_tie"]}},
        "calibration": {"type": ["object", "null"]},
        "allowed_token_mass": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "temperature": {"type": "number", "exclusiveMinimum": 0}, "debias": {"enum": ["none", "permute"]},
        "timing": {"type": "object", "required": ["prompt_tokens", "cached_tokens", "total_ms"]},
        "model": {"type": "object"}, "prompt": {"type": "object", "required": ["version", "sha256"]},
    },
}


def _json(description: str, schema: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": REF.format(model=schema)}}}}


def decision_openapi() -> dict[str, Any]:
    """The adapter's two routes; the request body's schema comes from the adapter's own model."""
    request = DecisionRequest.model_json_schema(ref_template=REF)
    schemas: dict[str, Any] = {**request.pop("$defs", {}), "DecisionRequest": request, "Error": ERROR,
                               "Decided": DECIDED}
    refused = {str(status): _json(reason, "Error") for status, reason in (
        (400, "invalid JSON or a schema violation"), (408, "body not received in time"),
        (413, "body or prompt too large"), (415, "not application/json"),
        (503, "not ready, queue full or shutting down (Retry-After)"))}
    return {
        "openapi": "3.1.0",
        "info": {"title": "SemIf decision adapter", "version": "1"},
        "paths": {
            "/ping": {"get": {"responses": {"200": {"description": "ready"},
                                            "503": _json("loading or warming up", "Error")}}},
            "/invocations": {"post": {
                "requestBody": {"required": True, "content": {
                    "application/json": {"schema": {"$ref": REF.format(model="DecisionRequest")}}}},
                "responses": {"200": _json("one probability per option", "Decided"), **refused}}},
        },
        "components": {"schemas": schemas},
    }
