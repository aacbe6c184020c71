"""Running cases on the parent side: the context, the case runner, the child launcher, outcomes, cliffs, the run folder."""
