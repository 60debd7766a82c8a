"""The bootstrap's progress (scripts/dev/progress.sh, sourced by scripts/dev/bootstrap.sh), run for real in bash.

Each step prints one line when it starts (naming its log) and one when it ends (with its time), or one line when it
is up to date; its command's output goes to the log only; a failure prints the end of the log and a line naming the
step, and stops the bootstrap with the command's status. While a step runs, one line shows its progress: a CMake
build's `[ NN%]`, rewritten in place on a terminal, at most once per interval off one.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shlex
import struct
import subprocess
import termios
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROGRESS = REPO / "scripts" / "dev" / "progress.sh"
CLEAR = "\r\x1b[K"  # what rewrites the progress line


def prelude(log_dir: Path) -> str:
    """What bootstrap.sh does before its steps: strict bash, the helpers sourced, the log folder and step count."""
    return (f"set -euo pipefail\nsource {shlex.quote(str(PROGRESS))}\n"
            f"LOG_DIR={shlex.quote(str(log_dir))}\nSTEPS=3\n")


def run_bash(script: str, log_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The script after the prelude, its stdout and stderr pipes (not a terminal, as in CI)."""
    return subprocess.run(["bash", "-c", prelude(log_dir) + script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, check=False)


def run_on_terminal(script: str, log_dir: Path, columns: int = 0) -> tuple[int, str]:
    """The script with stdout and stderr on a pseudo-terminal of COLUMNS columns (0: the size left unset)."""
    leader, follower = pty.openpty()
    if columns:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    process = subprocess.Popen(["bash", "-c", prelude(log_dir) + script], stdin=subprocess.DEVNULL,
                               stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if not select.select([leader], [], [], 1)[0]:
                continue
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        else:
            process.kill()
            raise AssertionError(f"still writing to the terminal after 60 s: {b''.join(chunks)!r}")
    finally:
        os.close(leader)
    return process.wait(timeout=10), b"".join(chunks).decode().replace("\r\n", "\n")


def test_a_step_prints_a_start_line_naming_its_log_and_an_end_line_with_its_time_and_logs_the_output(
        tmp_path: Path) -> None:
    result = run_bash("""
        step demo "a demo step"
        STEP_NOTE="a note"
        run_logged sh -c 'echo to-stdout; echo to-stderr >&2; sleep 1.2'
        echo after
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    start, end, after = result.stdout.splitlines()  # exactly these three: nothing of the command's output
    assert start == f"bootstrap: [1/3] a demo step (a note; log: {tmp_path / 'demo.log'}) ..."
    match = re.fullmatch(r"bootstrap: \[1/3\] a demo step: done in (\d+) s", end)
    assert match and 1 <= int(match.group(1)) <= 10, end
    assert after == "after"
    assert (tmp_path / "demo.log").read_text() == "to-stdout\nto-stderr\n"


def test_a_step_up_to_date_prints_one_line_and_a_quiet_command_only_its_log(tmp_path: Path) -> None:
    result = run_bash("""
        step one "the first"
        up_to_date
        step two "the second"
        run_logged --quiet sh -c 'echo relinked'
        up_to_date
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["bootstrap: [1/3] the first: up to date",
                                          "bootstrap: [2/3] the second: up to date"]
    assert (tmp_path / "two.log").read_text() == "relinked\n"


def test_a_failing_step_prints_the_end_of_its_log_names_itself_and_stops_with_its_status(tmp_path: Path) -> None:
    result = run_bash("""
        step first "the first"
        run_logged true
        step build "the build"
        run_logged sh -c 'for i in $(seq 1 250); do echo "line $i"; done; echo boom >&2; exit 3'
        echo after
    """, tmp_path)
    log = tmp_path / "build.log"
    assert result.returncode == 3
    assert "after" not in result.stdout
    assert result.stdout.splitlines()[-1] == f"bootstrap: [2/3] the build (log: {log}) ..."
    printed = result.stderr.splitlines()
    assert printed[0] == "bootstrap: [2/3] the build: the last 200 of the 251 lines of its log:"
    assert printed[1:-1] == [f"line {i}" for i in range(52, 251)] + ["boom"]
    failed = r"bootstrap: \[2/3\] the build: FAILED \(exit 3\) after \d+ s; the whole log: "
    assert re.fullmatch(failed + re.escape(str(log)), printed[-1]), printed[-1]
    assert log.read_text().count("\n") == 251


def test_a_failing_shell_function_stops_at_its_first_failure_even_in_a_subshell_and_quiet(tmp_path: Path) -> None:
    """bash ignores `set -e` inside a function run as a condition: run_logged must not run it as one."""
    result = run_bash("""
        two_commands() { echo first; false; echo second; }
        step venv "a venv"
        ( run_logged two_commands ) 9> "$LOG_DIR/lock"
        echo after
    """, tmp_path)
    assert result.returncode == 1
    assert "after" not in result.stdout
    assert (tmp_path / "venv.log").read_text() == "first\n"
    assert [re.sub(r"after \d+ s", "after N s", line) for line in result.stderr.splitlines()] == [
        "bootstrap: [1/3] a venv: its log:", "first",
        f"bootstrap: [1/3] a venv: FAILED (exit 1) after N s; the whole log: {tmp_path / 'venv.log'}"]

    quiet = run_bash('step link "a link"\nrun_logged --quiet sh -c "echo no such file; exit 2"\necho after',
                     tmp_path)
    assert quiet.returncode == 2
    assert quiet.stdout == ""
    assert [re.sub(r"after \d+ s", "after N s", line) for line in quiet.stderr.splitlines()] == [
        "bootstrap: [1/3] a link: its log:", "no such file",
        f"bootstrap: [1/3] a link: FAILED (exit 2) after N s; the whole log: {tmp_path / 'link.log'}"]


def test_on_a_terminal_one_line_shows_the_builds_percentage_rewritten_in_place(tmp_path: Path) -> None:
    started = time.monotonic()
    status, output = run_on_terminal("""
        step build "llama.cpp build"
        run_logged sh -c 'echo "[ 12%] Building C object ggml.c.o"; echo "warning: unused"; sleep 1.6
                          echo "[ 47%] Building CXX object llama.cpp.o"; echo "  note: here"; sleep 2.2'
        echo after
    """, tmp_path)
    assert status == 0, output
    assert time.monotonic() - started < 30  # the progress line's ticker does not outlive the step
    assert "Building" not in output and "warning" not in output  # the build's own lines are only in the log
    start, rest = output.split("\n", 1)
    assert start == f"bootstrap: [1/3] llama.cpp build (log: {tmp_path / 'build.log'}) ..."
    progress_then_end, after = rest.split("\n")[:2]  # one terminal line: rewritten, then the end line over it
    assert after == "after"
    shown = [line for line in progress_then_end.split(CLEAR) if line]
    assert re.fullmatch(r"bootstrap: \[1/3\] llama.cpp build: done in \d+ s", shown.pop()), shown
    assert shown, output
    assert all(re.fullmatch(r"bootstrap: \[1/3\] llama.cpp build: (12|47)% \(\d+ s\)", line) for line in shown), shown
    assert shown[-1].startswith("bootstrap: [1/3] llama.cpp build: 47% ")


def test_the_progress_line_fits_the_terminal_width(tmp_path: Path) -> None:
    status, output = run_on_terminal("""
        step pip "a step with a long title, longer than the terminal is wide"
        run_logged sh -c 'echo "Collecting a-package-with-a-long-name==1.0 (from -r requirements.txt (line 3))"
                          sleep 2.3'
    """, tmp_path, columns=40)
    assert status == 0, output
    progress = output.split("\n")[1]
    shown = [line for line in progress.split(CLEAR) if line][:-1]  # the last: the end line
    assert shown, output
    assert all(len(line) == 39 and line.startswith("bootstrap: [1/3] a step with") for line in shown), shown


def test_off_a_terminal_progress_is_a_line_per_interval_and_none_within_one(tmp_path: Path) -> None:
    script = """
        step build "the build"
        run_logged sh -c 'echo "[ 30%] Building C object a.o"; sleep 2.5'
    """
    every_second = run_bash(script, tmp_path, PROGRESS_EVERY="1")
    assert every_second.returncode == 0, every_second.stderr
    assert CLEAR not in every_second.stdout
    lines = every_second.stdout.splitlines()
    assert len(lines) in (3, 4, 5), lines  # start, one line a second of a 2.5-s step, end
    assert all(re.fullmatch(r"bootstrap: \[1/3\] the build: running for \d+ s: 30%", line) for line in lines[1:-1])

    by_default = run_bash(script, tmp_path)  # every 60 s: none in a 2.5-s step
    start, end = by_default.stdout.splitlines()
    assert start == f"bootstrap: [1/3] the build (log: {tmp_path / 'build.log'}) ..."
    assert re.fullmatch(r"bootstrap: \[1/3\] the build: done in \d+ s", end), end


def progress_of(log: str, tmp_path: Path) -> str:
    (tmp_path / "step.log").write_text(log)
    result = run_bash(f"progress_of {shlex.quote(str(tmp_path / 'step.log'))}", tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout.rstrip("\n")


def test_progress_of_reads_cmakes_percentage_through_warnings_else_the_last_line(tmp_path: Path) -> None:
    cmake = ("-- Configuring done\n[  3%] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o\n"
             "[ 47%] Building CXX object src/CMakeFiles/llama.dir/llama-model.cpp.o\n"
             "/src/llama-model.cpp:12:5: warning: unused variable 'x' [-Wunused-variable]\n   12 |     int x;\n"
             "      |         ^\n")
    assert progress_of(cmake, tmp_path) == "47%"
    assert progress_of("[  3%] Building C object a.o\n", tmp_path) == "3%"
    assert progress_of("[100%] Built target llama-server\n", tmp_path) == "100%"
    pip = "[100%] Built target llama\n" + "".join(f"Collecting package-{i}==1.0\n" for i in range(25))
    assert progress_of(pip + "  Using cached package-25.whl\n\n", tmp_path) == "Using cached package-25.whl"
    assert progress_of("Downloading x 10%\rDownloading x 90%\r", tmp_path) == "Downloading x 90%"
    assert progress_of("", tmp_path) == ""
    assert progress_of("caf\u00e9 \u2501\u2501 done\n", tmp_path) == "caf  done"
