"""Kernel and operator names to categories: one ordered list serves GPU kernels and CPU ops alike.

Order matters: the first pattern that matches wins (a flash-attention kernel is built with
cutlass, so attention is tried before matmul; ``addmm`` is a matmul before it is an ``add``).
Copy kernels count as memory traffic, like memcpy/memset, except those that change a tensor's dtype
(``LoadWithCast``/``StoreWithCast`` templates, ``bfloat16_copy_kernel``...): dtype conversions.
Anything launched inside an ``Optimizer.step`` region is ``optimizer`` whatever its name
(``analysis.py`` does that).
"""

from __future__ import annotations

import re

ELEMENTWISE = (
    r"elementwise|vectorized|unrolled|"
    r"aten::(add|mul|sub|div|silu|gelu|exp|pow|neg|where|sigmoid|tanh|rsqrt|clamp|embedding|index|masked|relu|sqrt)"
)
CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("communication", r"nccl|c10d|gloo|all_?reduce|all_?gather|reduce_?scatter|broadcast_"),
        ("optimizer", r"adam|optimizer|sgd"),
        ("quantization", r"dequant|quantiz|4bit|bnb|nf4|kgemm"),
        # A copy that changes the dtype: the cast's load/store templates, or a dtype's own copy kernel.
        ("conversion", r"withcast|bfloat16_copy_kernel|float16_copy_kernel|half_copy_kernel"),
        ("attention", r"flash|fmha|attention|sdpa|scaled_dot_product"),
        ("matmul", r"gemm|gemv|xmma|nvjet|cutlass|cublas|matmul|aten::mm$|addmm|bmm|aten::linear"),
        (
            "reduction/norm",
            r"norm|softmax|reduce|aten::sum|aten::mean|aten::max|cross_entropy|nll_loss|argmax",
        ),
        ("memory", r"memcpy|memset|copy|fill|zero_|aten::cat|catarray|aten::to$|_to_copy|clone|contiguous"),
        ("elementwise", ELEMENTWISE),
    )
)
OTHER = "other"


def categorise(name: str) -> str:
    lowered = name.lower()
    for category, pattern in CATEGORIES:
        if pattern.search(lowered):
            return category
    return OTHER


def short_name(name: str, width: int = 90) -> str:
    """A kernel's name without ``void`` and long template arguments, for tables."""
    text = name.removeprefix("void ")
    if "<" in text and len(text) > width:
        text = text[: text.index("<")] + "<...>"
    return text if len(text) <= width else text[: width - 3] + "..."
