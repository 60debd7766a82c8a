#!/usr/bin/env python3
"""CDK app: `cdk synth -c env=dev`, `cdk deploy -c env=prod` (configuration: cdk.json; README "Deploying to AWS")."""

from __future__ import annotations

import sys

from aws_cdk import App

from stacks.cdk_app import build_app
from stacks.config.problems import ConfigError


def main() -> int:
    app = App()
    try:
        build_app(app)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
