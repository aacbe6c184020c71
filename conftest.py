"""Thin on purpose: the trainperf plugin is loaded through its pytest11 entry point
(``pip install -e .``); the catalogue lives in ``perf_tests/``, the self-tests in ``tests/``."""
