"""The OOM-cliff search of a case: probes launched through the case runner, recorded as they end,
replayed on --perf-resume, and the found cliff gated against the stored one."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from trainperf.case import Case, Outcome
from trainperf.cliff_record import CliffRecord
from trainperf.families import family_of
from trainperf.jsonio import append_jsonl, read_jsonl
from trainperf.judge.compare import CaseVerdict, Verdict
from trainperf.plan.cliff import (
    Cliff,
    Probe,
    ProbeFailed,
    confirm_cliff,
    confirmed,
    find_cliff,
    validate_range,
    verify_cliff,
)
from trainperf.result import CaseResult, MetricValue
from trainperf.run.runner_port import CaseReport, RunnerPort

# A cliff probe runs two steps: the optimizer states are allocated in the first, so the second
# meets them together with a full forward and backward; a fit is not timed. The cliff is that of
# these first batches of the (deterministic) data. A third step cost ~30 s a probe near a cliff
# at batch 95 on an H200, where a search took over 10 minutes; a session with a time limit of its
# own gives it as --perf-budget, and a search cut by it goes on with --perf-resume.
CLIFF_STEPS = 2
# Probes the estimate puts this far over the device are not launched (its error on the
# measured cases stayed within 12%).
ESTIMATE_SKIP_FACTOR = 1.25


class CliffSearch:
    """One search of ``case`` along ``axis``: each probe a fresh child, written down as it ends."""

    def __init__(self, runner: RunnerPort, case: Case, axis: str) -> None:
        self.runner, self.case, self.axis = runner, case, axis
        self.ctx = runner.ctx
        self.cliff_id = f"{case.id}-cliff-{axis}"
        self.steps = case.steps or CLIFF_STEPS
        self.limit_gib = case.memory_cap_gib or self.ctx.gpu_class.memory_gib
        # Every probe is written down as it ends; with --perf-resume the search replays them in
        # order (it is deterministic given the outcomes) and launches only what is still unknown,
        # so a search cut short by a time limit loses nothing.
        self.probes_path = self.ctx.folder.probes_path(self.cliff_id)
        self.recorded = read_probes(self.probes_path) if self.ctx.settings.resume is not None else []
        self.probes_path.parent.mkdir(parents=True, exist_ok=True)
        if not self.recorded:
            self.probes_path.write_text("")
        self.launches = 0
        self.started = time.monotonic()
        self.verified = False
        """The stored cliff held at both edges: no search was needed."""

    def probe(self, value: int) -> Probe:
        if self.recorded and self.recorded[0].value == value:
            replayed = self.recorded.pop(0)
            self.ctx.say(
                f"[trainperf] {self.cliff_id}: {self.axis}={value} {replayed.outcome} (recorded, not re-run)"
            )
            return replayed
        self.recorded.clear()  # the search left the recorded path: launch from here on
        probe_case = self.case.replace(**{self.axis: value})
        probed = self.runner.run_probe(probe_case, self.steps, settled_by=self.cliff_id)
        self.launches += 1
        fits = probed.outcome == Outcome.OK.value
        self.ctx.say(
            f"[trainperf] {self.cliff_id}: probe {self.launches}, {self.axis}={value}: "
            f"{'fits' if fits else probed.outcome}, {time.monotonic() - self.started:.0f}s so far"
        )
        wall_s = round(sum(run.wall_s or 0.0 for run in probed.runs), 1)
        result = Probe(value, fits, probed.outcome, probed.message[:300], wall_s)
        append_jsonl(self.probes_path, asdict(result))
        return result

    def predicted_oom(self, value: int) -> str | None:
        if not self.ctx.on_gpu:
            return None
        probe_case = self.case.replace(**{self.axis: value})
        family = family_of(probe_case.family)
        if over := family.memory_floor(probe_case, self.limit_gib):
            return over  # a lower bound over the device: no launch can fit (confirmations still run)
        estimated = family.memory_estimate(probe_case, self.steps)
        if estimated and estimated.total_gib > ESTIMATE_SKIP_FACTOR * self.limit_gib:
            return (
                f"estimate {estimated.total_gib:.0f} GiB > {ESTIMATE_SKIP_FACTOR} x {self.limit_gib:.0f} GiB"
            )
        return None

    def search(self, low: int, high: int, stored: CliffRecord | None = None) -> tuple[Cliff, list[Probe]]:
        """The stored cliff verified at its edges when there is one, else (or when it moved) the full
        search and its confirmation. A verified cliff's checks are its verification probes."""
        interpreter = self.runner.interpreter(self.case)

        def rejected(value: int) -> str | None:
            return self.runner.rejection(self.case.replace(**{self.axis: value}), interpreter)

        known: dict[int, Probe] = {}
        if stored is not None:
            verified, checks = verify_cliff(
                stored, self.probe, predicted_oom=self.predicted_oom, rejected=rejected
            )
            if verified is not None:
                self.verified = True
                return verified, checks
            known = {check.value: check for check in checks}
            self.ctx.say(f"[trainperf] {self.cliff_id}: the stored cliff moved; searching {low}..{high}")
        cliff = find_cliff(
            self.axis, low, high, self.probe, predicted_oom=self.predicted_oom, rejected=rejected, known=known
        )
        return cliff, confirm_cliff(cliff, self.probe)


