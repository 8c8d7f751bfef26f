#!/usr/bin/python3
"""soak.py — issue 17's soak and fault figures, measured against real servers
on loopback (bounded in time; everything started is stopped at the end).

  /usr/bin/python3 tests/soak/soak.py [--bin bin/packtrain] [--seconds 120]
        [--pollers 200] [--kills 20] [--json OUT]

1. Soak: one server (1 worker slot, 4 HTTP threads, 2 heavy-work threads).
   A job trains for the whole window while POLLERS threads each poll
   GET /healthz and GET /v1/jobs/{id} (one keep-alive connection each,
   0.25 s between requests), two threads upload a dataset and delete it
   again, and two threads ask for the packing report of a dataset of
   2,000 structures of 1,000 close atoms (heavy: each call with a
   max_neighbors of its own, since a report once computed is answered from
   the store).  Reported: requests and
   errors per kind (an error: a transport failure or a status that is not
   the route's success; 503 + Retry-After counts as "refused", not an
   error, on the heavy routes only), and the p50/p99/max latency of
   /healthz.
2. Faults: KILLS times, at a random moment (0.5-3 s apart), kill -9 either
   the server (then start it again) or the worker of the running job;
   three jobs (1,500 epochs of the demo set each) are queued at the start
   and a dataset is uploaded after every kill; --max-attempts is raised,
   since every crash here is one of ours.  Reported: jobs that ended succeeded (of 3), uploads
   answered 201 that are listed and whose packing report is 200, datasets
   listed that are not whole, and files left in tmp/.

Prints one line per figure and, with --json, writes them all to OUT.
Exit status 1 when any error, lost job or broken dataset was seen."""
import argparse
import gzip
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "tests", "data", "api_demo_qm9_64.extxyz")


class Server:
    def __init__(self, binary, data, args):
        self.binary, self.data, self.args = binary, data, args
        self.proc = None
        self.port = None

    def start(self):
        port_file = self.data + ".port"
        if os.path.exists(port_file):
            os.remove(port_file)
        log = open(self.data + ".log", "a")
        self.proc = subprocess.Popen([self.binary, "serve", "--data-dir", self.data, "--port", "0",
                                      "--port-file", port_file] + self.args, stderr=log, cwd=ROOT)
        for _ in range(400):
            if os.path.exists(port_file) and open(port_file).read().strip():
                self.port = int(open(port_file).read())
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("the server did not start; see " + self.data + ".log")

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)
        self.proc = None

    def conn(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)


def call(conn, method, path, body=None, headers=None):
    """(status, body bytes, headers); status 0 on a transport failure."""
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, data, dict(r.getheaders())
    except (OSError, http.client.HTTPException):
        conn.close()
        return 0, b"", {}


def once(srv, method, path, body=None, headers=None, timeout=120):
    c = srv.conn(timeout)
    try:
        return call(c, method, path, body, headers)
    finally:
        c.close()


_uploads = iter(range(1, 1 << 30))


def unique_demo(demo):
    """The demo set gzipped with a gzip header time of its own: the same
    structures, other bytes, so the server stores a new dataset instead of
    answering 200 with the one it has (uploads are de-duplicated)."""
    return gzip.compress(demo, mtime=next(_uploads))


def dense_file(path, n):
    with gzip.open(path, "wt") as f:
        for i in range(n):
            f.write('1000\nenergy=%.3f pbc="F F F"\n' % (-1.0 * i))
            f.write("".join("H %.2f 0 0\n" % ((k % 10) * 0.01) for k in range(1000)))


def job_body(dataset, epochs):
    return json.dumps({"dataset": dataset, "model": {"hidden": 16, "filters": 16, "interactions": 1},
                       "batching": {"model_batch_size": 4},
                       "training": {"epochs": epochs, "log_every": 1, "checkpoint_every": 20, "seed": 1},
                       "backend": {"threads": 1}})


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = {}
        self.latency = []

    def add(self, kind, outcome, seconds=None):
        with self.lock:
            self.n.setdefault(kind, {}).setdefault(outcome, 0)
            self.n[kind][outcome] += 1
            if seconds is not None:
                self.latency.append(seconds)


