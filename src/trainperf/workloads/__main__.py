import faulthandler
import signal
import sys

from trainperf.workloads.child import main

# A child that stops making progress is asked for its Python stacks (SIGUSR1, into its stderr)
# before it is killed for silence (--perf-silent-timeout): the report then shows where it hung.
faulthandler.register(signal.SIGUSR1, all_threads=True)
sys.exit(main(sys.argv[1:]))
