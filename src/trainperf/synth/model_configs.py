"""Shipped model configs (``fixtures/models/<name>.json``): pure JSON, safe for the parent to read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.paths import FIXTURES_DIR

MODELS_DIR = FIXTURES_DIR / "models"


def available_models(directory: Path = MODELS_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.json"))


def load_model_fixture(name: str, directory: Path = MODELS_DIR) -> dict[str, Any]:
    """The fixture dict (``name``, ``hf_id``, ``provenance``, ``parameters_b``, ``config``)."""
    path = directory / f"{name}.json"
    if not path.is_file():
        known = ", ".join(available_models(directory)) or "none"
        raise TrainperfError(
            f"model config '{name}' is missing: no {path} (known: {known}); add the model's config.json "
            "there as fixtures/models/<name>.json or give the case a local model_path"
        )
    try:
        fixture: dict[str, Any] = json.loads(path.read_text())
        if not isinstance(fixture.get("config"), dict) or "model_type" not in fixture["config"]:
            raise ValueError("no 'config' object with a 'model_type'")
    except (ValueError, TypeError) as exc:
        raise TrainperfError(
            f"{path} is not a valid model fixture ({exc}); compare with fixtures/models/qwen3_8b.json"
        )
    return fixture