def run_cliff(runner: RunnerPort, case: Case, axis: str, low: int, high: int) -> CaseReport:
    """Find the OOM cliff of ``case`` along ``axis`` and gate it against the stored cliff."""
    ctx = runner.ctx
    validate_range(axis, low, high)
    search = CliffSearch(runner, case, axis)
    baseline, judged_against = runner.baseline_of(search.cliff_id, from_history=False, family=case.family)
    result = runner.new_result(case)
    result.case_id = search.cliff_id
    stored = _stored_cliff(baseline, axis, low, high) if not ctx.settings.update_baselines else None
    ctx.say(
        f"[trainperf] {search.cliff_id}: "
        + (
            f"verifying the stored cliff ({stored.summary or 'stored'})"
            if stored
            else f"searching {axis} in {low}..{high}"
        )
    )
    found: tuple[Cliff, list[Probe]] | None = None
    try:
        found = search.search(low, high, stored)
    except ProbeFailed as exc:
        result.outcome, result.message = Outcome.CRASH.value, f"cliff search stopped: {exc}"
        verdict = runner.judge(case, result, baseline)
    else:
        verdict = _judge_cliff(runner, case, result, baseline, *found)
        if result.cliff is not None:
            result.cliff.verified = search.verified
    result.verdict = verdict.stored()
    result.verdict.judged_against = judged_against
    runner.keep(result, verdict)
    report = CaseReport(case, result, verdict)
    if found is not None and result.cliff:
        cliff, checks = found
        skipped = sum(1 for p in result.cliff.probes if p.outcome == "skipped-by-estimate")
        if search.verified:
            report.notes.append(
                f"{cliff.describe()}; the stored cliff verified at its edges with "
                f"{search.launches} launches, no search"
            )
            return runner.conclude(report)
        report.notes.append(
            f"{cliff.describe()}; {result.cliff.launched} launches + {len(checks)} confirmation runs, "
            f"{skipped} probes skipped by the estimate; confirmed: "
            f"{'yes' if result.cliff.confirmed else 'NO'}"
        )
    return runner.conclude(report)


def _judge_cliff(
    runner: RunnerPort,
    case: Case,
    result: CaseResult,
    baseline: CaseResult | None,
    cliff: Cliff,
    checks: list[Probe],
) -> CaseVerdict:
    """The cliff as the result's one metric, judged; an unconfirmed cliff is noisy at best."""
    result.cliff = cliff.record(checks, confirmed(cliff, checks))
    largest = float(cliff.largest_fit or 0)
    result.metrics = {f"cliff_{cliff.axis}": MetricValue(largest, "", per_run=[largest])}
    verdict = runner.judge(case, result, baseline)
    if not result.cliff.confirmed and verdict.verdict in (Verdict.PASS, Verdict.NEW, Verdict.IMPROVED):
        verdict.verdict, verdict.fails = Verdict.NOISY, runner.ctx.settings.strict
        verdict.reason = f"cliff not confirmed by fresh runs at its edges ({cliff.describe()})"
    return verdict


def _stored_cliff(baseline: CaseResult | None, axis: str, low: int, high: int) -> CliffRecord | None:
    """The baseline's cliff when it was searched over the same axis and range (then it is verified,
    not searched again)."""
    stored = baseline.cliff if baseline is not None else None
    if stored is None or (stored.axis, stored.low, stored.high) != (axis, low, high):
        return None
    return stored


def read_probes(path: Any) -> list[Probe]:
    """Probes a cut-short search wrote down; a torn last line is dropped."""
    probes = []
    for record in read_jsonl(path):
        try:
            probes.append(Probe.from_dict(record))
        except (KeyError, TypeError, ValueError):
            break
    return probes
