# One command per job on a fresh machine; see README.md.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup cpu test gpu lint clean

# Without a GPU, install the pinned CPU build of torch; a GPU machine keeps (or pulls) a CUDA build.
$(VENV)/.installed: pyproject.toml ci/envs/hf.txt ci/envs/cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	if command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install -q -r ci/envs/hf.txt; \
	else $(PY) -m pip install -q -r ci/envs/cpu.txt; fi
	$(PY) -m pip install -q -e '.[hf,qlora,gpu,store,ray,dev]'
	touch $@

setup: $(VENV)/.installed

# The main job on a machine without a GPU: the tiny cases, real training steps, gated
# against baselines/cpu/, with a summary table, a run folder and a JUnit file under reports/.
cpu: setup
	$(PY) -m pytest perf_tests -m cpu --junitxml reports/junit-cpu.xml

# The GPU runner's matrix for the detected class (maxq, h100, h200).
gpu: setup
	$(PY) -m pytest perf_tests -m "$$($(VENV)/bin/trainperf env --class-only)"

# The harness's own CPU self-tests; -rs prints why each skipped test skipped (under CI=true a
# missing component fails instead: tests/required.py).
test: setup
	$(PY) -m pytest tests -q -rs

lint: setup
	$(VENV)/bin/ruff check src tests perf_tests
	$(VENV)/bin/ruff format --check src tests perf_tests
	$(VENV)/bin/mypy src

clean:
	rm -rf $(VENV) reports/*/
