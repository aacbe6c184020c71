"""Studies run on demand beside the nightly, each from its own ``trainperf`` command: an A/B of
two environments over paired rounds (``ab``: rounds, pooling, broken cases; ``ab_sides``: each
side's environment, built from a base with pins changed), and the fidelity benchmark, a bare
child against a measured one (``fidelity``, ``fidelity_render``). They reuse the lifecycle's
context and the launcher; nothing below them imports them."""
