"""Request bytes -> JSON, strictly, for every contract: a malformed body is the client's 4xx, whatever raised.

Duplicate keys, NaN/Infinity, absurd nesting, unpaired surrogates and integers too long for Python (a 100,000-digit
number raises ValueError inside the parser) are refused here, because each would otherwise reach the tokenizer as
something the caller did not mean, or fail as a 500.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import RequestError

MAX_NESTING = 64


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise RequestError("duplicate_key", f"key {key!r} appears more than once in one object", key)
        result[key] = value
    return result


def _reject_constant(name: str) -> float:
    raise RequestError("invalid_json", f"{name} is not valid JSON")


def _check_text(value: Any, path: str, depth: int = 0) -> None:
    """Unpaired surrogates cannot be encoded for the tokenizer; deep nesting is not evidence."""
    if depth > MAX_NESTING:
        raise RequestError("too_deep", f"nesting deeper than {MAX_NESTING} levels", path or None)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestError("invalid_text", "contains an unpaired UTF-16 surrogate", path or None) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, path, depth + 1)
            _check_text(item, f"{path}.{key}" if path else key, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_text(item, f"{path}[{index}]", depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise RequestError("invalid_json", "numbers must be finite", path or None)


def load_json(body: bytes) -> Any:
    """Strict JSON: raises RequestError (duplicate keys, NaN/Infinity, deep nesting, bad UTF-8 or surrogates)."""
    try:
        document = json.loads(body, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except RequestError:
        raise
    except RecursionError:
        raise RequestError("too_deep", f"nesting deeper than {MAX_NESTING} levels") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError("invalid_json", f"body is not valid UTF-8 JSON: {error}") from None
    except ValueError as error:  # e.g. an integer beyond Python's digit limit
        raise RequestError("invalid_json", f"body is not usable JSON: {error}") from None
    _check_text(document, "")
    return document
