"""The full reliability run behind `python -m bench.reliability`: every driver at report size, in order.

The decision adapter runs with its defaults (queue 32, drain 20 s) and the local
endpoints' settings; each phase's problems are collected, none stops the run.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.common.runs import commit, cpu_model

from .bodies import REQUEST_TIMEOUT_S, post_json
from .chat import chat_crash_probe, chat_hostile, chat_load
from .config import SuiteConfig
from .disconnect import run_disconnects
from .faults import make_fault, run_fault, sigterm_under_load
from .fuzz import run_openapi_fuzz
from .hostile import catalog, huge_input_memory, run_catalog, run_raw_cases
from .load import LoadConfig, run_load
from .properties import check_http, check_validation
from .servers import Server, settings_in_use, start_chat, start_decision

FAULTS = ("missing", "truncated", "two_models", "wrong_magic", "unreadable")
ADAPTER_FIELDS = ("threads", "workers", "queue_size", "head_tokens", "load_ms", "model")  # from its `ready` log line


def _property_run(label: str, check: Callable[[], Counter[str]]) -> dict[str, Any]:
    """What a property check tried, or its counterexample as a problem: one failure does not stop the run."""
    try:
        return {"tried": dict(check()), "problems": []}
    except AssertionError as error:
        return {"tried": {}, "problems": [f"{label}: {str(error)[:1500]}"]}


def _properties_over_http(server: Server, examples: int) -> dict[str, Any]:
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        return _property_run("property over HTTP",
                             lambda: check_http(examples, lambda raw: post_json(client, server.url, raw)))


def decision_phases(config: SuiteConfig, logs: Path) -> dict[str, Any]:
    server = start_decision(logs, name="decision")
    rss = {"ready": server.rss_kib()}
    try:
        ready = server.ready_fields()
        result: dict[str, Any] = {"settings": {key: ready.get(key) for key in ADAPTER_FIELDS}}
        result["load"] = run_load(server, LoadConfig(clients=config.clients, duration_s=config.duration_s)).summary()
        rss["after_load"] = server.rss_kib()
        result["hostile"] = run_catalog(server, catalog()).summary()
        result["framing"] = run_raw_cases(server).summary()
        result["huge_input_memory"] = huge_input_memory(server, config.huge_rounds)
        result["disconnects"] = run_disconnects(server)
        result["properties_over_http"] = _properties_over_http(server, config.http_examples)
        result["openapi_fuzz"] = run_openapi_fuzz(server.url, config.fuzz_examples)
        rss["end"] = server.rss_kib()
    finally:
        stopped = server.stop()
    result["rss_kib"] = rss
    result["stop"] = {"status": stopped.status, "seconds": round(stopped.seconds, 2),
                      "problems": [] if stopped.status == 0 else [f"exit status {stopped.status} on SIGTERM"]}
    result["startup_faults"] = [run_fault(make_fault(name, logs / "models" / name), logs) for name in FAULTS]
    result["sigterm_under_load"] = sigterm_under_load(logs, config.clients, config.sigterm_after_s)
    result["properties_in_process"] = _property_run("validation property",
                                                    lambda: check_validation(config.validation_examples))
    return result


def chat_phases(config: SuiteConfig, logs: Path) -> dict[str, Any]:
    server = start_chat(logs)
    try:
        result = {"load": chat_load(server, config.chat_clients, config.chat_duration_s),
                  "hostile": chat_hostile(server)}
    finally:
        stopped = server.stop()
    problems = [f"exit status {stopped.status}"] if stopped.status != 0 else []
    problems += [f"orphans left: {stopped.survivors}"] if stopped.survivors else []
    result["stop"] = {"status": stopped.status, "seconds": round(stopped.seconds, 2),
                      "survivors": list(stopped.survivors), "problems": problems}
    result["crash_probe"] = chat_crash_probe(logs)
    return result


def inputs_per_category(decision: dict[str, Any], chat: dict[str, Any]) -> dict[str, int]:
    """How many inputs each category got, across hand-picked, generated and fuzzed runs."""
    counts: Counter[str] = Counter()
    for part in ("hostile", "framing"):
        counts.update(decision[part]["per_category"])
    load = decision["load"]
    counts["slow_senders"] += len(load["slow_senders"])
    counts["client_disconnect"] += decision["disconnects"]["walked_away"]
    counts["huge_strings"] += decision["huge_input_memory"]["rounds"]
    counts["property_based_in_process"] += sum(decision["properties_in_process"]["tried"].values())
    counts["property_based_over_http"] += sum(decision["properties_over_http"]["tried"].values())
    counts["openapi_fuzz"] += decision["openapi_fuzz"]["requests"]
    counts["chat_hostile"] += chat["hostile"]["tried"] + 1  # + the crash probe
    return dict(sorted(counts.items()))


def upstream_findings(chat: dict[str, Any]) -> list[str]:
    """What llama-server itself does wrong (the stock DLC relays the same): reported, not ours to fix."""
    findings = []
    crash = chat["crash_probe"]
    if crash["llama_server_crashed"]:
        findings.append(f"llama-server died on a {crash['body_bytes']}-byte body of {crash['nesting']} nested JSON "
                        f"arrays (\"{crash['exit_line']}\"; -11 is SIGSEGV); the chat endpoint is down until "
                        "its container restarts")
    relayed = [c["name"] for c in chat["hostile"]["cases"] if (c["llama_server"] or 0) >= 500]
    if relayed:
        findings.append(f"llama-server answers these client mistakes with 5xx (relayed unchanged): {relayed}")
    return findings


def all_problems(section: Any, path: str = "") -> list[str]:
    """Every `problems` list anywhere in the document, each item prefixed with where it came from."""
    found: list[str] = []
    if isinstance(section, dict):
        for key, value in section.items():
            if key == "problems" and isinstance(value, list):
                found += [f"{path}: {problem}" for problem in value]
            else:
                found += all_problems(value, f"{path}.{key}" if path else key)
    elif isinstance(section, list):
        for item in section:
            found += all_problems(item, path)
    return found


def run_suite(config: SuiteConfig, command: str) -> dict[str, Any]:
    started = time.monotonic()
    load_average = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="semif-reliability-") as logs:
        decision = decision_phases(config, Path(logs))
        chat = chat_phases(config, Path(logs))
    report: dict[str, Any] = {
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": command, "commit": commit(),
        "seconds": round(time.monotonic() - started, 1),
        "machine": {"cpus": os.cpu_count(), "cpu": cpu_model(), "load_average": [round(x, 2) for x in load_average],
                    "python": platform.python_version(), "system": platform.platform()},
        "settings": {**config.__dict__, "adapter": decision.pop("settings"), "environment": settings_in_use()},
        "decision": decision, "chat": chat, "inputs_tried_per_category": inputs_per_category(decision, chat),
    }
    report["problems"] = all_problems({"decision": decision, "chat": chat})
    report["upstream_findings"] = upstream_findings(chat)
    report["verdict"] = "pass" if not report["problems"] else "fail"
    return report
