"""The verl family (``rl_verl``), parent side: knobs, version-aware pre-flight, Hydra overrides,
log reading and failure classification. Nothing here imports verl, Ray or torch: the parent
predicts and reads, the child (``workloads/rl_verl.py``) runs ``python -m verl.trainer.main_ppo``.
"""
