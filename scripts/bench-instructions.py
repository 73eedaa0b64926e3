#!/usr/bin/env python3
"""Broker instructions per pushed and per consumed message: a cost figure
that does not move with a noisy machine.

`perf stat -e instructions` where the machine counts them, else valgrind's
callgrind (which counts instructions, not time: the same binary and inputs
give the same total whatever else runs). The broker runs under the counter
twice, with N and 3N messages; the difference divided by 2N cancels start,
recovery and shutdown. The push shape is batch 100 across 1,000
partitions; the consume shape is pop 100 + ack, 8 consumers, 1 group
(its figure is the consume run's per-message count minus the push one's,
since the consume scenario preloads by pushing).

usage: scripts/bench-instructions.py --root DIR [--messages N]
Standard library only.
"""

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from localnet import free_port


def perf_counts_instructions():
    out = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "true"],
                         capture_output=True, text=True) if shutil.which("perf") else None
    return bool(out and out.returncode == 0 and out.stderr.split(",")[0].strip().isdigit())


def counted(root, bench_args, use_perf):
    """Instructions the broker ran while serving one bench run."""
    work = tempfile.mkdtemp(prefix="peers-instr-")
    port = free_port()
    broker = [os.path.join(root, "target/release/regina"), "--port", str(port),
              "--data-dir", os.path.join(work, "data")]
    if use_perf:
        out = os.path.join(work, "perf.txt")
        cmd = ["perf", "stat", "-x,", "-e", "instructions:u", "-o", out, *broker]
    else:
        out = os.path.join(work, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no", *broker]
    env = dict(os.environ, REGINA_DISK_HIGH_PCT="100", REGINA_DISK_LOW_PCT="99")
    log = open(os.path.join(work, "broker.log"), "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    sys.exit("bench-instructions: the broker did not start under the counter")
                time.sleep(0.2)
        bench = os.path.join(root, "target/release/regina-bench")
        r = subprocess.run([bench, *bench_args, "--url", url], capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            sys.exit(f"bench-instructions: {' '.join(bench_args)} failed: {r.stderr.strip()[-400:]}")
    finally:
        proc.terminate()
        proc.wait(timeout=300)
    total = read_total(out, use_perf)
    shutil.rmtree(work, ignore_errors=True)
    return total


def read_total(path, use_perf):
    if use_perf:
        line = [l for l in open(path) if "instructions" in l][0]
        return int(line.split(",")[0])
    files = glob.glob(path + "*")
    total = 0
    for f in files:
        for line in open(f):
            if line.startswith("summary:") or line.startswith("totals:"):
                total = max(total, int(line.split()[1]))
    if not total:
        sys.exit(f"bench-instructions: no total in {files}")
    return total


def per_message(root, scenario_args, n, use_perf):
    small = counted(root, scenario_args(n), use_perf)
    large = counted(root, scenario_args(3 * n), use_perf)
    return (large - small) / (2 * n)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--messages", type=int, default=20_000)
    a = p.parse_args()
    use_perf = perf_counts_instructions()
    if not use_perf and not shutil.which("valgrind"):
        sys.exit("bench-instructions: neither perf (with an instructions counter) nor valgrind is here")
    push = lambda n: ["fill", "--messages", str(n), "--batch", "100", "--partitions", "1000", "--payload", "256",
                      "--producers", "16"]
    consume = lambda n: ["consume", "--messages", str(n), "--partitions", "1000", "--payload", "256",
                         "--consumers", "8", "--groups", "1", "--batch", "100", "--producers", "16",
                         "--seconds", "1200"]
    pushed = per_message(a.root, push, a.messages, use_perf)
    pushed_and_consumed = per_message(a.root, consume, a.messages, use_perf)
    report = {
        "counter": "perf stat instructions:u" if use_perf else "valgrind callgrind",
        "messages": [a.messages, 3 * a.messages],
        "instructionsPerPushedMessage": round(pushed),
        "instructionsPerConsumedMessage": round(pushed_and_consumed - pushed),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
