"""The System One API's rules across keys: what its settings must agree with (the decision endpoint, the region,
SageMaker's limits), so that an API that could not work fails `cdk synth` naming the key. Called by rules.py.
"""

from __future__ import annotations

from .container_env import container_body_limit
from .container_keys import MAX_BODY_KEY
from .environment import EnvironmentSettings
from .https_api import HttpsApi
from .problems import Problems

KEY = "https_api"
SAGEMAKER_INVOCATION_S = 60  # SageMaker ends a real-time (and a serverless) invocation after 60 s
DEFAULT_TIMEOUT_S = 29  # API Gateway's integration timeout without a quota increase
LATENCY_SHARE = 0.8  # the latency alarm's default: 80% of the integration timeout


def body_limit(settings: EnvironmentSettings, api: HttpsApi) -> int:
    """What the front accepts once decoded: the configured value, else exactly what the container accepts."""
    return api.max_body_bytes or container_body_limit(settings)


def latency_threshold_ms(api: HttpsApi) -> float:
    return api.alarms.latency_p90_ms or api.integration_timeout_s * 1000 * LATENCY_SHARE


def check_https_api(settings: EnvironmentSettings) -> Problems:
    api = settings.https_api
    if api is None:
        return []
    problems: Problems = []
    if api.integration_timeout_s > SAGEMAKER_INVOCATION_S:
        problems.append((f"{KEY}.integration_timeout_s",
                         f"{api.integration_timeout_s} s is more than the {SAGEMAKER_INVOCATION_S} s SageMaker gives "
                         "an invocation: the endpoint stops answering first; at most 60"))
    container = container_body_limit(settings)
    if api.max_body_bytes is not None and api.max_body_bytes > container:
        mode = settings.mode_of("decision")
        why = (f"the {mode.name} decision endpoint's payload limit ({(mode.body_limit or 0) // 2**20} MB, which the "
               "stack sets)" if mode.body_limit and MAX_BODY_KEY not in settings.decision.adapter_env
               else "the decision container's SEMIF_MAX_BODY_BYTES")
        problems.append((f"{KEY}.max_body_bytes",
                         f"{api.max_body_bytes} bytes is more than {why}, {container}: a larger body would only be "
                         "refused there; leave it unset (the front then accepts exactly what the container does)"))
    latency = api.alarms.latency_p90_ms
    if latency is not None and latency >= api.integration_timeout_s * 1000:
        problems.append((f"{KEY}.alarms.latency_p90_ms",
                         f"{latency:g} ms can never be reached: API Gateway ends every call at the integration "
                         f"timeout ({api.integration_timeout_s} s); set it below that"))
    domain = api.domain
    if domain is not None and domain.certificate_region != settings.region:
        problems.append((f"{KEY}.domain.certificate_arn",
                         f"the certificate is in {domain.certificate_region}, the API in {settings.region}: a "
                         "regional API serves its custom domain with a certificate of its own region"))
    if api.waf is not None and api.waf.enabled and api.waf.managed_rules is False and api.waf.rate_limit_per_5min \
            is None:
        problems.append((f"{KEY}.waf", "enabled with no rule (managed_rules false, no rate_limit_per_5min): the web "
                                       "ACL would allow everything; add a rule or disable it"))
    return problems
