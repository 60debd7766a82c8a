"""SemIf decision adapter for SageMaker, and the model/flag rules the whole project shares.

The HTTP server scores a fixed option set with a llama.cpp model and returns probabilities. The runtime modules
sit here; the deploy-time tools (packaging, conversion, flag checks, the configuration reference) in `deploy`,
which the CDK app and the scripts import, so each rule exists once and dependencies point one way.
"""

__version__ = "0.1.0"
