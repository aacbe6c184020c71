"""Let verl's PPO critic load with PyTorch SDPA where flash-attn is not installed (verl env side).

verl (0.7 to 0.9.1 at least) writes ``attn_implementation="flash_attention_2"`` into both
``from_pretrained`` calls of ``load_valuehead_model`` (``verl/utils/model.py``), whatever the
critic's model config asks for, so a runner without flash-attn (no wheel for torch 2.11/CUDA 13
on PyPI) cannot run PPO at all. verl imports this module itself, in every process that builds
the critic's model config, through ``critic.model.external_lib`` (``HFModelConfig.__post_init__``;
the legacy FSDP workers import it before building the critic); importing it replaces that
function, in ``verl.utils.model`` and in any verl module that already bound the name, with one
that asks for SDPA. The trainperf child copies this file next to the run and puts it on the
path, and records ``critic_attention: sdpa`` in the result, so a baseline taken this way never
passes for a flash-attn one.

Standard library, verl and transformers only: it runs without trainperf on the path.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

ATTENTION = "sdpa"
MODULE_NAME = "trainperf_verl_sdpa_critic"  # the name it is imported under in the verl env


def load_valuehead_model_sdpa(local_path: Any, torch_dtype: Any, model_config: Any, trust_remote_code: bool) -> Any:
    """verl's first choice (a token-classification head, one score per token) with SDPA.

    verl falls back to trl's value-head wrapper for architectures without a token-classification
    class; every model in the catalogue has one, so a failure here is raised as it is."""
    from transformers import AutoModelForTokenClassification

    return AutoModelForTokenClassification.from_pretrained(
        pretrained_model_name_or_path=local_path,
        torch_dtype=torch_dtype,
        config=model_config,
        attn_implementation=ATTENTION,
        trust_remote_code=trust_remote_code,
    )


def install() -> bool:
    """Replace verl's loader unless flash-attn is importable; True when replaced."""
    if importlib.util.find_spec("flash_attn") is not None:
        return False
    import verl.utils.model as verl_model

    original = getattr(verl_model, "load_valuehead_model", None)
    if original is None:  # a verl that renamed it: say so rather than fail later on flash-attn
        raise ImportError(
            f"{MODULE_NAME}: verl.utils.model has no load_valuehead_model in this verl version; "
            "the PPO critic needs flash-attn here"
        )
    if original is load_valuehead_model_sdpa:
        return True
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if (name == "verl" or name.startswith("verl.")) and getattr(module, "load_valuehead_model", None) is original:
            module.load_valuehead_model = load_valuehead_model_sdpa  # type: ignore[attr-defined]
    return True


if __name__ == MODULE_NAME:  # imported by verl from the run's copy; as trainperf.workloads.* it only defines
    install()
