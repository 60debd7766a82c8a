"""What every settings model of the configuration shares: unknown keys refused, values frozen, bounds in order."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

EnvMap = dict[str, str]  # a container environment map (variable name -> value)
MAX_INSTANCES = 100  # the same cap as instance_count
MAX_COPIES = 100  # inference component copies: the same bound, far above what one model needs


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def ordered(model: BaseModel, low: str, high: str) -> None:
    """Refuse a lower bound above its upper bound, naming both keys."""
    if getattr(model, low) > getattr(model, high):
        raise ValueError(f"{low} ({getattr(model, low)}) is greater than {high} ({getattr(model, high)})")


def within(model: BaseModel, count_key: str, bounds_key: str, low: str, high: str) -> None:
    """Refuse a starting count outside the bounds that its scaling block keeps it in."""
    count, bounds = getattr(model, count_key), getattr(model, bounds_key)
    if bounds is not None and not getattr(bounds, low) <= count <= getattr(bounds, high):
        raise ValueError(f"{count_key} {count} is outside {bounds_key} bounds "
                         f"{getattr(bounds, low)}..{getattr(bounds, high)}")


def resource_ids(value: list[str], prefix: str, noun: str) -> list[str]:
    """Refuse the first item that is not an EC2 resource id `prefix-` + 8 to 17 hex digits (one check, three lists)."""
    for item in value:
        if not re.fullmatch(rf"{prefix}-[0-9a-f]{{8,17}}", item):
            raise ValueError(f"{item!r} is not a {noun} id ({prefix}-...)")
    return value
