"""Optional Bearer keys for a port exposed directly (local runs, a container outside SageMaker).

The file holds hashes, never keys: one `KEY_ID sha256:HEX` per line (`#` starts a comment). A presented key is
hashed and compared with every stored hash in constant time, so neither a match's position nor a near miss shows in
the timing. The file is read again when it changes, so keys rotate without a restart. Keys are never logged; the
key id of the caller is what the access log may carry.

    python -m semif_adapter.doors.api_keys create ops-laptop >> keys.txt   # prints the new key once, on stderr
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

HASH_PREFIX = "sha256:"
KEY_BYTES = 32


class KeysFileError(ValueError):
    """A keys file the adapter cannot trust: a line that is not `KEY_ID sha256:HEX`."""


@dataclass(frozen=True)
class Verdict:
    """Whether a request may proceed; `key_id` names the caller's key, `missing` tells 401 from 403's case."""

    allowed: bool
    key_id: str | None = None
    missing: bool = False


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def parse_keys(text: str, source: str) -> tuple[tuple[str, bytes], ...]:
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        parts = content.split()
        if len(parts) != 2 or not parts[1].startswith(HASH_PREFIX):
            raise KeysFileError(f"{source}:{number}: expected `KEY_ID {HASH_PREFIX}HEX`")
        try:
            hashed = bytes.fromhex(parts[1].removeprefix(HASH_PREFIX))
        except ValueError:
            raise KeysFileError(f"{source}:{number}: the hash is not hexadecimal") from None
        if len(hashed) != hashlib.sha256().digest_size:
            raise KeysFileError(f"{source}:{number}: a sha256 hash has 64 hex digits")
        entries.append((parts[0], hashed))
    return tuple(entries)


class ApiKeys:
    """The keys of one file, re-read whenever its modification time or size changes."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self._entries: tuple[tuple[str, bytes], ...] = ()
        self._lock = threading.Lock()
        self._reload()

    def _reload(self) -> None:
        stat = os.stat(self.path)
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            entries = parse_keys(self.path.read_text(), str(self.path))
            with self._lock:
                self._entries, self._stamp = entries, stamp

    def key_ids(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(key_id for key_id, _ in self._entries)

    def check(self, authorization: str | None) -> Verdict:
        """The verdict on an `Authorization` header value. A keys file that became unreadable keeps its last
        good keys (an operator's half-written edit must not open or close the door)."""
        scheme, _, key = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return Verdict(False, missing=True)
        with contextlib.suppress(OSError, KeysFileError):
            self._reload()
        presented = digest(key.strip())
        with self._lock:
            entries = self._entries
        found = None
        for key_id, hashed in entries:  # every entry is compared: the time does not depend on which one matched
            if hmac.compare_digest(presented, hashed):
                found = key_id
        return Verdict(found is not None, key_id=found)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "create":
        print("usage: python -m semif_adapter.doors.api_keys create KEY_ID  (appends nothing: redirect stdout)",
              file=sys.stderr)
        return 2
    key = "sk-semif-" + secrets.token_urlsafe(KEY_BYTES)
    print(f"new key for {argv[1]} (shown once): {key}", file=sys.stderr)
    print(f"{argv[1]} {HASH_PREFIX}{digest(key).hex()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
