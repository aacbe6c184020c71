"""One verl-like driver: its own local Ray, an actor in it, alive for HOLD seconds."""
import os, sys, time, json
import ray
hold = float(sys.argv[1])
t0 = time.time()
ctx = ray.init(num_cpus=2, log_to_driver=False, runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN"}})
@ray.remote
class Worker:
    def pid(self):
        assert os.environ.get("NCCL_DEBUG") == "WARN"; return os.getpid(), os.getsid(0), os.getpgid(0)
w = Worker.remote()
pid, sid, pgid = ray.get(w.pid.remote())
info = {"driver": os.getpid(), "driver_sid": os.getsid(0), "gcs": ctx.address_info.get("gcs_address"),
        "session_dir": ctx.address_info.get("session_dir"), "dashboard": ctx.dashboard_url,
        "actor_pid": pid, "actor_sid": sid, "actor_pgid": pgid, "init_s": round(time.time() - t0, 1),
        "nodes": len(ray.nodes())}
print(json.dumps(info), flush=True)
time.sleep(hold)
print(json.dumps({"driver": os.getpid(), "still_alive": ray.get(w.pid.remote())[0] == pid}), flush=True)
