#!/usr/bin/env python3
"""The scale-out measurement of docs/scaling.md.

For each Raft group count (default 1 and 6) it starts a three-node cluster on
127.0.0.1 (tenancy on), waits until leadership is spread, runs
`regina-bench push` with the load spread over many tenants and sent through
every node (following the leader hint), and reports the throughput, the log
entries written, and each node's CPU seconds (user + system, from
/proc/PID/stat) over the run.

usage: scripts/scale-bench.py [--groups 1,6] [--seconds 20] [--producers 12]
                              [--batch 10] [--tenants 18] [--payload 256]
                              [--follow-leader on|off] [--fsync on|off]
                              [--bin DIR] [--out FILE]

  --bin DIR   where `regina` and `regina-bench` are (default target/debug,
              which this workspace builds optimised)
  --out FILE  also write the results as JSON
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from localnet import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKS = os.sysconf("SC_CLK_TCK")


def get(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start_cluster(binary, groups, fsync, work):
    ports = [(free_port(), free_port()) for _ in range(3)]
    peers = ",".join(f"{i + 1}=127.0.0.1:{raft}" for i, (_, raft) in enumerate(ports))
    procs = []
    for i, (http, raft) in enumerate(ports):
        log = open(os.path.join(work, f"node{i + 1}.log"), "w")
        cmd = [binary, "--node-id", str(i + 1), "--port", str(http), "--raft-addr", f"127.0.0.1:{raft}",
               "--peers", peers, "--data-dir", os.path.join(work, f"node{i + 1}"), "--tenancy", "on",
               "--raft-groups", str(groups), "--fsync", fsync]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
    urls = [f"http://127.0.0.1:{http}" for http, _ in ports]
    return procs, urls


def wait_spread(urls, groups, within=60):
    """Until every node agrees on each group's leader and no node leads more
    than its share."""
    share = -(-groups // 3)
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            views = [get(u + "/health") for u in urls]
            rows = [v.get("groups") or [{"leader": v.get("leader")}] for v in views]
            leaders = [[r["leader"] for r in rs] for rs in rows]
            if all(l == leaders[0] for l in leaders) and None not in leaders[0]:
                counts = {n: leaders[0].count(n) for n in set(leaders[0])}
                if max(counts.values()) <= share:
                    return leaders[0]
        except Exception:
            pass
        time.sleep(0.2)
    raise SystemExit(f"leadership did not spread over {groups} groups within {within} s")


def log_entries(url):
    v = get(url + "/health")
    rows = v.get("groups") or [v]
    return sum(r.get("commitIndex") or 0 for r in rows)


def run(args, groups):
    work = tempfile.mkdtemp(prefix=f"regina-scale-{groups}-")
    binary = os.path.join(args.bin, "regina")
    procs, urls = start_cluster(binary, groups, args.fsync, work)
    try:
        leaders = wait_spread(urls, groups)
        time.sleep(2)
        entries_before = log_entries(urls[0])
        cpu_before = [cpu_seconds(p.pid) for p in procs]
        bench = [os.path.join(args.bin, "regina-bench"), "push", "--url", ",".join(urls),
                 "--seconds", str(args.seconds), "--producers", str(args.producers), "--batch", str(args.batch),
                 "--payload", str(args.payload), "--partitions", "64", "--tenants", str(args.tenants),
                 "--follow-leader", args.follow_leader]
        out = subprocess.run(bench, capture_output=True, text=True, check=True)
        cpu_after = [cpu_seconds(p.pid) for p in procs]
        time.sleep(1)
        entries = log_entries(urls[0]) - entries_before
        report = json.loads(out.stdout)
        cpu = [round(a - b, 2) for a, b in zip(cpu_after, cpu_before)]
        msgs = report["messages"]
        return {
            "groups": groups,
            "leaders": leaders,
            "messagesPerSecond": round(report["messagesPerSecond"]),
            "messages": msgs,
            "requests": report["requests"],
            "forwardedRequests": report["forwardedRequests"],
            "logEntries": entries,
            "latencyMs": report["latencyMs"],
            "cpuSecondsPerNode": cpu,
            "cpuMicrosPerMessage": round(sum(cpu) / msgs * 1e6, 1),
            "cpuMicrosPerEntryPerNode": [round(c / max(entries, 1) * 1e6, 1) for c in cpu],
            "seconds": report["seconds"],
        }
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--groups", default="1,6")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--producers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--tenants", type=int, default=18)
    ap.add_argument("--payload", type=int, default=256)
    ap.add_argument("--follow-leader", default="on")
    ap.add_argument("--fsync", default="on")
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug"))
    ap.add_argument("--out")
    args = ap.parse_args()
    results = []
    for g in [int(x) for x in args.groups.split(",")]:
        r = run(args, g)
        print(json.dumps(r), flush=True)
        results.append(r)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"fsync": args.fsync, "producers": args.producers, "batch": args.batch,
                       "tenants": args.tenants, "payloadBytes": args.payload, "runs": results}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
