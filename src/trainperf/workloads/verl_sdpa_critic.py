"""Let verl's PPO critic load with PyTorch SDPA where flash-attn is not installed (verl env side).

verl (0.7 to 0.9.1 at least) writes ``attn_implementation="flash_attention_2"`` into both
``from_pretrained`` calls of ``load_valuehead_model`` (``verl/utils/model.py``), whatever the
critic's model config asks for, so a runner without flash-attn (no wheel for torch 2.11/CUDA 13
on PyPI) cannot run PPO at all. verl imports this module itself, from its package ``__init__``
in every process (the driver and each Ray worker), when ``VERL_USE_EXTERNAL_MODULES`` names it;
importing it replaces that function, in ``verl.utils.model`` and in any verl module that bound
the name, with one that asks for SDPA (at once if ``verl.utils.model`` is loaded, else right
after it loads). ``critic.model.external_lib`` is not enough: verl builds the critic's config in
the driver and ships it to the worker pickled, so the import never runs there (seen on an
H100). The trainperf child copies this file next to the run, puts it on the path and sets the
variable, and records ``critic_attention: sdpa`` in the result, so a baseline taken this way
never passes for a flash-attn one.

Standard library, verl and transformers only: it runs without trainperf on the path.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import Any

ATTENTION = "sdpa"
MODULE_NAME = "trainperf_verl_sdpa_critic"  # the name it is imported under in the verl env
TARGET = "verl.utils.model"


def load_valuehead_model_sdpa(
    local_path: Any, torch_dtype: Any, model_config: Any, trust_remote_code: bool
) -> Any:
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


def _replace_loaded() -> None:
    """Swap the loader in verl.utils.model and in every verl module that bound it already."""
    verl_model = sys.modules[TARGET]
    original = getattr(verl_model, "load_valuehead_model", None)
    if original is None:  # a verl that renamed it: say so rather than fail later on flash-attn
        raise ImportError(
            f"{MODULE_NAME}: verl.utils.model has no load_valuehead_model in this verl version; "
            "the PPO critic needs flash-attn here"
        )
    if original is load_valuehead_model_sdpa:
        return
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if (name == "verl" or name.startswith("verl.")) and getattr(
            module, "load_valuehead_model", None
        ) is original:
            module.load_valuehead_model = load_valuehead_model_sdpa  # type: ignore[attr-defined]


class _PatchAfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs verl.utils.model's own loader, then swaps the function, before anyone imports it.

    verl imports this module from its own ``__init__`` (``VERL_USE_EXTERNAL_MODULES``), in the
    driver and in every Ray worker, when ``verl.utils.model`` cannot be imported yet (it needs
    the half-initialised package); this finder waits for it."""

    def __init__(self) -> None:
        self._inner: importlib.abc.Loader | None = None

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET or self._inner is not None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._inner.create_module(spec) if self._inner else None

    def exec_module(self, module: Any) -> None:
        assert self._inner is not None
        try:
            self._inner.exec_module(module)
            _replace_loaded()
        finally:
            sys.meta_path[:] = [finder for finder in sys.meta_path if finder is not self]


def install() -> bool:
    """Replace verl's loader unless flash-attn is importable; True when replaced or scheduled."""
    if importlib.util.find_spec("flash_attn") is not None:
        return False
    if TARGET in sys.modules:
        _replace_loaded()
    elif not any(isinstance(finder, _PatchAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchAfterImport())
    return True


if __name__ == MODULE_NAME:  # imported by verl from the run's copy; as trainperf.workloads.* it only defines
    install()
