"""The decision client, under the name scripts/ and its users have always imported.

It lives once, in clients/python/semif_decision_client (installable alone: boto3 only); this is a re-export.
"""

from semif_decision_client import *  # noqa: F403
from semif_decision_client import __all__  # noqa: F401