def soak(binary, work, seconds, pollers):
    data = os.path.join(work, "soak")
    srv = Server(binary, data, ["--workers", "1", "--threads", "4", "--heavy-threads", "2", "--heavy-queue", "8",
                                "--quota-jobs", "100"])
    srv.start()
    demo = open(DEMO, "rb").read()
    st, body, _ = once(srv, "POST", "/v1/datasets?name=demo", demo)
    ds = json.loads(body)["id"]
    dense = os.path.join(work, "dense.xyz.gz")
    dense_file(dense, 2000)
    st, body, _ = once(srv, "POST", "/v1/datasets?name=dense", open(dense, "rb").read())
    heavy_ds = json.loads(body)["id"]
    st, body, _ = once(srv, "POST", "/v1/jobs", job_body(ds, 100000), {"Content-Type": "application/json"})
    job = json.loads(body)["id"]
    for _ in range(200):
        st, body, _ = once(srv, "GET", "/v1/jobs/" + job)
        if json.loads(body)["state"] == "running":
            break
        time.sleep(0.1)
    t = Tally()
    stop = time.time() + seconds
    healthz_errors = []

    def poller():
        c = srv.conn(30)
        while time.time() < stop:
            t0 = time.time()
            st, _, _ = call(c, "GET", "/healthz")
            t.add("healthz", "ok" if st == 200 else "error", time.time() - t0)
            if st != 200:
                healthz_errors.append(st)
            st, _, _ = call(c, "GET", "/v1/jobs/" + job)
            t.add("job_status", "ok" if st == 200 else "error")
            time.sleep(0.25)
        c.close()

    def uploader():
        while time.time() < stop:
            st, body, h = once(srv, "POST", "/v1/datasets?name=soak.extxyz.gz", unique_demo(demo))
            if st == 201:
                t.add("upload", "ok")
                st, _, _ = once(srv, "DELETE", "/v1/datasets/" + json.loads(body)["id"])
                t.add("delete", "ok" if st == 204 else "error")
            elif st == 503 and "Retry-After" in h:
                t.add("upload", "refused")
                time.sleep(float(h["Retry-After"]) / 5)
            else:
                t.add("upload", "error")

    calls = iter(range(1, 1 << 30))

    def packer():
        while time.time() < stop:
            k = next(calls) % 1024 + 1   # a new max_neighbors: computed, not from the store
            st, _, h = once(srv, "GET", "/v1/datasets/%s/packing?max_neighbors=%d" % (heavy_ds, k))
            if st == 200:
                t.add("packing", "ok")
            elif st == 503 and "Retry-After" in h:
                t.add("packing", "refused")
                time.sleep(0.5)
            else:
                t.add("packing", "error")

    threads = [threading.Thread(target=poller) for _ in range(pollers)]
    threads += [threading.Thread(target=uploader) for _ in range(2)]
    threads += [threading.Thread(target=packer) for _ in range(2)]
    t0 = time.time()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.time() - t0
    st, body, _ = once(srv, "GET", "/v1/jobs/" + job)
    state = json.loads(body)["state"]
    step = json.loads(body)["step"]
    once(srv, "POST", "/v1/jobs/%s/cancel" % job)
    srv.stop()
    lat = sorted(t.latency)
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")
    total = sum(sum(v.values()) for v in t.n.values())
    errors = sum(v.get("error", 0) for v in t.n.values())
    return {"seconds": round(elapsed, 1), "pollers": pollers, "requests": total, "errors": errors,
            "by_kind": t.n, "healthz_p50_ms": round(pct(0.50), 2), "healthz_p99_ms": round(pct(0.99), 2),
            "healthz_max_ms": round(lat[-1] * 1000, 2) if lat else None,
            "job_state_at_end": state, "job_steps_during": step}


def workers_of(pid):
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]
    except OSError:
        return []


