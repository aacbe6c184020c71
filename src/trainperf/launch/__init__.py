"""Starting a case's child in its environment and supervising it: the child's spec, command and
environment (``launcher``), its process group under a supervisor that dies with the suite
(``process``, ``supervisor``), the wait for clean GPUs and the watch while it runs (``guard``),
the bytecode cache it writes into (``bytecode``), how it ended (``outcome``) and the record of a
child a Ctrl-C cut (``interruption``). It knows the run only through ``launch_context``."""
