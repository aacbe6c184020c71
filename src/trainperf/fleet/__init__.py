"""Many machines' share of one nightly: a session's shard and budget decided at collection
(``session_share``, ``shard``, ``budget``), the shards' run folders merged into one run (``merge``),
the engines that start the shards (``slurm``; ``ray_shards`` and ``ray_task``, into the folder
``nightly_runs`` lays out), and what a nightly costs (``cost``). It decides which cases run where
and in what order; the case lifecycle (``run/``) runs them."""
