"""A tiny test package built in several versions, one of which starts to cost time (``trainperf bisect``).

``tpbisect-probe`` plays a library that instruments PyTorch models, as monitoring and
profiling libraries do: a ``.pth`` file makes every interpreter of an environment that holds it
register a global forward hook once torch has been imported (a finder on ``sys.meta_path``
waits for it, so the hook costs nothing in a process without torch, such as the parent's
version probes). From ``slow_from`` on, the hook sleeps on every forward of a causal language
model: one planted, honest cost per training step, in the version that introduced it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGE = "tpbisect-probe"

HOOK = '''\
"""Registers the forward hook of tpbisect_probe once torch is importable (see its .pth file)."""
import sys

COST_S = {cost_s!r}


def _hook(module, args, output):
    if COST_S and type(module).__name__.endswith("ForCausalLM"):
        import time

        time.sleep(COST_S)


class _WaitForTorch:
    def find_spec(self, name, path=None, target=None):
        module = sys.modules.get("torch.nn.modules.module")
        register = getattr(module, "register_module_forward_hook", None)
        if register is not None:
            sys.meta_path.remove(self)
            register(_hook)
        return None


sys.meta_path.insert(0, _WaitForTorch())
'''

SETUP = '''\
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class WithPth(build_py):
    """Ship tpbisect_probe.pth at the top of site-packages, next to the module it imports."""

    def run(self):
        super().run()
        Path(self.build_lib, "tpbisect_probe.pth").write_text("import _tpbisect_probe_hook\\n")


setup(
    name="tpbisect-probe",
    version={version!r},
    py_modules=["_tpbisect_probe_hook", "tpbisect_probe"],
    cmdclass={{"build_py": WithPth}},
)
'''


# The public module; a broken version fails to import it the way a library fails beside a newer
# release of one it builds on (an API that was removed).
PUBLIC = "from transformers import PreTrainedModel\n"
BROKEN = "from transformers import HybridCacheRemovedLongAgo  # noqa: F401\n"


def build_versions(
    folder: Path, versions: list[str], slow_from: str, cost_s: float, broken: frozenset[str] = frozenset()
) -> Path:
    """Wheels of every version in ``folder/wheelhouse``; versions from ``slow_from`` on sleep ``cost_s``
    per forward of a causal LM; ``broken`` versions cannot be imported. Returns the wheelhouse."""
    wheelhouse = folder / "wheelhouse"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    slow = False
    for version in versions:
        slow = slow or version == slow_from
        source = folder / f"src-{version}"
        source.mkdir(parents=True, exist_ok=True)
        (source / "_tpbisect_probe_hook.py").write_text(HOOK.format(cost_s=cost_s if slow else 0.0))
        (source / "tpbisect_probe.py").write_text(BROKEN if version in broken else PUBLIC)
        (source / "setup.py").write_text(SETUP.format(version=version))
        (source / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n')
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
             "--wheel-dir", str(wheelhouse), str(source)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    return wheelhouse