def faults(binary, work, kills, rng):
    data = os.path.join(work, "faults")
    # a worker killed counts as a crash, retried up to --max-attempts: set
    # high, since here every crash is one of ours
    srv = Server(binary, data, ["--workers", "1", "--quota-jobs", "100", "--max-attempts", "100"])
    srv.start()
    demo = open(DEMO, "rb").read()
    st, body, _ = once(srv, "POST", "/v1/datasets?name=demo", demo)
    ds = json.loads(body)["id"]
    jobs = []
    for k in range(3):
        st, body, _ = once(srv, "POST", "/v1/jobs", job_body(ds, 1500), {"Content-Type": "application/json"})
        jobs.append(json.loads(body)["id"])
    uploaded, kinds = [], {"server": 0, "worker": 0}
    for k in range(kills):
        time.sleep(rng.uniform(0.5, 3.0))
        w = workers_of(srv.proc.pid)
        if w and rng.random() < 0.5:
            os.kill(rng.choice(w), signal.SIGKILL)
            kinds["worker"] += 1
        else:
            srv.stop(signal.SIGKILL)
            srv.start()
            kinds["server"] += 1
        st, body, _ = once(srv, "POST", "/v1/datasets?name=after-kill-%d.extxyz.gz" % k, unique_demo(demo))
        if st == 201:
            uploaded.append(json.loads(body)["id"])
    deadline = time.time() + 900
    states = {}
    while time.time() < deadline:
        states = {j: json.loads(once(srv, "GET", "/v1/jobs/" + j)[1])["state"] for j in jobs}
        if all(s in ("succeeded", "failed", "cancelled") for s in states.values()):
            break
        time.sleep(1)
    st, body, _ = once(srv, "GET", "/v1/datasets?limit=100")
    listed = [d for d in json.loads(body)["datasets"] if d.get("status", "ready") == "ready"]
    broken = 0
    for d in listed:
        st, _, _ = once(srv, "GET", "/v1/datasets/%s/packing" % d["id"])
        broken += st != 200
    missing = len(set(uploaded) - {d["id"] for d in listed})
    srv.stop()
    leftovers = len(os.listdir(os.path.join(data, "tmp")))
    return {"kills": kills, "server_kills": kinds["server"], "worker_kills": kinds["worker"],
            "jobs": len(jobs), "jobs_succeeded": sum(s == "succeeded" for s in states.values()),
            "job_states": states, "uploads_accepted": len(uploaded), "uploads_missing": missing,
            "datasets_listed": len(listed), "datasets_broken": broken, "tmp_leftovers_after_stop": leftovers}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "packtrain"))
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--pollers", type=int, default=200)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--json")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="pt-soak-")
    try:
        load = open("/proc/loadavg").read().split()[:3]
        s = soak(os.path.abspath(a.bin), work, a.seconds, a.pollers)
        print("soak: %(seconds)s s, %(pollers)d pollers + 2 uploaders + 2 packing callers while a job trained: "
              "%(requests)d requests, %(errors)d errors; /healthz p50 %(healthz_p50_ms)s ms, p99 "
              "%(healthz_p99_ms)s ms, max %(healthz_max_ms)s ms; job %(job_state_at_end)s at the end, "
              "%(job_steps_during)d steps" % s)
        print("soak: by kind " + json.dumps(s["by_kind"], sort_keys=True))
        f = faults(os.path.abspath(a.bin), work, a.kills, random.Random(a.seed))
        print("faults: %(kills)d kill -9 (%(server_kills)d server, %(worker_kills)d worker): %(jobs_succeeded)d of "
              "%(jobs)d jobs succeeded; %(uploads_accepted)d uploads accepted, %(uploads_missing)d missing; "
              "%(datasets_listed)d datasets listed, %(datasets_broken)d broken; %(tmp_leftovers_after_stop)d "
              "files left in tmp/" % f)
        load_after = open("/proc/loadavg").read().split()[:3]
        print("load average before %s, after %s" % (" ".join(load), " ".join(load_after)))
        if a.json:
            json.dump({"soak": s, "faults": f, "load_before": load, "load_after": load_after},
                      open(a.json, "w"), indent=1)
        bad = s["errors"] or f["jobs_succeeded"] != f["jobs"] or f["uploads_missing"] or f["datasets_broken"]
        return 1 if bad else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
