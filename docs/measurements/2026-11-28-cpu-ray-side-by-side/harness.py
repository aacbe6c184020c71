"""Three local Rays side by side; the first ended by its session sweep while the others run."""
import json, os, subprocess, sys, tempfile, time
sys.path.insert(0, "src")
from trainperf.workloads.verl.teardown import end_session
mode = sys.argv[1]  # shared | own
procs, outs = [], []
for i in range(3):
    env = dict(os.environ)
    if mode == "own":
        env["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="tpray-", dir="/tmp")
    out = open(f"/tmp/{mode}-{i}.log", "w")
    hold = 15 if i == 0 else 40
    procs.append(subprocess.Popen([sys.executable, "docs/measurements/2026-11-28-cpu-ray-side-by-side/driver.py", str(hold)], stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True, env=env))
    outs.append(out)
    time.sleep(1)
time.sleep(12)
t = time.time()
swept = end_session(procs[0].pid)
print("sweep of driver 0:", swept.to_dict(), round(time.time() - t, 1), "s")
for p in procs[1:]:
    p.wait(timeout=120)
print("exit codes:", [p.returncode for p in procs])
for i in range(3):
    print(i, open(f"/tmp/{mode}-{i}.log").read()[-1500:])
left = subprocess.run("ps -eo pid,sid,args | grep -E 'raylet|gcs_server|ray::|dashboard' | grep -v grep", shell=True, capture_output=True, text=True).stdout
print("left:", left or "none")
