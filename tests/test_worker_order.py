"""The order a night's cases reach a host's xdist workers: the longest first, the shortest beside it in
each worker's first chunk, every worker reaching the same order; and the wall time it projects."""

from __future__ import annotations

import random

from trainperf.fleet.worker_order import first_chunk, projected_wall_s, worker_order

# The 2026-11-28 h100 night on four H100s (hf, TRL and unsloth cases), each case's measured wall seconds,
# in the catalogue's order: its longest case came last.
NIGHT = {
    "rl_trl-3b-lora": 74.9,
    "rl_trl-3b-full": 41.2,
    "sft_hf-8b-lora-short": 59.8,
    "sft_hf-8b-lora-long": 70.6,
    "sft_hf-8b-qlora-short": 50.1,
    "sft_hf-8b-full-short": 32.3,
    "sft_hf-32b-full-short": 28.8,
    "sft_hf-8b-lora-short-gpus2": 58.4,
    "sft_unsloth-8b-short-b4": 87.6,
    "sft_unsloth-8b-short-b32": 160.4,
    "sft_unsloth-32b-long-b32": 339.9,
}


def test_the_longest_case_starts_first_and_the_night_ends_near_its_bound() -> None:
    order = worker_order(NIGHT, 4)
    assert sorted(order) == sorted(NIGHT) and order[0] == "sft_unsloth-32b-long-b32"
    # Eleven cases on four workers: a first chunk of two each; the shortest case rides with the longest.
    assert first_chunk(len(order), 4) == 2 and order[1] == "sft_hf-32b-full-short"
    bound = max(max(NIGHT.values()), sum(NIGHT.values()) / 4)
    dealt = projected_wall_s(order, NIGHT, 4)
    catalogue = projected_wall_s(list(NIGHT), NIGHT, 4)
    assert dealt <= bound * 1.1 < catalogue  # 368.7 s against a bound of 339.9; in the catalogue order 456.0


def test_fewer_than_two_cases_a_worker_are_dealt_one_each_the_longest_second_beside_the_shortest_first() -> (
    None
):
    expected = {"a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0}
    order = worker_order(expected, 4)
    assert first_chunk(5, 4) == 1
    assert order == ["d", "c", "b", "a", "e"]  # worker 0 runs d, then e: the shortest pair
    assert projected_wall_s(order, expected, 4) == 5.0
    assert worker_order(expected, 1) == ["a", "b", "c", "d", "e"]
    assert worker_order({}, 4) == [] and projected_wall_s([], {}, 4) == 0.0


def test_a_large_night_keeps_every_case_once_balances_the_workers_and_is_the_same_on_every_worker() -> None:
    rng = random.Random(7)
    expected = {f"case-{i:02d}": rng.uniform(20, 600) for i in range(60)}
    order = worker_order(expected, 4)
    assert first_chunk(60, 4) == 3  # a quarter of each worker's share
    assert sorted(order) == sorted(expected)
    assert order == worker_order(dict(reversed(list(expected.items()))), 4)  # the input's order is not read
    bound = max(max(expected.values()), sum(expected.values()) / 4)
    assert projected_wall_s(order, expected, 4) <= bound * 1.05
