#!/usr/bin/env bash
# What a fresh interpreter pays to import a workload's stack where the runner writes no bytecode
# (PYTHONDONTWRITEBYTECODE set, sites installed without .pyc: every process compiles every module
# it imports), and what a bytecode cache outside the sites (PYTHONPYCACHEPREFIX) saves each
# process after the first. A verl case starts about a dozen Python processes, an SFT case one.
#   usage: bash benchmarks/bytecode_cache.sh "MODULE ..." [LABEL]   (PYTHONPATH as the stack needs)
# Prints one row per module set: two fresh imports as the runner is, then three with the cache
# (the first fills it). The cache is a throwaway folder.
set -uo pipefail
modules=${1:?usage: bytecode_cache.sh \"MODULE ...\" [LABEL]}
label=${2:-stack}
prefix=$(mktemp -d)
import_s() {  # -> seconds for one fresh interpreter to import the modules (or 'failed')
  python3 - "$modules" <<'PY'
import subprocess, sys, time
start = time.monotonic()
done = subprocess.run([sys.executable, "-c", "import " + ", ".join(sys.argv[1].split())], capture_output=True)
print("failed:" + done.stderr.decode()[-200:] if done.returncode else f"{time.monotonic() - start:.1f}")
PY
}
plain=("$(import_s)" "$(import_s)")
export PYTHONDONTWRITEBYTECODE="" PYTHONPYCACHEPREFIX="$prefix"
cached=("$(import_s)" "$(import_s)" "$(import_s)")
printf '%-10s %-28s %8s %8s | %12s %8s %8s   (%s in the cache)\n' stack modules "as is 1" "as is 2" "cache fill" "cached" "cached" \
  "$(du -sh "$prefix" | cut -f1)"
printf '%-10s %-28s %8s %8s | %12s %8s %8s\n' "$label" "$modules" "${plain[@]}" "${cached[@]}"
rm -rf "$prefix"
