"""The rule reward verl loads by path (``reward.custom_reward_function.path``; 0.7:
``custom_reward_function.path``) for the synthetic GSM8K-shaped data.

Standard library only and self-contained: verl imports this file in its reward workers, in
the verl environment, without trainperf on the path. Deterministic: 1.0 when the response's
last word is the ground-truth word, 0.1 when that word appears anywhere, else 0.0 (a shaped
rule in the spirit of GSM8K's format/answer scores, cheap enough never to show up in timing).
"""

from __future__ import annotations

from typing import Any


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **kwargs: Any
) -> float:
    words = solution_str.split()
    if words and words[-1] == ground_truth:
        return 1.0
    return 0.1 if ground_truth in words else 0.0
