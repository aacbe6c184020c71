"""The order a night's cases reach a host's xdist workers: the longest first, the shortest beside it in
each worker's first chunk, every worker reaching the same order; and the wall time it projects."""

from __future__ import annotations

import dataclasses
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


# The 2026-11-29 h200 night on four H200s (its 12 cases' measured wall seconds): one 2-GPU case.
NIGHT_H200 = {
    "verl-ppo-mb8": 379.9,
    "verl-grpo-vllm": 613.3,
    "verl-grpo-sglang": 645.4,
    "unsloth-8b-short": 153.0,
    "trl-full": 43.5,
    "trl-lora": 54.4,
    "hf-lora-short": 62.3,
    "hf-qlora-short": 52.9,
    "hf-full-short": 42.1,
    "hf-qlora-long": 81.2,
    "hf-full-long": 69.1,
    "hf-lora-short-gpus2": 42.0,
}


def test_a_two_gpu_case_counts_on_both_its_gpus() -> None:
    """That night's 2-GPU case held two GPUs: the projection counts it on its worker's and the next."""
    gpus = {"hf-lora-short-gpus2": 2}
    order = worker_order(NIGHT_H200, 4)
    bound = max(max(NIGHT_H200.values()), (sum(NIGHT_H200.values()) + 42.0) / 4)
    paired, single = projected_wall_s(order, NIGHT_H200, 4, gpus), projected_wall_s(order, NIGHT_H200, 4)
    assert single <= paired <= bound * 1.1
    assert projected_wall_s(["w", "a"], {"w": 10.0, "a": 5.0}, 2, {"w": 2}) == 15.0  # a waits for the pair
    assert projected_wall_s(["a", "b", "w"], {"w": 10.0, "a": 5.0, "b": 1.0}, 2, {"w": 2}) == 15.0  # later on


def test_a_case_the_host_skips_is_neither_dealt_nor_weighed() -> None:
    """The 2026-11-30 night projected 21.0 minutes with an 8-GPU case it skipped at the start counted
    at a 10-minute default; a 2-GPU case counts on both its GPUs."""
    from types import SimpleNamespace

    import pytest

    from trainperf.case import Case
    from trainperf.fleet.session_share import _order_for_workers
    from trainperf.fleet.shard import Expected

    def item(case: Case, skipped: bool = False) -> SimpleNamespace:
        mark = pytest.mark.skip(reason="needs 8 GPUs; this session sees 4").mark if skipped else None
        return SimpleNamespace(
            callspec=SimpleNamespace(params={"case": case}), get_closest_marker=lambda _n: mark
        )

    base = Case(family="sft_hf", model="qwen3_8b", method="lora", profile="short", batch_size=4)
    cases = [dataclasses.replace(base, batch_size=size) for size in (1, 2, 3)]
    wide, huge = dataclasses.replace(base, gpus=2), dataclasses.replace(base, gpus=8)
    items = [item(case) for case in cases] + [item(wide), item(huge, skipped=True)]
    keyed = {id(it): it.callspec.params["case"].id for it in items}
    seconds = dict(zip(keyed.values(), (300.0, 200.0, 100.0, 60.0, 600.0), strict=True))
    expected = {key: Expected(value, "baseline") for key, value in seconds.items()}
    lines: list[str] = []
    record = _order_for_workers(items, keyed, expected, 4, lines, lambda it: it.callspec.params["case"])
    said = (
        "trainperf: 4 case(s) dealt to 4 workers, the longest first: projected 6.0 min wall for 12.0 GPU-min"
    )
    assert lines == [f"{said} (longest case 5.0 min)"]
    assert record["projected_wall_s"] == 360.0  # the 2-GPU case, last in the round, on GPUs 3 and 0
    assert items[0].get_closest_marker("skip") is not None  # left in front: it costs nothing
