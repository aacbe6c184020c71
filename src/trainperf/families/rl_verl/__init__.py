"""The verl family (``rl_verl``), parent side: knobs, verl's version, pre-flight, the update's
memory floor. Nothing here imports verl, Ray or torch: the parent predicts, the child
(``workloads/rl_verl.py``, with ``workloads/verl/``) runs ``python -m verl.trainer.main_ppo``.
"""
