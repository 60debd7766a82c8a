"""Create, list and revoke the keys of an environment's System One API on AWS (a key is shown once, its hash kept).

    semif keys create api ops-laptop     # prints the new key once (stdout): export TYPESAFE_API_KEY=...
    semif keys list api
    semif keys revoke api ops-laptop

Each key is one SecureString parameter under the stack's `SystemOneApiKeysPath` (encrypted with the stack's data key,
`SystemOneApiKeysKeyArn`): its sha256, the API Gateway key that counts its requests in the usage plan
(`SystemOneApiUsagePlanId`: per-key throttling and quota) and when it was made; the key itself is stored nowhere. The
authorizer reads new keys within seconds and stops accepting a revoked one within about half a minute plus the API's
authorizer cache (`https_api.authorizer_cache_s`): no deployment either way. Needs credentials allowed to write
SSM parameters under that path, use the data key, and manage API Gateway keys.
"""

from __future__ import annotations

import argparse
import sys

from botocore.exceptions import BotoCoreError, ClientError

from ..common.command import Subparsers, UsageError, add_command
from ..common.discovery import DiscoveryError
from ..common.polling import StillWaiting


def add_parser(subparsers: Subparsers) -> None:
    parser = add_command(subparsers, "keys", __doc__,
                         summary="create, list or revoke the keys of an environment's System One API (AWS)")
    parser.add_argument("action", choices=("create", "list", "revoke"))
    parser.add_argument("env", help="the environment (cdk.json) whose API's keys these are")
    parser.add_argument("key_id", nargs="?", metavar="KEY_ID", help="create/revoke: the key's id, e.g. ops-laptop")
    parser.add_argument("--stack", help="CloudFormation stack (default: APP-ENV)")
    parser.add_argument("--app", help="application name of the stack (default: cdk.json's app_name)")
    parser.add_argument("--region", help="AWS region (default: the environment's region in cdk.json)")


def validate(args: argparse.Namespace) -> None:
    if args.action in ("create", "revoke") and not args.key_id:
        raise UsageError(f"{args.action} needs KEY_ID")
    if args.action == "list" and args.key_id:
        raise UsageError("list takes no KEY_ID")


def run(args: argparse.Namespace) -> int:
    from .store import KeysError, manage

    try:
        print(manage(args))
    except (KeysError, DiscoveryError, StillWaiting, ClientError, BotoCoreError) as error:
        print(f"keys {args.action}: FAILED: {error}", file=sys.stderr)
        return 1
    return 0
