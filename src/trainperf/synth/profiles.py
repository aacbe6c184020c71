"""Sequence-length profiles (``fixtures/datasets/*.json``) and deterministic synthetic token data.

Pure Python (no torch, no numpy): the parent imports it for estimates and the tests run it
anywhere. Every random draw comes from ``random.Random`` seeded by the profile, so the
same profile gives the same samples on every machine and every release of the suite.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.paths import FIXTURES_DIR

DATASETS_DIR = FIXTURES_DIR / "datasets"


@dataclass(frozen=True, slots=True, kw_only=True)
class LengthProfile:
    name: str
    mean_tokens: float
    """Mean token count after truncation at ``max_tokens`` (the published figure)."""
    max_tokens: int
    min_tokens: int
    sigma: float
    """Shape of the log-normal length distribution."""
    pool_size: int
    seed: int
    provenance: str


def load_profile(name: str, directory: Path = DATASETS_DIR) -> LengthProfile:
    path = directory / f"{name}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in directory.glob("*.json"))) or "none"
        raise TrainperfError(f"no length profile '{name}' in {directory} (known: {known}); add {path}")
    try:
        raw = json.loads(path.read_text())
        profile = LengthProfile(
            name=raw["name"],
            mean_tokens=float(raw["mean_tokens"]),
            max_tokens=int(raw["max_tokens"]),
            min_tokens=int(raw["min_tokens"]),
            sigma=float(raw["sigma"]),
            pool_size=int(raw["pool_size"]),
            seed=int(raw["seed"]),
            provenance=str(raw.get("provenance", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TrainperfError(
            f"{path} is not a valid length profile ({exc}); compare with fixtures/datasets/long.json"
        )
    # A mean outside the bounds cannot be solved for: the pool would quietly miss it.
    if (
        not 1 <= profile.min_tokens <= profile.mean_tokens <= profile.max_tokens
        or profile.sigma < 0
        or profile.pool_size < 1
    ):
        raise TrainperfError(
            f"{path}: need 1 <= min_tokens <= mean_tokens <= max_tokens, sigma >= 0 and pool_size >= 1 "
            f"(got {profile.min_tokens} <= {profile.mean_tokens:g} <= {profile.max_tokens}, sigma {profile.sigma:g}, "
            f"pool {profile.pool_size}); for one fixed length set all three to it and sigma to 0, as maxlen.json does"
        )
    return profile


def _standard_normals(rng: random.Random, count: int) -> list[float]:
    # Box-Muller on rng.random(): unlike random.gauss this is fixed by our code alone.
    normals: list[float] = []
    while len(normals) < count:
        u1 = rng.random() or 1e-12
        u2 = rng.random()
        radius = math.sqrt(-2.0 * math.log(u1))
        normals.append(radius * math.cos(2 * math.pi * u2))
        normals.append(radius * math.sin(2 * math.pi * u2))
    return normals[:count]


def _truncated_lengths(normals: list[float], mu: float, profile: LengthProfile) -> list[int]:
    return [
        min(profile.max_tokens, max(profile.min_tokens, round(math.exp(mu + profile.sigma * z))))
        for z in normals
    ]


def length_pool(profile: LengthProfile) -> list[int]:
    """``pool_size`` lengths whose mean after truncation equals ``mean_tokens`` (to 0.5 token).

    The log-normal's location is found by bisection over the fixed pool, so the published
    mean holds exactly however many samples a case draws from the pool.
    """
    normals = _standard_normals(random.Random(profile.seed), profile.pool_size)
    low, high = (
        math.log(profile.min_tokens) - 3 * profile.sigma,
        math.log(profile.max_tokens) + 3 * profile.sigma,
    )
    for _ in range(100):
        mid = (low + high) / 2
        mean = sum(_truncated_lengths(normals, mid, profile)) / profile.pool_size
        if abs(mean - profile.mean_tokens) < 0.5:
            break
        low, high = (mid, high) if mean < profile.mean_tokens else (low, mid)
    return _truncated_lengths(normals, mid, profile)


def sample_lengths(profile: LengthProfile, count: int, max_seq_len: int) -> list[int]:
    """The first ``count`` lengths of the profile's deterministic order, truncated at ``max_seq_len``."""
    pool = length_pool(profile)
    order = list(range(len(pool)))
    random.Random(profile.seed + 1).shuffle(order)
    return [min(pool[order[i % len(pool)]], max_seq_len) for i in range(count)]


def synthetic_token_ids(
    lengths: list[int], vocab_size: int, first_regular_id: int, seed: int
) -> list[list[int]]:
    """One list of uniform random token ids per length; ids below ``first_regular_id`` are specials."""
    if vocab_size <= first_regular_id:
        raise TrainperfError(
            f"vocabulary of {vocab_size} leaves no room beside {first_regular_id} special tokens"
        )
    rows = []
    for index, length in enumerate(lengths):
        rng = random.Random(seed * 1_000_003 + index)
        rows.append([rng.randrange(first_regular_id, vocab_size) for _ in range(length)])
    return rows
