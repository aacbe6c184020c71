"""A result's case and effective configuration (``trainperf.case_record``, ``trainperf.config_record``),
fingerprint and published reference lines (``trainperf.fingerprint_record``,
``trainperf.reference_record``) and its verdict's diagnosis and trace diff
(``trainperf.diagnosis_record``): typed fields, read from and written back to the JSON objects results
and baselines have always stored, key for key."""

from __future__ import annotations

import json
from pathlib import Path

from trainperf.case import Case
from trainperf.case_record import CaseRecord
from trainperf.config_record import WORK_KEYS, EffectiveConfig
from trainperf.diagnosis_record import Diagnosis, TraceDiff
from trainperf.fingerprint_record import FACT_TYPES, Fingerprint
from trainperf.judge.comparability import GATED_CONFIG_KEYS, config_changes
from trainperf.paths import REPO_ROOT
from trainperf.reference_record import ReferenceLine
from trainperf.result import CaseResult
from trainperf.stored_verdict import StoredVerdict

STORED_BASELINES = [
    p for p in sorted((REPO_ROOT / "baselines").rglob("*.json")) if "published" not in p.parts
]

STORED_FINGERPRINT = {
    "hostname": "gpu-node-3",
    "os": "Linux 6.8.0",
    "python": "3.11.9",
    "cpu_model": "AMD EPYC",
    "cpu_count": 64,
    "cpu_id": "AuthenticAMD family 25 model 1 stepping 1",
    "cpu_isa": "avx2 fma",
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_uuid": "GPU-e57ea6fb",
    "gpu_memory_gib": 79.6,
    "driver": "570.86.15",
    "cuda_driver": "12.8",
    "power_limit_w": 700,
    "runner": "gpu-node-3/GPU-e57ea6fb",
    "torch": "2.9.0",
    "torch_cuda": "12.8",
    "trl": "0.24.0",
    "child_device_name": "NVIDIA H100 80GB HBM3",
}


def test_a_stored_fingerprint_reads_as_facts_and_versions_and_writes_back_unchanged() -> None:
    fingerprint = Fingerprint.from_dict(STORED_FINGERPRINT)
    assert fingerprint.gpu_uuid == "GPU-e57ea6fb" and fingerprint.cpu_count == 64
    assert fingerprint.runner == "gpu-node-3/GPU-e57ea6fb"
    assert fingerprint.versions == {"torch": "2.9.0", "torch_cuda": "12.8", "trl": "0.24.0"}
    assert fingerprint.unread == {}
    # Compared as text: the power limit stays an int, as it was stored.
    assert json.dumps(fingerprint.to_dict(), sort_keys=True) == json.dumps(STORED_FINGERPRINT, sort_keys=True)


def test_every_fact_is_a_field_of_the_record() -> None:
    names = {f for f in Fingerprint.__dataclass_fields__}
    assert names == {*FACT_TYPES, "versions", "unread"}


def test_what_a_fingerprint_cannot_read_as_a_fact_or_version_is_kept_as_written() -> None:
    stored = {"power_limit_w": None, "cpu_count": "64", "gpu_memory_gib": True, "newer": {"x": 1}}
    fingerprint = Fingerprint.from_dict(stored)
    assert fingerprint.power_limit_w is None and fingerprint.cpu_count is None
    assert fingerprint.gpu_memory_gib is None and fingerprint.versions == {}
    assert fingerprint.to_dict() == stored
    assert Fingerprint.from_dict(None).to_dict() == {}


def test_a_child_adds_its_stack_and_its_device_to_the_fingerprint() -> None:
    host = Fingerprint(hostname="h", gpu_name="NVIDIA H100")
    with_child = host.with_child({"versions": {"torch": "2.9.0"}, "device_name": "NVIDIA H100 80GB HBM3"})
    assert (
        with_child.versions == {"torch": "2.9.0"} and with_child.child_device_name == "NVIDIA H100 80GB HBM3"
    )
    assert host.with_child({}) == host


def test_a_reference_line_writes_back_what_it_read() -> None:
    stored = {"source": "E2", "metric": "samples_per_hour", "published": 27000.0, "measured": 13500.0}
    line = ReferenceLine.from_dict({**stored, "ratio": 0.5, "note": "", "newer": 1})
    assert line is not None and line.ratio == 0.5 and line.unread == {"newer": 1}
    assert line.to_dict() == {**stored, "ratio": 0.5, "note": "", "newer": 1}
    missing = ReferenceLine.from_dict(stored)
    assert missing is not None and missing.ratio is None and missing.to_dict() == stored
    assert ReferenceLine.from_dict("not a line") is None


