"""The headline that leads a run's summary, page and terminal table: cases judged and how, and the
ones cut, never run or skipped, so that a night a time limit cut short never reads as calm."""

from __future__ import annotations

from pathlib import Path

from trainperf.case_record import CaseRecord
from trainperf.report.build import write_reports
from trainperf.report.headline import headline
from trainperf.result import INTERRUPTED, NOT_RUN, CaseResult, Unjudged
from trainperf.stored_verdict import StoredVerdict


def _result(case_id: str, verdict: str, outcome: str = "ok", fails: bool = False) -> CaseResult:
    return CaseResult(
        case_id, CaseRecord(), "h100", outcome, verdict=StoredVerdict(verdict=verdict, fails=fails)
    )


RESULTS = [
    _result("a", "pass"),
    _result("b", "noisy"),
    _result("c", "regressed", fails=True),
    _result("d", "not-compared", outcome="skipped"),
]
UNJUDGED = [
    Unjudged("e", INTERRUPTED, "cut"),
    Unjudged("f", NOT_RUN, "never"),
    Unjudged("g", NOT_RUN, "never"),
]


def test_the_headline_counts_every_case_failing_verdicts_first() -> None:
    assert headline(RESULTS, UNJUDGED) == (
        "7 case(s): 3 judged (1 regressed, 1 noisy, 1 pass), 1 interrupted, 2 not run, 1 skipped"
    )
    assert headline(RESULTS[:1]) == "1 case(s): 1 judged (1 pass)"


def test_summary_and_page_lead_with_the_headline(tmp_path: Path) -> None:
    write_reports(tmp_path, RESULTS, "trainperf h100: night", ["f: not run in any shard"], UNJUDGED)
    summary = (tmp_path / "summary.md").read_text().splitlines()
    assert summary[:3] == ["# trainperf h100: night", "", f"**{headline(RESULTS, UNJUDGED)}**"]
    page = (tmp_path / "index.html").read_text()
    assert page.index('<p class="headline">') < page.index("<table")
    assert "7 case(s): 3 judged (1 regressed, 1 noisy, 1 pass)" in page


def test_every_case_of_the_selection_has_a_row_judged_or_not(tmp_path: Path) -> None:
    """A night a limit cut short lists its unjudged cases in the table, each with its state and why,
    not only in the notes under it."""
    write_reports(tmp_path, RESULTS, "trainperf h100: night", [], UNJUDGED)
    table = [line for line in (tmp_path / "summary.md").read_text().splitlines() if line.startswith("| ")]
    ids = [line.split(" | ")[0].removeprefix("| ") for line in table[1:]]
    assert ids == [*(r.case_id for r in RESULTS), *(c.case_id for c in UNJUDGED)]
    states = {line.split(" | ")[0].removeprefix("| "): line.split(" | ")[1] for line in table[1:]}
    assert states["e"] == "interrupted" and states["f"] == "not run"
    page = (tmp_path / "index.html").read_text()
    table_html = page[page.index("<table") : page.index("</table>")]
    assert table_html.count('<tr class="v-unjudged">') == len(UNJUDGED)
    assert "<td>interrupted</td>" in table_html


def test_the_headline_counts_why_cases_were_skipped_in_a_few_words() -> None:
    from trainperf.result import skip_cause

    missing = "environment 'verl-vllm' does not exist (no .venvs/verl-vllm/bin/python): create it with ..."
    skipped = [
        CaseResult("v1", CaseRecord(), "h100", "skipped", message=missing),
        CaseResult("v2", CaseRecord(), "h100", "skipped", message=missing),
        CaseResult("g", CaseRecord(), "h100", "skipped", message="needs 2 GPUs; this session sees 1"),
        CaseResult("n", CaseRecord(), "h100", "skipped"),
    ]
    assert headline(skipped) == (
        "4 case(s): 0 judged, 4 skipped (2 environment 'verl-vllm' does not exist, 1 needs 2 GPUs)"
    )
    assert skip_cause("x" * 80) == "x" * 57 + "..." and skip_cause("") == ""


def test_a_skipped_case_s_row_says_why_where_others_say_what_moved() -> None:
    from trainperf.report.table import COLUMNS, rows

    missing = "environment 'verl-vllm' does not exist (no .venvs/verl-vllm/bin/python): create it with ..."
    skipped = CaseResult("v1", CaseRecord(), "h100", "skipped", message=missing)
    (row,) = rows([skipped], COLUMNS)
    keys = [key for key, _ in COLUMNS]
    assert row[keys.index("change")] == "environment 'verl-vllm' does not exist"
    assert row[keys.index("outcome")] == "skipped"
