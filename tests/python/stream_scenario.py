"""A windowed aggregation into a sink queue with the official Python client's
stream SDK (queen-mq 2.6.0, `queen.Stream`) against a running Regina.

Tumbling one-second windows count and sum each partition's amounts and emit
every closed window to a sink queue; the totals must be exact. Then: a
changed chain under the same query id is refused until `reset=True`, and a
second runner under the same id resumes the stored windows.

usage: python3 stream_scenario.py http://127.0.0.1:PORT
Exits non-zero, naming the failed check, when a check fails. Every wait is
bounded.
"""

import asyncio
import sys
import time
import uuid

from queen import Queen, Stream
from queen.streams.runtime.register import StreamsConfigHashMismatch

CHECKS = []
LANES = ("north", "south", "east")


def check(name, ok, detail=""):
    CHECKS.append((name, bool(ok)))
    status = "ok" if ok else "FAILED"
    print(f"{status}: {name}{(' - ' + str(detail)) if detail and not ok else ''}", flush=True)


async def drain(client, sink, group, want_count, seconds=30):
    """Pops the sink under its own group until the emits count want_count
    messages (or time runs out); answers every emit seen."""
    seen = []
    deadline = time.monotonic() + seconds
    while sum(m.get("data", {}).get("count", 0) for m in seen) < want_count and time.monotonic() < deadline:
        msgs = await client.queue(sink).batch(100).wait(False).group(group).subscription_mode("all").pop()
        if not msgs:
            await asyncio.sleep(0.2)
            continue
        await client.ack(msgs, True, {"group": group})
        seen.extend(msgs)
    return seen


def windowed(client, src, sink, seconds):
    return (
        Stream.from_(client.queue(src))
        .window_tumbling(seconds=seconds, idle_flush_ms=300)
        .aggregate({"count": lambda m: 1, "sum": lambda m: m["amount"]})
        .to(client.queue(sink))
    )


async def push_spread(client, src, rounds, start):
    """One message per lane per round, a third of a second apart: amounts
    start, start+1, ... so every total is known."""
    n = start
    for _ in range(rounds):
        for lane in LANES:
            n += 1
            await client.queue(src).partition(lane).push([{"data": {"amount": n}, "transactionId": f"{lane}-{n}"}])
        await asyncio.sleep(0.33)
    return n


async def main(url):
    client = Queen(url)
    tag = uuid.uuid4().hex[:8]
    src, sink, query = f"py-st-src-{tag}", f"py-st-sink-{tag}", f"py-st-q-{tag}"
    await client.queue(src).config({"lease_time": 5}).create()
    await client.queue(sink).create()

    runner = await windowed(client, src, sink, 1).run(
        query, url=url, reset=True, subscription_mode="all", max_wait_millis=300
    )
    last = await push_spread(client, src, rounds=8, start=0)
    want = len(LANES) * 8
    out = await drain(client, sink, "audit", want)
    await runner.stop()
    counts = sum(m["data"]["count"] for m in out)
    sums = sum(m["data"]["sum"] for m in out)
    check("every message is counted once across the windows", counts == want, f"{counts} of {want}")
    check("the window sums add up", sums == last * (last + 1) // 2, f"{sums} != {last * (last + 1) // 2}")
    check("several windows closed", len(out) >= len(LANES) * 2, len(out))
    check(
        "each emit lands in its source lane",
        all(m.get("partition") in LANES for m in out),
        [m.get("partition") for m in out],
    )
    check(
        "an emit carries its window",
        all(isinstance(m["data"].get("count"), int) for m in out),
        out[:1],
    )

    # The same query id with another chain shape: refused, then reset.
    try:
        r = await windowed(client, src, sink, 5).run(query, url=url, max_wait_millis=300)
        await r.stop()
        check("a changed chain is refused without reset", False, "it ran")
    except StreamsConfigHashMismatch as e:
        check("a changed chain is refused without reset", "reset" in str(e), e)
    r = await windowed(client, src, sink, 5).run(query, url=url, reset=True, max_wait_millis=300)
    await r.stop()
    check("reset=True accepts the new chain", True)

    # State is the broker's: a runner stopped with windows open, a second
    # runner under the same id, and the totals are still exact.
    src2, sink2, query2 = f"py-st-src2-{tag}", f"py-st-sink2-{tag}", f"py-st-q2-{tag}"
    await client.queue(src2).create()
    await client.queue(sink2).create()

    def counting():
        return (
            Stream.from_(client.queue(src2))
            .window_tumbling(seconds=1, idle_flush_ms=300)
            .aggregate({"count": lambda m: 1, "sum": lambda m: m["amount"]})
            .to(client.queue(sink2))
        )

    first = await counting().run(query2, url=url, reset=True, subscription_mode="all", max_wait_millis=300)
    for n in range(1, 4):
        await client.queue(src2).partition("solo").push([{"data": {"amount": n}, "transactionId": f"s-{n}"}])
    await asyncio.sleep(0.6)
    await first.stop()
    second = await counting().run(query2, url=url, subscription_mode="all", max_wait_millis=300)
    for n in range(4, 7):
        await client.queue(src2).partition("solo").push([{"data": {"amount": n}, "transactionId": f"s-{n}"}])
    out2 = await drain(client, sink2, "audit", 6)
    await second.stop()
    check("a second runner resumes the stored windows", sum(m["data"]["count"] for m in out2) == 6, out2)
    check("the resumed totals are exact", sum(m["data"]["sum"] for m in out2) == 21, out2)

    await client.close()
    failed = [n for n, ok in CHECKS if not ok]
    print(f"{len(CHECKS) - len(failed)}/{len(CHECKS)} stream checks passed", flush=True)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
