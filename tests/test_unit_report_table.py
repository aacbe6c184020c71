"""Unit tests of trainperf.report.table: the summary table (reference string) and failure details."""

from __future__ import annotations

from trainperf.case_record import CaseRecord
from trainperf.judge.compare import compare_case
from trainperf.judge.metrics import with_tolerances
from trainperf.limits_record import Limits
from trainperf.memory_estimate import GIB, MemoryEstimate
from trainperf.report.table import failure_detail, render_markdown, render_text
from trainperf.result import CaseResult, MetricValue
from trainperf.stored_verdict import StoredMetricVerdict, StoredVerdict


def _result(
    case_id: str,
    outcome: str,
    metrics: dict[str, float],
    verdict: StoredVerdict,
    estimate_gib: float | None = None,
    limits: Limits | None = None,
) -> CaseResult:
    units = {"step_time_s": "s", "tokens_per_s": "tok/s", "peak_allocated_gib": "GiB"}
    return CaseResult(
        case_id=case_id,
        case=CaseRecord(),
        gpu_class="cpu",
        outcome=outcome,
        metrics={name: MetricValue(value, units.get(name, "")) for name, value in metrics.items()},
        verdict=verdict,
        estimate=MemoryEstimate(0.0, 0.0, 0.0, 0, estimate_gib * GIB) if estimate_gib is not None else None,
        limits=limits,
    )


RESULTS = [
    _result(
        "sft_hf-qwen3_tiny-lora-short-b4",
        "ok",
        {
            "step_time_s": 1.25,
            "tokens_per_s": 1600.0,
            "peak_allocated_gib": 1.5,
            "energy_per_token_j": 0.0123,
            "power_mean_w": 450.0,
        },
        StoredVerdict(
            verdict="regressed", metrics=[StoredMetricVerdict("step_time_s", "regressed", ratio=1.25)]
        ),
        limits=Limits(mfu=None, mfu_note="n/a: the class's hardware file gives no bf16_dense_tflops peak"),
    ),
    _result(
        "sft_hf-qwen3_32b-full-short-b2",
        "oom",
        {"peak_allocated_gib": 78.91},
        StoredVerdict(verdict="expected-oom"),
        estimate_gib=262.4,
    ),
]

REFERENCE = """\
case                             outcome  verdict       step s  tok/s  samples/h  MFU  alloc GiB  est GiB  dev GiB  J/tok   W mean  vs baseline
-------------------------------  -------  ------------  ------  -----  ---------  ---  ---------  -------  -------  ------  ------  -----------
sft_hf-qwen3_tiny-lora-short-b4  ok       regressed     1.250   1,600  -          n/a  1.500      -        -        0.0123  450.0   step +25.0%
sft_hf-qwen3_32b-full-short-b2   oom      expected-oom  -       -      -          -    78.9       262.4    -        -       -       -"""


def test_render_text_reference() -> None:
    assert render_text(RESULTS) == REFERENCE


def test_render_markdown_rows() -> None:
    text = render_markdown(RESULTS, "trainperf: run-1", details=["detail line"])
    lines = text.splitlines()
    assert lines[0] == "# trainperf: run-1"
    assert lines[3] == "|" + "---|" * 13
    assert lines[4].startswith("| sft_hf-qwen3_tiny-lora-short-b4 | ok | regressed | 1.250 | 1,600 |")
    assert lines[-1] == "detail line"


def test_failure_detail_lists_gated_metric_only() -> None:
    def case(step: float, power: float) -> CaseResult:
        return CaseResult(
            case_id="c",
            case=CaseRecord(),
            gpu_class="cpu",
            outcome="ok",
            metrics={"step_time_s": MetricValue(step, "s"), "power_mean_w": MetricValue(power, "W")},
        )

    baseline, current = case(1.0, 300.0), case(1.25, 450.0)
    verdict = compare_case(current, baseline, with_tolerances({}), expectation="ok", timing_comparable=True)
    current.verdict = verdict.stored()
    # Both changed beyond tolerance; power_mean_w is informational (gated=False).
    assert {m.metric: m.verdict for m in current.verdict.metrics} == {
        "step_time_s": "regressed",
        "power_mean_w": "regressed",
    }
    lines = failure_detail(current)
    assert lines[0] == "c: regressed - regressed: step_time_s +25.0%"
    assert lines[1:] == ["    step_time_s: 1.000 -> 1.250 (+25.0%) [regressed]"]


def test_failure_detail_environment_drift() -> None:
    result = _result(
        "c",
        "ok",
        {},
        StoredVerdict(
            verdict="pass", reason="within tolerance", environment_changes=[("torch", "2.12.0", "2.13.0")]
        ),
    )
    assert failure_detail(result) == ["c: pass - within tolerance", "    environment: torch 2.12.0 -> 2.13.0"]


def test_the_h100_matrix_fits_100_columns_with_whole_ids_and_says_what_it_left_out() -> None:
    from trainperf.paths import REPO_ROOT
    from trainperf.store.results import load_result

    results = [load_result(path) for path in sorted((REPO_ROOT / "baselines" / "h100").glob("*.json"))]
    text = render_text(results, 100)
    lines = text.splitlines()
    ids = {result.case_id for result in results}
    assert all(len(line) <= 100 or line in ids for line in lines)  # an id longer than that stands alone
    assert all(any(line.startswith(case_id) for line in lines) for case_id in ids)  # every id, whole
    assert all(title in lines[0] for title in ("case", "verdict", "step s", "vs baseline"))
    assert "left out to fit 100 columns: W mean, J/tok" in " ".join(lines[-3:])
    assert render_text(RESULTS, 1000) == REFERENCE  # room enough: nothing left out or wrapped
    narrow = render_text(RESULTS, 60).splitlines()
    assert narrow[0].split() == ["case", "verdict", "step", "s", "vs", "baseline"]
