"""The configuration's one secret detector, for every value that ends up readable in plain text.

Container environment variables are returned by DescribeModel to anyone allowed to call it, and build args are a
plain-text variable of the CodeBuild project (and stay in the image history): never a secret in either. The same
two patterns check `llama_env`, `decision.env` and `image_build.build_args`.
"""

from __future__ import annotations

import re

from semif_adapter.deploy.llama_flags import CONTROL_CHARACTER

SECRET_WORDS = re.compile(r"(^|_)(API_?KEY|TOKEN|SECRET|SECRET_KEY|ACCESS_KEY|PASSWORD|PASSWD|PRIVATE_KEY)(_|$)")
# Values that are credentials whatever their key.
SECRET_VALUES = re.compile(
    r"\b(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"  # AWS access key id
    r"|(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[0-9])"
    r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"  # AWS secret access key: 40 base64 characters, mixed case and digits
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\b(gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,}|hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,})\b"
    r"|\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@"  # a password in a URL: scheme://user:password@host
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # a JSON Web Token (header.payload.signature)
)
CONTAINER_SECRET = ("looks like a secret; container environment variables are shown by DescribeModel to anyone "
                    "allowed to call it, and SageMaker already authenticates every invocation with IAM")
BUILD_ARG_SECRET = ("looks like a secret; build args are a plain-text environment variable of the CodeBuild "
                    "project (readable in the template and with codebuild:BatchGetProjects) and end up in the image "
                    "history")


def looks_like_secret(name: str, value: str) -> bool:
    """A secret-looking variable name or a credential-looking value (the configuration's one detector)."""
    return bool(SECRET_WORDS.search(name.upper()) or SECRET_VALUES.search(value))


def control_characters(text: str) -> list[str]:
    """The control characters in `text` as U+XXXX, each once (a newline in a build arg becomes a new argument)."""
    return sorted({f"U+{ord(char):04X}" for char in CONTROL_CHARACTER.findall(text)})
