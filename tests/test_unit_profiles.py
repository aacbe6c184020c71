"""Unit tests of trainperf.synth.profiles: length pools, sampling and synthetic token ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainperf.errors import TrainperfError
from trainperf.synth.profiles import length_pool, load_profile, sample_lengths, synthetic_token_ids


@pytest.mark.parametrize("name", ["short", "long", "maxlen"])
def test_length_pool_mean_matches_published(name: str) -> None:
    profile = load_profile(name)
    pool = length_pool(profile)
    assert len(pool) == profile.pool_size
    assert abs(sum(pool) / len(pool) - profile.mean_tokens) < 0.5
    assert profile.min_tokens <= min(pool) and max(pool) <= profile.max_tokens


def test_shipped_profiles_published_means() -> None:
    assert load_profile("short").mean_tokens == 117
    assert load_profile("long").mean_tokens == 861


def test_maxlen_profile_is_one_length_at_every_cap() -> None:
    # The fidelity benchmark's overhead case relies on every batch having the same shape.
    profile = load_profile("maxlen")
    assert set(sample_lengths(profile, 200, max_seq_len=2048)) == {2048}
    assert set(sample_lengths(profile, 200, max_seq_len=1024)) == {1024}


def test_sample_lengths_deterministic_and_truncated() -> None:
    profile = load_profile("long")
    first = sample_lengths(profile, 64, max_seq_len=512)
    assert first == sample_lengths(profile, 64, max_seq_len=512)
    assert len(first) == 64
    assert max(first) == 512  # the long profile has many samples above 512 tokens
    untruncated = sample_lengths(profile, 64, max_seq_len=4096)
    assert [min(n, 512) for n in untruncated] == first
    assert max(untruncated) > 512


def test_sample_lengths_wraps_around_pool() -> None:
    profile = load_profile("short")
    lengths = sample_lengths(profile, profile.pool_size + 3, max_seq_len=2048)
    assert lengths[profile.pool_size :] == lengths[:3]


def test_synthetic_token_ids_range_and_determinism() -> None:
    lengths = [5, 300, 1, 0, 64]
    rows = synthetic_token_ids(lengths, vocab_size=50, first_regular_id=40, seed=3)
    assert [len(r) for r in rows] == lengths
    ids = [i for row in rows for i in row]
    assert min(ids) >= 40 and max(ids) < 50
    assert set(ids) == set(range(40, 50))  # 370 uniform draws cover all 10 regular ids
    assert rows == synthetic_token_ids(lengths, vocab_size=50, first_regular_id=40, seed=3)
    assert rows != synthetic_token_ids(lengths, vocab_size=50, first_regular_id=40, seed=4)


def test_synthetic_token_ids_no_room_raises() -> None:
    with pytest.raises(TrainperfError):
        synthetic_token_ids([3], vocab_size=10, first_regular_id=10, seed=0)


def test_missing_profile_is_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(TrainperfError) as info:
        load_profile("nope", tmp_path)
    message = str(info.value)
    assert "'nope'" in message and "other" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        json.dumps({"name": "bad", "mean_tokens": 100}),  # missing fields
        json.dumps(
            {
                "name": "bad",
                "mean_tokens": "many",
                "max_tokens": 10,
                "min_tokens": 1,
                "sigma": 0.5,
                "pool_size": 10,
                "seed": 1,
            }
        ),
        json.dumps([1, 2, 3]),
        json.dumps(
            {
                "name": "bad",
                "mean_tokens": 900,
                "max_tokens": 512,
                "min_tokens": 8,
                "sigma": 0.5,
                "pool_size": 10,
                "seed": 1,
            }
        ),
        json.dumps(
            {
                "name": "bad",
                "mean_tokens": 100,
                "max_tokens": 512,
                "min_tokens": 8,
                "sigma": -1,
                "pool_size": 10,
                "seed": 1,
            }
        ),
    ],
)
def test_invalid_profile_is_one_line_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(TrainperfError) as info:
        load_profile("bad", tmp_path)
    message = str(info.value)
    assert "bad.json" in message
    assert "\n" not in message
