"""One environment's System One API keys: SecureString records (a key's sha256, never the key) under the stack's
`SystemOneApiKeysPath`, and the API Gateway keys that count each key's requests in the stack's usage plan."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from semif_adapter.doors.api_keys import HASH_PREFIX, KEY_BYTES, digest
from semif_decision_client.api_front import KEY_ID, KeyRecord

from ..common.discovery import aws_session, stack_name, stack_outputs
from ..common.polling import Poller

KEY_PREFIX = "sk-semif-"  # as the container's `semif_adapter.doors.api_keys create` makes them
USAGE_KEY_BYTES = 24  # the API Gateway key's value: an id the authorizer names (API Gateway wants 20+ characters)
OUTPUTS = ("SystemOneApiKeysPath", "SystemOneApiUsagePlanId", "SystemOneApiKeysKeyArn")
# the authorizer's re-read of the keys (stacks/https_api/handlers/key_authorizer.py REFRESH_S)
REVOCATION_DELAY_S = 30


class KeysError(Exception):
    """What the operator is told, in one line."""


@dataclass(frozen=True)
class ApiKeyStore:
    """One environment's keys: where they live (from the stack's outputs) and the clients that manage them."""

    stack: str
    path: str
    usage_plan_id: str
    kms_key_arn: str
    ssm: Any
    apigateway: Any

    @classmethod
    def from_outputs(cls, stack: str, outputs: dict[str, str], session: Any) -> ApiKeyStore:
        missing = [key for key in OUTPUTS if key not in outputs]
        if missing:
            raise KeysError(f"stack {stack} has no System One API (no output {', '.join(missing)}): set "
                            "https_api for its environment in cdk.json and deploy it")
        path, plan, kms_key = (outputs[key] for key in OUTPUTS)
        return cls(stack, path, plan, kms_key, session.client("ssm"), session.client("apigateway"))

    def parameter(self, key_id: str) -> str:
        if not KEY_ID.fullmatch(key_id):
            raise KeysError(f"key id {key_id!r}: lower-case letters, digits, '.', '_' and '-', at most 63, starting "
                            "with a letter or digit")
        return f"{self.path}/{key_id}"

    def create(self, key_id: str, *, now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
               new_secret: Callable[[int], str] = secrets.token_urlsafe) -> str:
        """Make a key: its usage-plan key, then its record (the hash); returns the key, which is kept nowhere."""
        name = self.parameter(key_id)
        try:
            self.ssm.get_parameter(Name=name)
            raise KeysError(f"key {key_id} exists in {self.stack}: revoke it first, or choose another id")
        except self.ssm.exceptions.ParameterNotFound:
            pass
        key = KEY_PREFIX + new_secret(KEY_BYTES)
        usage_key = new_secret(USAGE_KEY_BYTES)
        made = self.apigateway.create_api_key(
            name=f"{self.stack}-{key_id}", description=f"usage-plan key of System One API key {key_id}",
            enabled=True, value=usage_key, tags={"semif:key-id": key_id})
        try:
            self.apigateway.create_usage_plan_key(usagePlanId=self.usage_plan_id, keyId=made["id"], keyType="API_KEY")
            record = KeyRecord(key_id=key_id, hash=f"{HASH_PREFIX}{digest(key).hex()}", usage_key=usage_key,
                               api_key_id=made["id"], created=now().isoformat(timespec="seconds"))
            self.ssm.put_parameter(Name=name, Value=record.to_json(), Type="SecureString", KeyId=self.kms_key_arn,
                                   Overwrite=False, Description=f"System One API key {key_id} of {self.stack} (its "
                                                                "sha256 only)")
        except (ClientError, BotoCoreError):
            self.apigateway.delete_api_key(apiKey=made["id"])  # no half-made key: the usage-plan key goes too
            raise
        return key

    def list(self) -> list[tuple[str, datetime.datetime]]:
        """Every key's id and when its record was written (no decryption needed)."""
        found = []
        for page in self.ssm.get_paginator("describe_parameters").paginate(
                ParameterFilters=[{"Key": "Path", "Option": "OneLevel", "Values": [self.path]}]):
            found += [(item["Name"].rsplit("/", 1)[-1], item["LastModifiedDate"]) for item in page["Parameters"]]
        return sorted(found)

    def revoke(self, key_id: str) -> None:
        """Delete the key's record (the authorizer then refuses it) and its usage-plan key."""
        name = self.parameter(key_id)
        try:
            record = KeyRecord.from_json(key_id, self.ssm.get_parameter(Name=name, WithDecryption=True)
                                         ["Parameter"]["Value"])
        except self.ssm.exceptions.ParameterNotFound:
            raise KeysError(f"no key {key_id} in {self.stack} (`keys list` shows them)") from None
        self.ssm.delete_parameter(Name=name)
        with contextlib.suppress(self.apigateway.exceptions.NotFoundException):  # gone: the record was the last trace
            self.apigateway.delete_api_key(apiKey=record.api_key_id)


def manage(args: argparse.Namespace, session: Any | None = None, poller: Poller | None = None) -> str:
    """The action's outcome: the new key for `create` (alone, for `$(...)`), else a report."""
    stack = stack_name(args.env, stack=args.stack, app=args.app)
    session = session or aws_session(args.region, args.env)
    outputs = stack_outputs(session.client("cloudformation"), stack, poller or Poller(progress=_say))
    store = ApiKeyStore.from_outputs(stack, outputs, session)
    if args.action == "create":
        key = store.create(args.key_id)
        _say(f"key {args.key_id} of {stack}, shown once (only its hash is stored): use it as the SDK's api_key "
             "(TYPESAFE_API_KEY)")
        return key
    if args.action == "revoke":
        store.revoke(args.key_id)
        return (f"revoked {args.key_id} of {stack}: refused within about {REVOCATION_DELAY_S} s plus the API's "
                "authorizer cache")
    keys = store.list()
    lines = [f"{key_id}\tcreated {written:%Y-%m-%d %H:%M %Z}" for key_id, written in keys]
    return "\n".join(lines) if lines else f"no keys in {stack} (`keys create {args.env} NAME`)"


def _say(message: str) -> None:
    print(message, file=sys.stderr)
