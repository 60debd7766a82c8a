"""Decision-typed test models: the embedded SmolLM2 GGUF with decision metadata added, weights untouched.

A decision model is a GGUF whose header declares `<arch>.decision.type` and carries the prompt of its head as
`tokenizer.chat_template.systemone`. These copies were never trained for it (their answers mean little): they are
plumbing test models, which let the native path (llama.cpp's own decision engine) be served, tested and measured
here, for each of the six types llama.cpp b11434 knows. openjev, lev and nimble read token logits: their templates
follow b11434's converters (`conversion/qwen.py` OpenJevModel, `conversion/lev.py` LevModel and NimbleModel,
shortened), in SmolLM2's chat format; the temperatures are OpenJev's. kev, laya and clef read the embeddings output
(llama-server turns on embedding mode for them): each gets what b11434's `server-decision.cpp` asks of its file,
made from SmolLM2's unused control tokens (kev: one renamed `<|box_end|>`; laya: a mask and a separator token and
`max_head_tokens`) and a template in the layout its head reads (clef: the joint prompt of `fill_task_joint`).
Written once per user into the cache.

    python -m scripts.dev.decision_models [--type TYPE] [--output PATH]   # prints the path
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import gguf
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

from semif_adapter.engine.embedded_model import embedded_model_path

from .model_copies import cached_copy
from .tiny_model import tiny_model

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _text(name: str) -> str:
    """A Jinja expression: the variable as it is if a string, else as JSON (llama.cpp's `jinja_str_or_json`)."""
    return "{{ " + name + " if " + name + " is string else " + name + " | tojson }}"


OPENJEV_TEMPLATE = (
    "{% set letters = '" + LETTERS + "' %}"
    "<|im_start|>user\nState:\n" + _text("state") + "\n\nQuestion: " + _text("instructions")
    + "{% if type == 'score' %} Rate along the ordered levels below (lowest first).{% endif %}"
    "{{ '\\nOptions:\\n' }}"
    "{% for o in options %}[{{ letters[loop.index0] }}] "
    "{% if type != 'noul' %}{{ o.key }}: {% if o.description %}" + _text("o.description") + "{% endif %}"
    "{% elif o.key == 'true' %}yes: {% if o.description %}" + _text("o.description")
    + "{% else %}The statement is true.{% endif %}"
    "{% else %}no: {% if o.description %}" + _text("o.description") + "{% else %}The statement is false.{% endif %}"
    "{% endif %}{{ '\\n' }}{% endfor %}"
    "{{ '\\nAnswer with the letter of the best option only.<|im_end|>\\n<|im_start|>assistant\\n' }}"
)

LEV_TEMPLATE = (
    "<|im_start|>system\nYou read the Evidence and answer the Criterion by choosing exactly one of the listed "
    "options. You answer with the single option label only.<|im_end|>\n"
    "<|im_start|>user\n# Evidence\n" + _text("state") + "\n\n# Criterion\n"
    "{% if instructions %}" + _text("instructions") + "{% else %}{{ id }}{% endif %}{{ '\\n\\n' }}"
    "{% if type == 'noul' %}{{ '# Scale\\n0 = certainly no ... 8 = certainly yes\\n' }}"
    "{{ '\\nRespond with only a digit from 0 to 8.' }}"
    "{% else %}{{ '# Options\\n' }}{% for o in options %}{{ o.label }}. "
    "{% if type == 'score' %}(level {{ o.key }} of {{ options | length - 1 }}) " + _text("o.description")
    + "{% else %}{{ o.key }}{% if o.description %}: " + _text("o.description") + "{% endif %}{% endif %}"
    "{{ '\\n' }}{% endfor %}{{ '\\nRespond with only the label of the best option.' }}{% endif %}"
    "{{ '\\n<|im_end|>\\n<|im_start|>assistant\\n' }}"
)

# Nimble's prompt is a schema of every question of the request (`questions`), then the one asked (`id`).
NIMBLE_TEMPLATE = (
    "<|im_start|>system\nClassify the context using the supplied schema. For the requested field, select the "
    "single best-fitting choice. Return only that choice's code.<|im_end|>\n"
    "<|im_start|>user\nContext:\n" + _text("state") + "\n\nSchema:\n"
    "{% for q in questions %}- {{ q.id }}: " + _text("q.instructions") + "{{ '\n' }}"
    "{% for o in q.options %}  {{ o.label }} = {{ o.key }}{% if o.description %}: " + _text("o.description")
    + "{% endif %}{{ '\n' }}{% endfor %}{% endfor %}"
    "\nRequested field: {{ id }}<|im_end|>\n<|im_start|>assistant\n"
)

# kev: the state, the question, then each option ended by <|box_end|> (a renamed control token of SmolLM2's); the head
# reads the hidden states there and at the last token. llama-server hands kev only text (kev_render).
KEV_BOX_END = "<|box_end|>"
KEV_TEMPLATE = (
    "<|im_start|>user\n{{ state }}\n\nQuestion: {{ instructions }}\nOptions:\n"
    "{% for o in options %}{{ o.key }}{% if o.description %}: {{ o.description }}{% endif %}" + KEV_BOX_END
    + "{{ '\n' }}{% endfor %}<|im_end|>\n<|im_start|>assistant\n"
)

# laya: [cls] question [sep] ([mask] option)* [sep] state [sep], with SmolLM2's <|endoftext|> as the first token and
# two unused control tokens as the mask and the separator; the head is cut to LAYA_MAX_HEAD_TOKENS.
LAYA_CLS, LAYA_MASK, LAYA_SEP = "<|endoftext|>", "<reponame>", "<file_sep>"
LAYA_MAX_HEAD_TOKENS = 128
LAYA_TEMPLATE = (
    LAYA_CLS + _text("instructions") + LAYA_SEP
    + "{% for o in options %}" + LAYA_MASK + "{{ o.key }}{% if o.description %}: " + _text("o.description")
    + "{% endif %}{% endfor %}" + LAYA_SEP + _text("state") + LAYA_SEP
)

# clef: one prompt for every question of the request, pieces split at `sep`, a question's and an option's span opened
# by `mark_question` and `mark_option` (the strings llama-server hands to the template, fill_task_joint).
CLEF_TEMPLATE = (
    "<|im_start|>user\n" + _text("state") + "{{ sep }}"
    "{% for q in questions %}{{ mark_question }}" + _text("q.instructions") + "{{ sep }}"
    "{% for o in q.options %}{{ mark_option }}{{ o.key }}{% if o.description %}: " + _text("o.description")
    + "{% endif %}{{ sep }}{% endfor %}{% endfor %}<|im_end|>"
)

TEMPLATES = {"openjev": OPENJEV_TEMPLATE, "lev": LEV_TEMPLATE, "nimble": NIMBLE_TEMPLATE, "kev": KEV_TEMPLATE,
             "laya": LAYA_TEMPLATE, "clef": CLEF_TEMPLATE}
TEMPERATURES: dict[str, dict[str, float]] = {"openjev": {"choice": 0.85, "score": 0.85, "noul": 0.85 * 1.829074}}
RENAMED_TOKENS = {"kev": {"<empty_output>": KEV_BOX_END}}  # a control token's text, renamed
TOKEN_IDS = {"laya": {gguf.Keys.Tokenizer.MASK_ID: LAYA_MASK, gguf.Keys.Tokenizer.SEP_ID: LAYA_SEP}}
UINT32_KEYS = {"laya": {"decision.max_head_tokens": LAYA_MAX_HEAD_TOKENS}}  # under `<arch>.`


def _recipe(decision_type: str) -> str:
    """Everything a type's copy is made from: the cache key."""
    return "\n".join(str(part.get(decision_type)) for part in (TEMPLATES, TEMPERATURES, RENAMED_TOKENS, TOKEN_IDS,
                                                                UINT32_KEYS))


def _token_metadata(reader: gguf.GGUFReader, decision_type: str) -> dict[str, MetadataDetails]:
    """The vocabulary with the type's renamed tokens, and the ids of the tokens its head reads."""
    tokens: list[str] = reader.fields[gguf.Keys.Tokenizer.LIST].contents()
    new: dict[str, MetadataDetails] = {}
    renamed = RENAMED_TOKENS.get(decision_type, {})
    if renamed:
        new[gguf.Keys.Tokenizer.LIST] = MetadataDetails(
            gguf.GGUFValueType.ARRAY, [renamed.get(text, text) for text in tokens], sub_type=gguf.GGUFValueType.STRING)
    for key, text in TOKEN_IDS.get(decision_type, {}).items():
        new[key] = MetadataDetails(gguf.GGUFValueType.UINT32, tokens.index(text))
    return new


def write_decision_model(source: Path, target: Path, decision_type: str) -> Path:
    """A copy of `source` that declares `decision_type`, with its `systemone` template (and its default chat
    template kept beside it: copy_with_new_metadata drops the old ones) and the tokens and keys its head needs. A
    made-up type gets OpenJev's template: such a file is for refusal tests."""
    reader = gguf.GGUFReader(str(source))
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    chat = reader.fields[gguf.Keys.Tokenizer.CHAT_TEMPLATE].contents()
    new = {
        gguf.Keys.Tokenizer.CHAT_TEMPLATE: MetadataDetails(gguf.GGUFValueType.STRING, [
            {"name": "default", "template": chat},
            {"name": "systemone", "template": TEMPLATES.get(decision_type, OPENJEV_TEMPLATE)}]),
        f"{arch}.decision.type": MetadataDetails(gguf.GGUFValueType.STRING, decision_type),
        gguf.Keys.General.NAME: MetadataDetails(gguf.GGUFValueType.STRING, f"{target.stem}"),
    }
    for name, value in TEMPERATURES.get(decision_type, {}).items():
        new[f"{arch}.decision.temperature.{name}"] = MetadataDetails(gguf.GGUFValueType.FLOAT32, value)
    for name, number in UINT32_KEYS.get(decision_type, {}).items():
        new[f"{arch}.{name}"] = MetadataDetails(gguf.GGUFValueType.UINT32, number)
    new.update(_token_metadata(reader, decision_type))
    partial = target.with_name(target.name + ".partial")
    target.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(partial), arch=arch, endianess=reader.endianess)
    copy_with_new_metadata(reader, writer, new, [])
    os.replace(partial, target)
    return target


def decision_model(decision_type: str = "openjev", *, tiny: bool = False) -> Path:
    """The cached decision-typed copy of the embedded model, or with `tiny` of the tiny random-weight model
    (scripts/dev/tiny_model.py: the same tokenizer and template at a twentieth of the cost per token, for tests that
    compare the doors' answers with llama-server's own on the same file), written on first use."""
    return cached_copy("decision-tiny" if tiny else "decision", decision_type, _recipe(decision_type),
                       lambda source, target: write_decision_model(source, target, decision_type),
                       source=tiny_model() if tiny else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--type", choices=sorted(TEMPLATES), default="openjev")
    parser.add_argument("--output", type=Path, help="write here instead of the cache")
    args = parser.parse_args()
    if args.output:
        print(write_decision_model(embedded_model_path(), args.output, args.type))
    else:
        print(decision_model(args.type))


if __name__ == "__main__":
    main()