def test_every_stored_baselines_fingerprint_reads_in_full_and_writes_back_unchanged() -> None:
    assert STORED_BASELINES
    for path in STORED_BASELINES:
        data = json.loads(Path(path).read_text())
        written = CaseResult.from_dict(data, origin=str(path)).to_dict()
        assert json.dumps(written["fingerprint"], sort_keys=True) == json.dumps(
            data["fingerprint"], sort_keys=True
        )
        assert written["references"] == data.get("references"), path


def test_a_result_keeps_its_case_as_the_case_wrote_it_and_reads_it_back_as_that_case() -> None:
    case = Case(
        family="rl_verl", model="qwen2_5_0_5b", method="full", profile="gsm8k", batch_size=16, gpus=2,
        extra=(("tp", "2"), ("eng", "vllm")),
    )  # fmt: skip
    record = CaseRecord.of(case)
    assert (record.id, record.family, record.gpus, record.batch_size) == (case.id, "rl_verl", 2, 16)
    assert record.extra == {"eng": "vllm", "tp": "2"} and record.model_path is None
    assert list(record.to_dict().items()) == list(case.to_dict().items())  # key order too
    assert record.as_case() == case


def test_what_a_case_record_does_not_read_by_name_is_kept_as_written() -> None:
    # An older trainperf's case (no strategy, no tier), values that do not read as their fields and a
    # knob a newer one added: each key is written back, in the order its case wrote it, and none is added.
    stored = {
        "family": "sft_hf", "model": "qwen3_tiny", "method": "lora", "profile": "short", "batch_size": 4,
        "grad_accum": 1, "gpus": "2", "model_path": None, "memory_cap_gib": 8, "extra": {"n": 4},
        "id": "sft_hf-qwen3_tiny-lora-short-b4", "newer_knob": [1],
    }  # fmt: skip
    record = CaseRecord.from_dict(stored)
    assert record.gpus is None and record.extra is None and record.model_path is None
    assert record.memory_cap_gib == 8 and record.model == "qwen3_tiny"
    assert record.unread == {
        "grad_accum": 1,
        "gpus": "2",
        "model_path": None,
        "extra": {"n": 4},
        "newer_knob": [1],
    }
    assert list(record.to_dict().items()) == list(stored.items())
    assert CaseRecord.from_dict(None) == CaseRecord() and CaseRecord().to_dict() == {}


def test_every_stored_baselines_case_reads_in_full_and_writes_back_unchanged() -> None:
    for path in STORED_BASELINES:
        data = json.loads(Path(path).read_text())
        result = CaseResult.from_dict(data, origin=str(path))
        assert json.dumps(result.to_dict()["case"], sort_keys=True) == json.dumps(
            data["case"], sort_keys=True
        )
        assert result.case.family and result.case.as_case().id == data["case"]["id"], path


STORED_CONFIG = {
    "model_class": "Qwen3ForCausalLM",
    "total_params": 8_234_382_336,
    "trainable_params": 43_646_976,
    "trainable_dtypes": ["float32"],
    "quantized_modules": 0,
    "lora_layers": 252,
    "adapter_targets": ["down_proj", "q_proj"],
    "attn_implementation": "sdpa",
    "gradient_checkpointing": True,
    "loaded_in_4bit": False,
    "precision": "bf16",
    "gradient_checkpointing_kwargs": None,
    "dataset_source": "synthetic:short",
}


def test_a_stored_configuration_reads_the_work_as_fields_and_keeps_the_familys_own_facts() -> None:
    config = EffectiveConfig.from_dict(STORED_CONFIG)
    assert config.trainable_params == 43_646_976 and config.adapter_targets == ("down_proj", "q_proj")
    assert config.gradient_checkpointing is True and config.loaded_in_4bit is False
    assert config.unread == {"gradient_checkpointing_kwargs": None, "dataset_source": "synthetic:short"}
    assert json.dumps(config.to_dict(), sort_keys=True) == json.dumps(STORED_CONFIG, sort_keys=True)
    assert EffectiveConfig.from_dict(None) == EffectiveConfig() and EffectiveConfig().to_dict() == {}


