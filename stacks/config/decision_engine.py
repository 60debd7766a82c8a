"""Who scores the decision endpoint's model, chosen at synth from its GGUF header as the adapter chooses at start.

A GGUF that declares `<general.architecture>.decision.type` is a fine-tuned decision model: with
`SEMIF_DECISION_ENGINE` unset or `auto` the adapter serves it through llama.cpp's own `llama-server` decision
engine (`native`), any other GGUF through its own engine (`ours`); `native` and `ours` force one
(`semif_adapter.settings`, `server.py` `choose_service`). The stack passes the adapter nothing new: it detects the
type itself at start. The synth makes the same choice from the header it has already read (the artifact's), so
that the memory it counts is the engine's that will run (decision_memory.py), and it refuses `native` for a model
that declares no decision type, which the adapter would refuse at start, ten minutes into a deployment. A decision
type the pinned llama.cpp does not serve is refused before, by the packaging rules
(`semif_adapter.deploy.artifact.require_servable`), wherever the file is read. The header of an S3 object is not
read: its decision type is not known, and the setting alone decides (`auto` counts our engine, the larger).
"""

from __future__ import annotations

from semif_adapter.engine.decision_types import EngineName, engine_for
from semif_adapter.settings import Settings

from .container_keys import DECISION_ENGINE_KEY
from .environment import EnvironmentSettings
from .problems import Problems

DecisionEngine = EngineName
DEFAULT_SETTING: str = Settings.model_fields["decision_engine"].default  # auto


def engine_setting(settings: EnvironmentSettings) -> str:
    """SEMIF_DECISION_ENGINE as the decision adapter will read it (its value is checked by the adapter's own
    settings parser at synth: container_env_rules.py)."""
    return settings.decision.adapter_env.get(DECISION_ENGINE_KEY, DEFAULT_SETTING)


def decision_engine(settings: EnvironmentSettings, decision_type: str | None) -> DecisionEngine:
    """`native` (llama-server's decision engine) or `ours` for a model declaring `decision_type` (None: none, or
    not known)."""
    return engine_for(engine_setting(settings), decision_type)


def check_decision_engine(settings: EnvironmentSettings, *, decision_type: str | None,
                          decision_type_key: str | None) -> Problems:
    """`SEMIF_DECISION_ENGINE=native` for a model whose header declares no decision type (`decision_type_key` is
    the key it would be under; None: the header was not read, nothing to check)."""
    if decision_type_key is None or decision_type is not None or engine_setting(settings) != "native":
        return []
    return [(f"decision.env.{DECISION_ENGINE_KEY}",
             f"native scores with the model's own decision head, and the model declares no {decision_type_key}: it "
             "is a generic chat model, and the adapter would refuse to start; set auto (the default: our engine for "
             "this model) or ours")]
