"""The settings of the System One API in front of the decision endpoint (the constructs: stacks/https_api/; the
rules across keys: https_api_rules.py)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .endpoint import AlarmWindow
from .strict import Strict

# API Gateway's default account-level throttle in a region (10,000 requests per second, bursts of 5,000): a key's
# own limits above these could never be reached.
ACCOUNT_RATE_PER_S = 10_000
ACCOUNT_BURST = 5_000


class ApiThrottle(Strict):
    """Per key (the usage plan): steady requests per second and the burst allowed above them (a token bucket)."""

    rate_per_s: float = Field(gt=0, le=ACCOUNT_RATE_PER_S, allow_inf_nan=False)
    burst: int = Field(ge=1, le=ACCOUNT_BURST)

    @model_validator(mode="after")
    def _bucket(self) -> ApiThrottle:
        if self.burst < self.rate_per_s:
            raise ValueError(f"burst ({self.burst}) is below rate_per_s ({self.rate_per_s:g}): the bucket could "
                             "never hold one second's requests at that rate")
        return self


class ApiQuota(Strict):
    """Per key (the usage plan): at most `requests` per `period`, counted from the period's start (UTC)."""

    requests: int = Field(ge=1, le=2_147_483_647)
    period: Literal["DAY", "WEEK", "MONTH"]


class ApiAlarms(AlarmWindow):
    """The API's alarms (API Gateway's own metrics for the stage), notifying the environment's topic."""

    client_error_rate: float = Field(0.25, gt=0, le=1, allow_inf_nan=False,
                                     description="share of requests answered 4xx (refused keys, throttling, "
                                                 "bad requests) above this")
    server_error_rate: float = Field(0.01, gt=0, le=1, allow_inf_nan=False,
                                     description="share of requests answered 5xx above this")
    latency_p90_ms: float | None = Field(None, gt=0, allow_inf_nan=False,
                                         description="Latency p90 above this; default 80% of the integration "
                                                     "timeout")
    min_requests: int = Field(10, ge=1, le=1_000_000,
                              description="the error rates count only in periods with at least this many requests "
                                          "(one refused key at night is not an incident)")


class ApiWaf(Strict):
    """An AWS WAF web ACL on the stage: AWS's IP reputation list and known-bad-inputs rules, and a rate limit per
    client IP. Off unless `enabled`."""

    enabled: bool = False
    rate_limit_per_5min: int | None = Field(None, ge=10, le=2_000_000_000,
                                            description="requests per client IP per 5 minutes, then blocked")
    managed_rules: bool | None = Field(None, description="AWS's IP reputation and known-bad-inputs rule groups "
                                                         "(default on)")

    @model_validator(mode="after")
    def _enabled(self) -> ApiWaf:
        given = sorted(self.model_fields_set - {"enabled"})
        if not self.enabled and given:
            raise ValueError(f"WAF settings without enabling it ({', '.join(given)}): set enabled: true, or remove "
                             "them")
        return self


_HOSTNAME = re.compile(r"(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
_CERTIFICATE_ARN = re.compile(r"arn:aws[a-z-]*:acm:(?P<region>[a-z0-9-]+):\d{12}:certificate/[0-9a-f-]{36}")


class ApiDomain(Strict):
    """A custom domain for the API (regional: its certificate is an ACM certificate of the stack's region), and
    optionally its alias record in a Route 53 hosted zone (by id and name: synth looks nothing up)."""

    name: str
    certificate_arn: str | None = None
    hosted_zone_id: str | None = Field(None, pattern=r"^Z[A-Z0-9]{1,31}$")
    hosted_zone_name: str | None = None

    @field_validator("name", "hosted_zone_name")
    @classmethod
    def _hostname(cls, value: str | None) -> str | None:
        if value is not None and not _HOSTNAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a lower-case DNS name (e.g. decisions.example.com)")
        return value

    @field_validator("certificate_arn")
    @classmethod
    def _certificate(cls, value: str | None) -> str | None:
        if value is not None and not _CERTIFICATE_ARN.fullmatch(value):
            raise ValueError(f"{value!r} is not an ACM certificate ARN (arn:aws:acm:REGION:ACCOUNT:certificate/ID)")
        return value

    @model_validator(mode="after")
    def _complete(self) -> ApiDomain:
        if self.certificate_arn is None:
            raise ValueError(f"a custom domain needs certificate_arn: an ACM certificate for {self.name} in the "
                             "stack's region (API Gateway serves the domain with it)")
        if (self.hosted_zone_id is None) != (self.hosted_zone_name is None):
            raise ValueError("hosted_zone_id and hosted_zone_name go together (the alias record needs both; synth "
                             "looks nothing up), or neither (you point your DNS at the domain yourself)")
        zone = self.hosted_zone_name
        if zone is not None and not (self.name == zone or self.name.endswith(f".{zone}")):
            raise ValueError(f"{self.name} is not in the hosted zone {zone}")
        return self

    @property
    def certificate_region(self) -> str:
        return _CERTIFICATE_ARN.fullmatch(self.certificate_arn or "")["region"]  # type: ignore[index]


class HttpsApi(Strict):
    """An HTTPS System One API (`POST /v1/systemone`, `GET /v1/models`) with Bearer keys in front of the decision
    endpoint: API Gateway, a Lambda authorizer and a forwarding Lambda (README: Your own System One API on AWS)."""

    throttle: ApiThrottle = ApiThrottle(rate_per_s=10, burst=20)
    quota: ApiQuota | None = None
    integration_timeout_s: int = Field(29, ge=1, description="how long a call may take; above 29 needs API "
                                                             "Gateway's integration-timeout quota raised")
    max_body_bytes: int | None = Field(None, ge=1024, description="decoded request bodies; default: the decision "
                                                                  "container's SEMIF_MAX_BODY_BYTES")
    authorizer_cache_s: int = Field(60, ge=0, le=3600, description="API Gateway keeps a key's verdict this long")
    account_logging_role: bool = Field(True, description="set the region's API Gateway CloudWatch Logs role "
                                                         "(false: the account already has one)")
    alarms: ApiAlarms = ApiAlarms()
    waf: ApiWaf | None = None
    domain: ApiDomain | None = None
