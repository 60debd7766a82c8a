"""The reliability report as markdown, rendered from the JSON document alone (so the two never disagree)."""

from __future__ import annotations

import json
from typing import Any

# Whom the page is for, as every page under docs/ opens (tests/docs/test_doc_links.py).
OPENING = """\
For whoever has to trust the endpoints under real traffic: after this page you know what the latest reliability
run found (its verdict, the decision endpoint under load, slow senders, hostile and generated inputs, faults, the
chat endpoint) and with which settings. What each check does and how to run it: [reliability.md](../reliability.md)."""


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]


def _mib(kib: float | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"


def _load_section(load: dict[str, Any], workers: int) -> list[str]:
    config, latency, rss = load["config"], load["latency_ms"], load["rss"]
    lines = [f"## Decision endpoint under load ({config['clients']} clients, {config['duration_s']:.0f} s)", ""]
    lines += _table(["figure", "value"], [
        ["requests sent", load["sent"]], ["answered", load["answered"]],
        ["by status", ", ".join(f"{k}: {v}" for k, v in load["by_status"].items())],
        ["latency p50 / p95 / max", f"{latency.get('p50')} / {latency.get('p95')} / {latency.get('max')} ms"],
        ["throughput", f"{load['throughput_per_s']} decisions/s"],
        ["queue size (admitted at once)", load["queue_size"]],
        ["RSS before / after", f"{_mib(rss.get('before_kib'))} / {_mib(rss.get('after_kib'))}"],
        [f"RSS median, first / last {rss.get('window_s')} s",
         f"{_mib(rss.get('first_window_median_kib'))} / {_mib(rss.get('last_window_median_kib'))}"],
        ["RSS growth (limit 5%)", f"{rss.get('growth', 0):.2%}"],
        ["answered while the slow senders were connected", load["answered_200_while_slow_senders_connected"]],
    ])
    at_once, clients = ("one request at a time", "N") if workers == 1 else (f"{workers} requests at once",
                                                                          f"N / {workers}")
    lines += [f"The adapter under test decided {at_once} (`SEMIF_WORKERS`; by default 2 on a CPU, but at most its "
              f"threads), so under N closed-loop clients a request waits for those ahead of it: latency is about "
              f"{clients} times the service time, and throughput is the figure that measures the adapter.", ""]
    lines += _table(["slow sender", "expected", "got", "after"], [
        [s["name"], s["expect"], f"{s['status']} {s['code'] or ''}", f"{s['seconds']} s"]
        for s in load["slow_senders"]])
    return lines


def _inputs_section(report: dict[str, Any]) -> list[str]:
    tried = report["inputs_tried_per_category"]
    lines = ["## Inputs tried per category", ""]
    lines += _table(["category", "inputs"], [[name, count] for name, count in tried.items()])
    hostile = report["decision"]["hostile"]
    failed = [c for c in hostile["cases"] if c["problem"]]
    lines += [f"Hand-picked cases: {hostile['tried']}, failed: {len(failed)}; slowest answer "
              f"{hostile['slowest_s']} s. Memory after distinct near-6 MB states (each refused 413): "
              + ", ".join(_mib(k) for k in report["decision"]["huge_input_memory"]["after_each_kib"]) + ".", ""]
    return lines


def _faults_section(decision: dict[str, Any]) -> list[str]:
    lines = ["## Faults", "", "Start-up with a broken model (the adapter must exit non-zero, `/ping` never 200):", ""]
    lines += _table(["fault", "how", "exit", "seconds", "/ping 200", "message"], [
        [f["fault"], f["how"], f["exit_status"], f["seconds"], f["pings_200"], f"`{f['message']}`"]
        for f in decision["startup_faults"]])
    sigterm = decision["sigterm_under_load"]
    lines += [f"SIGTERM after {sigterm['signal_after_s']} s of load by {sigterm['clients']} clients: exit status "
              f"{sigterm['exit_status']} after {sigterm['exit_s']} s; outcomes: "
              + ", ".join(f"{k}: {v}" for k, v in sigterm["outcomes"].items()) + ".", ""]
    disconnects = decision["disconnects"]
    lines += [f"Clients that walked away: {disconnects['walked_away']} (their decisions ended "
              f"{disconnects['their_logged_statuses']} in the log); a burst of {disconnects['queue_size']} "
              f"afterwards got {disconnects['burst']}; (cached, evaluated) tokens of a fixed sequence before "
              f"{disconnects['cached_evaluated_before']}, after {disconnects['cached_evaluated_after']}.", ""]
    return lines


def _chat_section(chat: dict[str, Any]) -> list[str]:
    load, hostile, crash, stop = chat["load"], chat["hostile"], chat["crash_probe"], chat["stop"]
    latency = load["latency_ms"]
    lines = [f"## Chat front ({load['clients']} clients, {load['duration_s']:.0f} s, max_tokens {load['max_tokens']})",
             ""]
    lines += _table(["figure", "value"], [
        ["requests sent", load["sent"]], ["by status", ", ".join(f"{k}: {v}" for k, v in load["by_status"].items())],
        ["latency p50 / p95", f"{latency.get('p50')} / {latency.get('p95')} ms"],
        ["hostile bodies (front vs llama-server direct)", hostile["tried"]],
        ["5xx from llama-server itself, relayed unchanged", hostile["upstream_5xx_relayed"]],
        ["stop: exit status, seconds, orphans", f"{stop['status']}, {stop['seconds']}, {stop['survivors']}"],
        [f"{crash['nesting']} nested arrays ({crash['body_bytes']} bytes)",
         f"llama-server crashed: {crash['llama_server_crashed']}; front answered {crash['status']} "
         f"{crash['code']}; container exit {crash['container_exit_status']}"],
    ])
    lines += _table(["hostile body", "front", "llama-server"],
                    [[c["name"], c["front"], c["llama_server"]] for c in hostile["cases"]])
    return lines


def _from_commit(report: dict[str, Any]) -> str:
    """Runs before the report recorded its commit and CPU say nothing of them."""
    return f" from commit `{report['commit']}`" if report.get("commit") else ""


def _cpu(report: dict[str, Any]) -> str:
    return f"{report['machine']['cpu']}; " if report["machine"].get("cpu") else ""


def render_markdown(report: dict[str, Any]) -> str:
    decision = report["decision"]
    lines = ["# Reliability report", "", OPENING, "",
             f"Generated {report['generated']}{_from_commit(report)} by `{report['command']}` in "
             f"{report['seconds']:.0f} s on {report['machine']['cpus']} CPUs ({_cpu(report)}load average at start "
             f"{report['machine']['load_average']}). "
             "Everything ran on 127.0.0.1 against the real adapter, the real llama-server and the embedded "
             "SmolLM2-135M model.", "",
             f"**Verdict: {report['verdict']}** ({len(report['problems'])} problems)", ""]
    lines += [f"- {problem}" for problem in report["problems"]] + ([""] if report["problems"] else [])
    if report["upstream_findings"]:
        lines += ["Upstream findings (llama-server itself; the stock DLC behaves the same):", ""]
        lines += [f"- {finding}" for finding in report["upstream_findings"]] + [""]
    # (a report from before SEMIF_WORKERS existed had one worker)
    lines += _load_section(decision["load"], int(report["settings"]["adapter"].get("workers") or 1))
    lines += _inputs_section(report)
    lines += _faults_section(decision)
    lines += _chat_section(report["chat"])
    lines += ["## Settings", "", "```json", json.dumps(report["settings"], indent=2, sort_keys=True), "```", ""]
    return "\n".join(lines)
