"""How System One questions are worded for the model (`SEMIF_SYSTEMONE_FRAMES`): the wordings measured against
each other on labelled cases, the default being the one the figures chose (README, "System One API")."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

CHOICES = {
    "choice": ("description", "name_description"),  # the description (or the name alone) / "Name: description"
    "noul": ("described", "yes_no"),  # "Yes: <true outcome>" / "No: <false outcome>", or plain Yes / No
    "score": ("levels", "numbered"),  # the level's text / "<i>: <level>"
}


@dataclass(frozen=True)
class Frames:
    choice: str = "description"  # measured best on both labelled sets (docs/quality/systemone.md)
    noul: str = "described"
    score: str = "levels"

    def describe(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


DEFAULT_FRAMES = Frames()


def parse_frames(text: str) -> Frames:
    """`type=wording` pairs, comma-separated; types not named keep the default. ValueError names the mistake."""
    frames = DEFAULT_FRAMES
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, _, wording = item.partition("=")
        if kind not in CHOICES:
            raise ValueError(f"{kind!r} is not a question type; expected one of {', '.join(CHOICES)}")
        if wording not in CHOICES[kind]:
            raise ValueError(f"{kind}={wording!r}: expected one of {', '.join(CHOICES[kind])}")
        frames = replace(frames, **{kind: wording})
    return frames
