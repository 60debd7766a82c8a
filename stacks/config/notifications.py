"""Who hears the alarms: email subscriptions of the environment's topic, and/or an existing topic."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from .strict import Strict

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")  # fullmatch: one address, no spaces or newlines
_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:(?P<region>[a-z0-9-]+):\d{12}:[A-Za-z0-9_-]{1,256}")


class Notifications(Strict):
    """Who hears the alarms: email subscriptions of the stack's topic, and/or an existing topic (your paging)."""

    emails: list[str] = Field(default_factory=list, max_length=20)
    topic_arn: str | None = None

    @field_validator("emails")
    @classmethod
    def _emails(cls, value: list[str]) -> list[str]:
        for address in value:
            if not _EMAIL.fullmatch(address):
                raise ValueError(f"{address!r} is not an email address")
        if len(set(value)) != len(value):
            raise ValueError("an address is listed twice")
        return value

    @field_validator("topic_arn")
    @classmethod
    def _topic(cls, value: str | None) -> str | None:
        if value is not None and not _TOPIC_ARN.fullmatch(value):
            raise ValueError(f"{value!r} is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)")
        return value

    @property
    def topic_region(self) -> str | None:
        match = _TOPIC_ARN.fullmatch(self.topic_arn) if self.topic_arn else None
        return match["region"] if match else None
