"""``python -m trainperf.cli``: the same command as the ``trainperf`` script."""

import sys

from trainperf.cli import main

sys.exit(main())
