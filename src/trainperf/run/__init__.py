"""The case lifecycle on the parent side: a pytest session's cases (``session``), the run they
share (``context``), each case run, judged and kept (``case_runner``, ``step_count``, ``headroom_fill``,
``case_notes``), what is built on a case's runs through ``runner_port`` (``cliff``,
``diagnosis``), and the catalogue the case files parametrize with (``catalogue``). Children are
started by ``launch/``, which cases run where is ``fleet/``'s, results history is ``recording/``'s."""
