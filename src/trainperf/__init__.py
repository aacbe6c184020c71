"""trainperf: a pytest-based performance regression suite for LLM post-training on GPUs.

The parent side (plugin, launcher, monitor, comparison, reports) never imports torch;
the training stack runs only in child processes (``trainperf.workloads``).
"""

__version__ = "0.1.0"
