"""A half-configured HTTPS API fails `cdk synth` with the key named and the reason (issue 29)."""

from __future__ import annotations

from typing import Any

import pytest
from cdk_support import CERTIFICATE_ARN, load, problems

from stacks.config.https_api_rules import body_limit, latency_threshold_ms

ELSEWHERE = CERTIFICATE_ARN.replace("us-east-1", "eu-west-1")
SERVERLESS_DECISION = {"hosting": "serverless", "serverless": {"memory_mb": 2048, "max_concurrency": 2},
                       "network_isolation": False, "instance_type": None, "instance_count": None}


def refused(env_name: str, api: dict[str, Any], key: str, **changes: Any) -> str:
    found = problems(env_name, {"https_api": api, **changes})
    full = f"environments.{env_name}.https_api.{key}"
    assert full in found, f"expected a problem at {key}, got {found}"
    return found[full]


@pytest.mark.parametrize(("api", "key", "fragment"), [
    ({"domain": {"name": "decisions.example.com"}}, "domain",
     "a custom domain needs certificate_arn: an ACM certificate for decisions.example.com"),
    ({"domain": {"name": "decisions.example.com", "certificate_arn": ELSEWHERE}}, "domain.certificate_arn",
     "the certificate is in eu-west-1, the API in us-east-1"),
    ({"domain": {"name": "decisions.example.com", "certificate_arn": CERTIFICATE_ARN,
                 "hosted_zone_id": "Z0123456789ABCDEFGHIJ"}}, "domain", "hosted_zone_id and hosted_zone_name go "
                                                                         "together"),
    ({"domain": {"name": "decisions.example.com", "certificate_arn": CERTIFICATE_ARN,
                 "hosted_zone_id": "Z0123456789ABCDEFGHIJ", "hosted_zone_name": "example.org"}}, "domain",
     "decisions.example.com is not in the hosted zone example.org"),
    ({"domain": {"name": "Decisions.Example.com", "certificate_arn": CERTIFICATE_ARN}}, "domain.name",
     "is not a lower-case DNS name"),
    ({"domain": {"name": "decisions.example.com", "certificate_arn": "arn:aws:iam::123456789012:cert/x"}},
     "domain.certificate_arn", "is not an ACM certificate ARN"),
    ({"waf": {"rate_limit_per_5min": 1000}}, "waf", "WAF settings without enabling it (rate_limit_per_5min)"),
    ({"waf": {"enabled": False, "managed_rules": True}}, "waf", "WAF settings without enabling it (managed_rules)"),
    ({"waf": {"enabled": True, "managed_rules": False}}, "waf", "the web ACL would allow everything"),
    ({"throttle": {"rate_per_s": 50, "burst": 10}}, "throttle", "burst (10) is below rate_per_s (50)"),
    ({"throttle": {"rate_per_s": 20_000, "burst": 5000}}, "throttle.rate_per_s", "less than or equal to 10000"),
    ({"quota": {"requests": 0, "period": "MONTH"}}, "quota.requests", "greater than or equal to 1"),
    ({"quota": {"requests": 100, "period": "YEAR"}}, "quota.period", "'DAY', 'WEEK' or 'MONTH'"),
    ({"integration_timeout_s": 90}, "integration_timeout_s", "more than the 60 s SageMaker gives an invocation"),
    ({"max_body_bytes": 8 * 2**20}, "max_body_bytes",
     "8388608 bytes is more than the decision container's SEMIF_MAX_BODY_BYTES, 6291456"),
    ({"alarms": {"latency_p90_ms": 29_000}}, "alarms.latency_p90_ms", "29000 ms can never be reached: API Gateway "
                                                                      "ends every call at the integration timeout"),
    ({"alarms": {"client_error_rate": 1.5}}, "alarms.client_error_rate", "less than or equal to 1"),
    ({"authorizer_cache_s": 7200}, "authorizer_cache_s", "less than or equal to 3600"),
    ({"keys": "ssm"}, "keys", "Extra inputs are not permitted"),
], ids=["domain-without-certificate", "certificate-elsewhere", "half-a-zone", "name-outside-zone", "name-case",
        "not-a-certificate", "waf-settings-without-enabling", "waf-off-with-rules", "waf-without-rules",
        "burst-below-rate", "rate-above-account", "quota-zero", "quota-period", "timeout-beyond-sagemaker",
        "body-beyond-container", "latency-beyond-timeout", "rate-above-one", "cache-too-long", "unknown-key"])
def test_a_half_configured_api_is_refused_naming_the_key(api: dict[str, Any], key: str, fragment: str) -> None:
    assert fragment in refused("dev", api, key)


def test_a_body_limit_above_what_a_serverless_endpoint_takes_names_its_payload_limit() -> None:
    message = refused("dev", {"max_body_bytes": 5 * 2**20}, "max_body_bytes", decision=SERVERLESS_DECISION)
    assert "the serverless decision endpoint's payload limit (4 MB, which the stack sets), 4194304" in message


def test_the_defaults_follow_the_container_and_the_timeout() -> None:
    dedicated = load("dev", {"https_api": {}}).settings
    serverless = load("dev", {"https_api": {"integration_timeout_s": 60},
                              "decision": SERVERLESS_DECISION}).settings
    tuned = load("dev", {"https_api": {}, "decision": {"env": {"SEMIF_MAX_BODY_BYTES": "2097152"}}}).settings
    assert [body_limit(settings, settings.https_api) for settings in (dedicated, serverless, tuned)] == [
        6 * 2**20, 4 * 2**20, 2 * 2**20]
    assert latency_threshold_ms(dedicated.https_api) == 23_200  # 80% of the default 29 s
    assert latency_threshold_ms(serverless.https_api) == 48_000
    assert dedicated.https_api.throttle.rate_per_s == 10 and dedicated.https_api.quota is None


def test_the_keys_former_name_is_refused_naming_its_new_one() -> None:
    found = problems("dev", {"systemone_api": {}})
    assert any("systemone_api is now https_api" in message for message in found.values()), found
