"""Schemathesis over HTTP: generated requests from the adapter's OpenAPI description, checked by its checks.

Positive cases follow the schema, negative ones break it on purpose. Each
answer must not be a server error, must use a documented status and content
type and match the documented response schema; a request that breaks the
schema must be refused (4xx). The run is derandomized and bounded per
operation and mode, and it stops at the first failure of each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from .bodies import REQUEST_TIMEOUT_S
from .openapi import decision_openapi

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def _fuzzer(operation: Any, mode: GenerationMode, url: str, statuses: Counter[str],
            max_examples: int) -> Callable[[], None]:
    """One bounded, derandomized hypothesis run over one operation in one mode."""
    checks = [*CHECKS, negative_data_rejection] if mode is GenerationMode.NEGATIVE else CHECKS
    label = f"{operation.label} {mode.value}"

    @settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
              phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def fuzz(case: schemathesis.Case) -> None:
        response = case.call(base_url=url, timeout=REQUEST_TIMEOUT_S)
        statuses[f"{label} -> {response.status_code}"] += 1
        case.validate_response(response, checks=checks)

    return fuzz


def run_openapi_fuzz(url: str, max_examples: int) -> dict[str, Any]:
    """Every operation in both modes, `max_examples` each; statuses counted, first failure of each kept."""
    schema = schemathesis.openapi.from_dict(decision_openapi())
    statuses: Counter[str] = Counter()
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and not len(operation.body):
                continue  # GET /ping takes nothing that could be wrong
            try:
                _fuzzer(operation, mode, url, statuses, max_examples)()
            except Exception as error:  # every failure is reported, whatever its kind
                failures.append(f"{operation.label} {mode.value}: {type(error).__name__}: {str(error)[:1500]}")
    return {"requests": sum(statuses.values()), "by_operation_and_status": dict(sorted(statuses.items())),
            "max_examples_per_operation_and_mode": max_examples, "problems": failures}
