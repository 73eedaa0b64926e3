#!/usr/bin/env python3
"""Interleaved Regina / Redis-always runs and their ratio table.

Driven by scripts/bench-peers.sh, which installs Redis and builds the
binaries; see there for the options. Standard library only.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from localnet import free_port

BEGIN, END = "<!-- peers:begin -->", "<!-- peers:end -->"
PARTITIONS = 1000
CONSUME_MESSAGES = 500_000


def wait_for(check, what, proc, seconds=20.0):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"bench-peers: {what} exited with {proc.returncode}")
        if check():
            return
        time.sleep(0.05)
    sys.exit(f"bench-peers: {what} did not start within {seconds} s")


def tcp_answers(port, send, expect):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(send)
            return expect in s.recv(256)
    except OSError:
        return False


class Server:
    """A fresh server on a fresh directory, stopped (and removed) on exit."""

    def __init__(self, kind, root):
        self.kind, self.dir, self.port = kind, tempfile.mkdtemp(prefix=f"peers-{kind}-"), free_port()
        log = open(os.path.join(self.dir, "server.log"), "wb")
        if kind == "regina":
            data = os.path.join(self.dir, "data")
            cmd = [os.path.join(root, "target/release/regina"), "--port", str(self.port), "--data-dir", data]
            env = dict(os.environ, REGINA_DISK_HIGH_PCT="100", REGINA_DISK_LOW_PCT="99")
            self.url = f"http://127.0.0.1:{self.port}"
            probe = (b"GET /health HTTP/1.0\r\n\r\n", b"HTTP/1.")
        else:
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                   "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no"]
            env = dict(os.environ)
            self.url = f"redis://127.0.0.1:{self.port}"
            probe = (b"PING\r\n", b"+PONG")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        wait_for(lambda: tcp_answers(self.port, *probe), kind, self.proc)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def shape_args(shape, system, seconds, connections):
    """The regina-bench arguments of one shape against one system."""
    if shape.startswith("push"):
        batch = shape[len("push"):]
        scenario = "push" if system == "regina" else "redis-push"
        return [scenario, "--batch", batch, "--payload", "256", "--partitions", str(PARTITIONS),
                "--producers", str(connections), "--seconds", str(seconds)]
    groups = shape[len("consume"):]
    scenario = "consume" if system == "regina" else "redis-consume"
    return [scenario, "--messages", str(CONSUME_MESSAGES), "--partitions", str(PARTITIONS), "--payload", "256",
            "--consumers", "8", "--groups", groups, "--batch", "100", "--producers", "16", "--seconds", "120"]


def report(root, system, args, timeout=600):
    """One bench run on a fresh server: its JSON report."""
    server = Server(system, root)
    try:
        bench = os.path.join(root, "target/release/regina-bench")
        out = subprocess.run([bench, *args, "--url", server.url], capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            sys.exit(f"bench-peers: {system} {' '.join(args)} failed: {out.stderr.strip()[-400:]}")
        return json.loads(out.stdout)
    finally:
        server.stop()


def measure(root, system, args):
    return report(root, system, args)["messagesPerSecond"]


def sustained(root, seconds):
    """Push batch 100 into one fresh server of each kind for `seconds`: the
    rate over the whole run, its first and last minute (fifth, if shorter).
    A server that stops answering mid-run (Redis keeps every entry in
    memory) is reported with the seconds it ran, its rates over those."""
    window = int(min(60, seconds / 5))
    rows, whole, notes = [], {}, []
    for system in ["regina", "redis"]:
        r = report(root, system, shape_args("push100", system, seconds, 16), timeout=seconds + 600)
        per = r["perSecond"]
        w = max(1, min(window, len(per)))
        first, last = sum(per[:w]) / w, sum(per[-w:]) / w
        whole[system] = r["messagesPerSecond"]
        name = "Regina" if system == "regina" else "Redis always"
        ran = f" (stopped answering after {r['failedAfterSeconds']:.0f} s)" if "failed" in r else ""
        rows.append(f"| {name}{ran} | {whole[system]:,.0f} | {first:,.0f} | {last:,.0f} | {last / first:.2f} |")
        if "failed" in r:
            notes.append(f"{name} stopped answering after {r['failedAfterSeconds']:.0f} s of the {seconds:.0f} "
                         f"(`{r['failed']}`); its figures are over the seconds it ran, its last {w} s "
                         f"those before it stopped.")
        print(f"sustained: {system} {whole[system]:,.0f} msg/s, first {first:,.0f}, last {last:,.0f}{ran}",
              file=sys.stderr)
    return "\n".join([
        f"Sustained: push batch 100, 16 connections, {PARTITIONS} partitions, {seconds:.0f} s into one fresh "
        f"server of each kind; first and last {window} s. Regina / Redis over the whole run: "
        f"**{whole['regina'] / whole['redis']:.2f}**." + "".join(" " + n for n in notes), "",
        f"| system | whole run msg/s | first {window} s | last {window} s | last / first |",
        "|---|---:|---:|---:|---:|", *rows])


def label(shape, connections):
    if shape.startswith("push"):
        return f"push, batch {shape[4:]}, {connections} connections"
    g = shape[7:]
    return f"consume (pop 100 + ack), 8 consumers, {g} group{'s' if g != '1' else ''}"


def table(results, rounds):
    lines = [f"Medians of {rounds} interleaved rounds (fresh servers each run; 256-byte payloads, "
             f"{PARTITIONS} partitions or stream keys; fsync before every answer on both).", "",
             "| shape | Regina msg/s | Redis always msg/s | Regina / Redis |", "|---|---:|---:|---:|"]
    for key, r in results.items():
        reg, red = statistics.median(r["regina"]), statistics.median(r["redis"])
        lines.append(f"| {key} | {reg:,.0f} | {red:,.0f} | {reg / red:.2f} |")
    return "\n".join(lines)


def instructions(root):
    """Broker instructions per message, from scripts/bench-instructions.py."""
    out = subprocess.run([sys.executable, os.path.join(root, "scripts/bench-instructions.py"), "--root", root],
                         capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit(f"bench-peers: counting instructions failed: {out.stderr.strip()[-400:]}")
    r = json.loads(out.stdout)
    return (f"Broker instructions per message ({r['counter']}, the difference of runs of "
            f"{r['messages'][0]:,} and {r['messages'][1]:,} messages; stable across runs where seconds "
            f"are not): pushed (batch 100, 1,000 partitions) **{r['instructionsPerPushedMessage']:,}**; "
            f"consumed (pop 100 + ack, 8 consumers) **{r['instructionsPerConsumedMessage']:,}** "
            f"(`scripts/bench-instructions.py`).")


def write_docs(path, text, command):
    doc = open(path).read()
    block = f"{BEGIN}\n{text}\n\nCommand: `{command}`\n{END}"
    if BEGIN in doc and END in doc:
        doc = doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):]
    else:
        head, _, rest = doc.partition("\n")
        doc = f"{head}\n\n## Beside Redis (appendfsync always)\n\n{block}\n{rest}"
    open(path, "w").write(doc)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--connections", default="16")
    p.add_argument("--shapes", default="push1,push10,push100,consume1,consume3")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--no-instructions", action="store_true")
    p.add_argument("--sustained", type=float, default=0, help="seconds of the sustained push run (0: none)")
    a = p.parse_args()
    shapes = a.shapes.split(",")
    conns = [int(c) for c in a.connections.split(",")]
    runs = [(s, c) for s in shapes for c in (conns if s.startswith("push") else [conns[0]])]
    results = {label(s, c): {"regina": [], "redis": []} for s, c in runs}
    for rnd in range(a.rounds):
        order = ["regina", "redis"] if rnd % 2 == 0 else ["redis", "regina"]
        for shape, c in runs:
            for system in order:
                rate = measure(a.root, system, shape_args(shape, system, a.seconds, c))
                results[label(shape, c)][system].append(rate)
                print(f"round {rnd + 1}: {label(shape, c)}: {system} {rate:,.0f} msg/s", file=sys.stderr)
    # --rounds 0 --sustained S: the sustained run alone.
    text = table(results, a.rounds) if a.rounds > 0 else ""
    if a.sustained > 0:
        text = "\n\n".join(t for t in [text, sustained(a.root, a.sustained)] if t)
    if not a.no_instructions:
        text += "\n\n" + instructions(a.root)
    print(text)
    os.makedirs(os.path.join(a.root, "target/bench"), exist_ok=True)
    json.dump(results, open(os.path.join(a.root, "target/bench/peers.json"), "w"), indent=1)
    if not a.no_write:
        command = "scripts/bench-peers.sh " + " ".join(sys.argv[3:]) if len(sys.argv) > 3 else "scripts/bench-peers.sh"
        write_docs(os.path.join(a.root, "docs/benchmarks.md"), text, command.strip())


if __name__ == "__main__":
    main()
