import sys

from trainperf.workloads.child import main

sys.exit(main(sys.argv[1:]))
