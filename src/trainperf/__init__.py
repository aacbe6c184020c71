"""trainperf: a pytest-based performance regression suite for LLM post-training on GPUs.

The parent side (plugin, launcher, monitor, comparison, reports) never imports torch;
the training stack runs only in child processes (``trainperf.workloads``).

Layers, lowest first; a module imports from its own layer or a lower one, never a higher one
(``tests/test_layers.py`` holds the table and checks it):

  0 core       case, errors, paths, result (the case's record), stored_verdict (its verdict),
               run_record (each fresh child's), limits_record and memory_estimate (its limits and
               estimate), cliff_record (the OOM-cliff search it keeps), trace_record and
               profile_record (its trace and profile summary), fingerprint_record (where and with
               what it ran), reference_record (the published figures it was set beside), pids
               (whether a writer still runs), diagnosis_record (its verdict's diagnosis and trace
               diff), jsonio, workloads/protocol (ChildSpec)
  1 data       synth/ (random weights, tokenizer, length profiles), traces/
  2 judge/     stats, metrics, compare (verdicts), fingerprint (what changed): no I/O but one read,
               the tolerance overrides of pyproject.toml (metrics.tolerances_from_pyproject)
  3 store/     results and baselines on disk, published references
  4 measure/   NVML, hygiene, placement, hardware classes, detection, the host, a run's figures
    plan/      memory estimate, cliff bisection
  5 families/  each family's parent-side rules behind one interface; workload environments
  6 workloads/ the child side (torch), one module per family
  7 ground/    what every part of a run stands on: its settings and its folder
  8 recording/ a run's side of the results history: a session's store, ingest of a run folder
    launch/    a case's child started in its environment under a supervisor, its GPUs guarded,
               its end classified, a cut child recorded
  9 fleet/     a nightly over many machines: a session's shard and budget, the merge of the
               shards, the Slurm and Ray engines, a nightly's cost
 10 run/       the case lifecycle: a pytest session's cases, the context, the case runner, step
               plan, limits, cliff search, diagnosis
 11 studies/   on-demand studies: A/B rounds and sides, the fidelity benchmark
 12 report/    summary, tables, HTML + SVG, benchmark JSON, run comparisons, a test's outcome, the
               terminal summary
 13 cli/, plugin.py, xdist.py   the faces: the command and the pytest plugin (hooks only)

A run's packages sit in the order they use each other: the case lifecycle (run/) drives the launch
of children and takes the fleet's plan of which cases run here, so both sit below it; the launch
knows the run only through ``launch.launch_context.LaunchContext``, and what is built on a case's
runs (cliff search, diagnosis, a budget's skip record) knows the case runner only through
``run.runner_port.RunnerPort``.
"""

__version__ = "0.1.0"
