#!/usr/bin/env python3
"""Prints the Markdown tables of docs/benchmarks.md from a results.json that
scripts/bench.sh wrote. Usage: scripts/bench-tables.py target/bench/results.json"""
import json
import sys


def ms(d, k="p99"):
    v = (d or {}).get(k)
    return "-" if v is None else (f"{v:,.1f}" if v >= 10 else f"{v:.2f}")


def num(v):
    return "-" if v is None else f"{v:,.0f}"


def check(r):
    c = r.get("check") or {}
    if not c:
        return "-"
    if c.get("ok"):
        return "no loss, no duplicate, in order"
    return f"FAILED: lost {c.get('lost')}, duplicates {c.get('duplicates')}, out of order {c.get('outOfOrder')}"


def table(title, *columns):
    """Prints a table's heading, header row and alignment row; a column
    named with a leading ">" is right-aligned (numbers)."""
    print(f"\n### {title}\n")
    print("| " + " | ".join(c.lstrip(">") for c in columns) + " |")
    print("|" + "|".join("---:" if c.startswith(">") else "---" for c in columns) + "|")


def main(path):
    runs = json.load(open(path))["runs"]
    on = [r for r in runs if r.get("fsync", "on") == "on"]
    off = [r for r in runs if r.get("fsync") == "off"]
    by = lambda rs, s: [r for r in rs if r.get("scenario") == s]

    table("Push (closed loop, 256-byte payloads)",
          ">partitions", ">batch", ">producers", ">msg/s", ">request p50 ms", ">p99 ms", ">p99.9 ms")
    for r in by(on, "push"):
        l = r.get("latencyMs")
        print(f"| {num(r['partitions'])} | {r['batch']} | {r['producers']} | {num(r['messagesPerSecond'])} "
              f"| {ms(l, 'p50')} | {ms(l)} | {ms(l, 'p999')} |")

    table("Consume (preloaded, pop batch 100 + batch ack, every message checked)",
          ">consumed", "groups x consumers", ">consumed msg/s", ">pop p50 / p99 ms", ">ack p50 / p99 ms", "check")
    for r in by(on, "consume"):
        print(f"| {num(r['consumed'])} | {r['groups']} x {r['consumersPerGroup']} | {num(r['messagesPerSecond'])} "
              f"| {ms(r.get('popLatencyMs'), 'p50')} / {ms(r.get('popLatencyMs'))} "
              f"| {ms(r.get('ackLatencyMs'), 'p50')} / {ms(r.get('ackLatencyMs'))} | {check(r)} |")

    table("End to end (open loop, 1,000 partitions, push-to-consume latency from the intended send time)",
          ">offered msg/s", ">achieved msg/s", ">consumers", ">p50 ms", ">p99 ms", ">p99.9 ms", "check")
    for r in by(on, "e2e"):
        l = r.get("latencyMs")
        print(f"| {num(r['offeredRate'])} | {num(r['achievedRate'])} | {r['consumersPerGroup']} | {ms(l, 'p50')} "
              f"| {ms(l)} | {ms(l, 'p999')} | {check(r)} |")

    table("Steps, KV, timers, partitions, restart", "scenario", "figure")
    for r in by(on, "txn"):
        l = r.get("latencyMs")
        print(f"| `txn` (ack + push + KV put per step, {r['workers']} workers) | {num(r['stepsPerSecond'])} steps/s, "
              f"p50 {ms(l, 'p50')} ms, p99 {ms(l)} ms |")
    for r in by(on, "kv"):
        l = r.get("latencyMs") or {}
        print(f"| `kv` ({int(r['readRatio'] * 100)} % gets, puts with `expect`, incr; {r['workers']} workers) "
              f"| {num(r['opsPerSecond'])} ops/s; get p99 {ms(l.get('get'))} ms, put p99 {ms(l.get('put'))} ms |")
    for r in by(on, "jobs"):
        c = r.get("claimLatencyMs")
        mem = f"; {num(r['rssBytesPerJob'])} bytes of broker RSS per pending job" if "rssBytesPerJob" in r else ""
        print(f"| `jobs` ({num(r['pending'])} pending, {r['workers']} workers, claim then complete) "
              f"| {num(r['jobsPerSecond'])} jobs/s; claim p50 {ms(c, 'p50')} ms, p99 {ms(c)} ms, "
              f"p99.9 {ms(c, 'p999')} ms{mem} |")
    for r in by(on, "timers"):
        f = r.get("fireLatenessMs")
        print(f"| `timers` ({num(r['timers'])} timers) | fire lateness p50 {ms(f, 'p50')} ms, p99 {ms(f)} ms, "
              f"max {ms(f, 'max')} ms; {r['firedEarly']} early |")
    for r in by(on, "partitions"):
        print(f"| `partitions` ({num(r['partitions'])}, one message each) | {num(r['partitionsPerSecond'])} "
              f"partitions/s; {num(r['rssBytesPerPartition'])} bytes of broker RSS per partition |")
    for r in by(on, "wait-ready"):
        what = (f"{num(int(r['messagesOnDisk']))} messages" if "messagesOnDisk" in r
                else f"{num(int(r['partitionsOnDisk']))} partitions" if "partitionsOnDisk" in r else "data")
        print(f"| `restart` ({what} on disk, SIGKILL) | serving again {r['secondsUntilServing']:.2f} s after the restart |")

    for r in by(on, "scale"):
        table("Scale (one queue grown step by step; pops are wildcard, batch 1, each acked)",
              ">partitions", ">created/s", ">RSS bytes/partition", ">pop p50 ms", ">pop p99 ms", ">pop+ack p99 ms",
              ">named pop p50 / p99 ms")
        for s in r["steps"]:
            p, pa, n = s.get("popLatencyMs"), s.get("popAckLatencyMs"), s.get("namedPopLatencyMs")
            print(f"| {num(s['partitions'])} | {num(s['createdPerSecond'])} | {num(s['rssBytesPerPartition'])} "
                  f"| {ms(p, 'p50')} | {ms(p)} | {ms(pa)} | {ms(n, 'p50')} / {ms(n)} |")

    if off:
        table("The same runs with fsync off (NOT durable; shows what durability costs)",
              "run", ">fsync on", ">fsync off")
        for r in off:
            s = r["scenario"]
            twin = [x for x in by(on, s) if all(x.get(k) == r.get(k) for k in ("batch", "partitions", "groups"))
                    and x.get("consumersPerGroup") == r.get("consumersPerGroup")]
            t = twin[0] if twin else {}
            if s == "push":
                name, key, unit = f"push batch {r['batch']}, {num(r['partitions'])} partitions", "messagesPerSecond", "msg/s"
            elif s == "consume":
                name, key, unit = f"consume, {r['groups']} x {r['consumersPerGroup']}", "messagesPerSecond", "msg/s"
            elif s == "txn":
                name, key, unit = "txn", "stepsPerSecond", "steps/s"
            else:
                continue
            lat = lambda x: ms(x.get("latencyMs") or x.get("popLatencyMs"))
            print(f"| {name} | {num(t.get(key))} {unit} (p99 {lat(t)} ms) | {num(r.get(key))} {unit} (p99 {lat(r)} ms) |")


if __name__ == "__main__":
    main(sys.argv[1])