def test_what_a_configuration_cannot_read_as_its_field_is_kept_as_written() -> None:
    stored = {"trainable_params": 1.5, "loaded_in_4bit": 0, "adapter_targets": [0, 1], "precision": None}
    config = EffectiveConfig.from_dict(stored)
    assert (
        config.trainable_params is None and config.loaded_in_4bit is None and config.adapter_targets is None
    )
    assert config.unread == stored and config.to_dict() == stored


def test_every_gated_key_is_a_field_and_a_change_names_both_values_as_stored() -> None:
    assert GATED_CONFIG_KEYS == WORK_KEYS
    assert set(EffectiveConfig.__dataclass_fields__) == {*WORK_KEYS, "unread"}
    before = EffectiveConfig.from_dict(STORED_CONFIG)
    after = EffectiveConfig.from_dict({**STORED_CONFIG, "adapter_targets": ["q_proj"], "dataset_source": "x"})
    assert config_changes(before, after) == [("adapter_targets", ["down_proj", "q_proj"], ["q_proj"])]


def test_every_stored_baselines_configuration_reads_in_full_and_writes_back_unchanged() -> None:
    for path in STORED_BASELINES:
        data = json.loads(Path(path).read_text())
        result = CaseResult.from_dict(data, origin=str(path))
        written = result.to_dict()["effective_config"]
        assert json.dumps(written, sort_keys=True) == json.dumps(data["effective_config"], sort_keys=True), (
            path
        )
        assert result.effective_config.trainable_params == data["effective_config"].get("trainable_params")


STORED_DIAGNOSIS = {
    "nature": "host",
    "line": "diagnosis: host-side delay: host-side +341.3 ms (119.9 -> 461.2)",
    "threshold_ms": 2.5,
    "work_threshold_ms": 1,
    "uniform_scale": 1.02,
    "regressed": ["timing"],
    "cost": "none: this run was profiled",
    "from_a_newer_trainperf": {"x": 1},
}


def test_a_stored_diagnosis_reads_as_fields_and_writes_back_unchanged() -> None:
    diagnosis = Diagnosis.from_dict(STORED_DIAGNOSIS)
    assert diagnosis is not None and diagnosis.nature == "host" and diagnosis.regressed == ("timing",)
    assert diagnosis.unread == {"from_a_newer_trainperf": {"x": 1}}
    assert json.dumps(diagnosis.to_dict(), sort_keys=True) == json.dumps(STORED_DIAGNOSIS, sort_keys=True)
    older = Diagnosis.from_dict({"lines": ["host-side +90 ms"], "profile": {"not": "a profile"}})
    assert older is not None and older.shown_lines() == ["host-side +90 ms"] and older.profile is None
    assert older.to_dict() == {"lines": ["host-side +90 ms"], "profile": {"not": "a profile"}}
    assert Diagnosis.from_dict({}) is None


def test_a_stored_trace_diff_reads_back_as_it_was_written() -> None:
    stored = {
        "kind": "gpu",
        "step_ms": [1.0, 1.5],
        "busy_fraction": [0.9, None],
        "components_ms": {
            "GPU busy": [0.9, 1.4],
            "host-bound idle": [0.05, 0.05],
            "other idle": [0.05, 0.05],
        },
        "grown": [{"category": "matmul", "baseline_ms": 0.3, "current_ms": 0.6, "delta_ms": 0.3}],
        "verdict": "GPU-bound",
    }
    diff = TraceDiff.from_dict(stored)
    assert diff is not None and diff.step_ms == (1.0, 1.5) and diff.grown[0].category == "matmul"
    assert json.dumps(diff.to_dict()) == json.dumps(stored)  # key order too: the reports list components
    assert TraceDiff.from_dict({"kind": "gpu"}) is None
    newer = {**stored, "grown": [{**stored["grown"][0], "share": 0.5}]}  # type: ignore[dict-item]
    kept = TraceDiff.from_dict(newer)  # a key a newer writer adds to a grown category costs no diff
    assert kept is not None and kept.grown[0].delta_ms == 0.3


def test_a_verdict_writes_its_diagnosis_and_trace_diff_as_objects() -> None:
    verdict = StoredVerdict.from_dict({"verdict": "regressed", "diagnosis": STORED_DIAGNOSIS})
    assert verdict.diagnosis is not None and verdict.diagnosis.line == STORED_DIAGNOSIS["line"]
    assert verdict.to_dict()["diagnosis"] == STORED_DIAGNOSIS and "trace_diff" not in verdict.to_dict()
