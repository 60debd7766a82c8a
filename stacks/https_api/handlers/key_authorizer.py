"""The System One API's Lambda authorizer (TOKEN type, identity source `Authorization`): who may call, and as which key.

The keys are SecureString parameters under the stack's path (`api_front.keys_path`), one per key, written by
`semif keys create` (the key's sha256, never the key). They are read into a keys file in /tmp and checked by the
container's own checker (`semif_adapter.doors.api_keys.ApiKeys`: every stored hash compared in constant time), so a key
means the same here, on the local gateway and on a container's own port. They are read again every `REFRESH_S`, and
on an unknown key at most every `MISS_REFRESH_S`: a new key works within seconds, a revoked one stops within
`REFRESH_S` plus API Gateway's authorizer cache, and a flood of wrong keys costs one read per `MISS_REFRESH_S`.

Answers, as API Gateway expects them: a stored key gets an Allow policy for the whole stage (the cached policy then
serves the key's later calls to any route), the API Gateway key that counts its requests in the usage plan
(`usageIdentifierKey`) and its id as `keyId` (the access log's); a header that is not `Bearer <key>` a Deny (403);
any other key the exception "Unauthorized" (401). Neither the key nor the header is ever logged.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from semif_adapter.doors.api_keys import ApiKeys, Verdict
from semif_decision_client.api_front import Admission, KeyRecord, admit

PATH_ENV = "SEMIF_KEYS_PATH"
REFRESH_S = 30.0
MISS_REFRESH_S = 5.0
UNAUTHORIZED = "Unauthorized"  # the message API Gateway turns into its 401


def _log(**fields: Any) -> None:
    print(json.dumps(fields, sort_keys=True))


def read_records(ssm: Any, path: str) -> list[KeyRecord]:
    """Every well-formed key under `path` (a malformed one is logged by name and skipped, never fatal)."""
    records = []
    for page in ssm.get_paginator("get_parameters_by_path").paginate(Path=path, Recursive=False,
                                                                      WithDecryption=True):
        for parameter in page["Parameters"]:
            key_id = parameter["Name"].rsplit("/", 1)[-1]
            try:
                records.append(KeyRecord.from_json(key_id, parameter["Value"]))
            except (ValueError, KeyError, TypeError) as error:
                _log(event="skipped_key", key_id=key_id, reason=type(error).__name__)
    return records


class KeyStore:
    """This API's keys: read from SSM into a keys file, checked by `ApiKeys`."""

    def __init__(self, ssm: Any, path: str, directory: Path, *, clock: Callable[[], float] = time.monotonic,
                 refresh_s: float = REFRESH_S, miss_refresh_s: float = MISS_REFRESH_S) -> None:
        self.ssm, self.path, self.clock = ssm, path, clock
        self.refresh_s, self.miss_refresh_s = refresh_s, miss_refresh_s
        self.file = directory / "keys.txt"
        self.usage_keys: dict[str, str] = {}
        self.read_at = float("-inf")
        self._read()  # the first read must succeed: without keys there is nothing to authorize against
        self.keys = ApiKeys(str(self.file))

    def _read(self) -> None:
        records = read_records(self.ssm, self.path)
        staged = self.file.with_suffix(".new")
        staged.write_text("".join(f"{record.keys_line}\n" for record in records))
        os.replace(staged, self.file)  # ApiKeys re-reads a file whose stamp changed
        self.usage_keys = {record.key_id: record.usage_key for record in records}
        self.read_at = self.clock()

    def _refresh(self, older_than_s: float) -> bool:
        """Read again if the last read is older than that; a failed read keeps the last good keys."""
        if self.clock() - self.read_at < older_than_s:
            return False
        try:
            self._read()
        except (ClientError, BotoCoreError) as error:
            self.read_at = self.clock()  # do not hammer a failing store: the next try waits as a refresh does
            _log(event="keys_not_refreshed", reason=type(error).__name__)
            return False
        return True

    def check(self, authorization: str | None) -> Verdict:
        self._refresh(self.refresh_s)
        verdict = self.keys.check(authorization)
        if not verdict.allowed and not verdict.missing and self._refresh(self.miss_refresh_s):
            verdict = self.keys.check(authorization)  # a key made since the last read
        return verdict


def stage_arn(method_arn: str) -> str:
    """`arn:...:API_ID/STAGE/METHOD/RESOURCE` -> `arn:...:API_ID/STAGE/*/*`: every route of the stage."""
    api, stage = method_arn.split("/")[:2]
    return f"{api}/{stage}/*/*"


def _policy(principal: str, effect: str, resource: str) -> dict[str, Any]:
    return {"principalId": principal, "policyDocument": {"Version": "2012-10-17", "Statement": [
        {"Action": "execute-api:Invoke", "Effect": effect, "Resource": resource}]}}


def authorize(event: dict[str, Any], store: KeyStore) -> dict[str, Any]:
    """A TOKEN authorizer's answer for `event` (raises the 401 API Gateway expects for a wrong key)."""
    admission, key_id = admit(event.get("authorizationToken"), store.check)
    resource = stage_arn(event["methodArn"])
    if admission is Admission.ALLOWED:
        assert key_id is not None
        return {**_policy(key_id, "Allow", resource), "usageIdentifierKey": store.usage_keys[key_id],
                "context": {"keyId": key_id}}
    if admission is Admission.NOT_BEARER:
        return _policy("anonymous", "Deny", resource)
    raise PermissionError(UNAUTHORIZED)  # API Gateway reads the message; the type is not seen


@functools.cache
def _store() -> KeyStore:
    return KeyStore(boto3.client("ssm"), os.environ[PATH_ENV], Path(tempfile.mkdtemp(prefix="semif-keys-")))


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return authorize(event, _store())
