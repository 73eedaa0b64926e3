"""A push / consume / ack / consumer-group / DLQ / ephemeral-queue scenario
driven by the official Python client (queen-mq 2.6.0) against a running Regina.

usage: python3 scenario.py http://127.0.0.1:PORT
Exits non-zero, naming the failed check, when a check fails. Every wait is
bounded.
"""

import asyncio
import sys
import time
import uuid

from queen import EphemeralQueueNotFoundError, Queen

CHECKS = []


def check(name, ok, detail=""):
    CHECKS.append((name, bool(ok)))
    status = "ok" if ok else "FAILED"
    print(f"{status}: {name}{(' - ' + str(detail)) if detail and not ok else ''}", flush=True)


async def pop_until(client, queue, want, group=None, batch=50, seconds=10):
    got = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        b = client.queue(queue).batch(batch).wait(False)
        if group:
            b = b.group(group).subscription_mode("all")
        msgs = await b.pop()
        if not msgs:
            await asyncio.sleep(0.1)
            continue
        got.extend(msgs)
        res = await client.ack(msgs, True, {"group": group} if group else None)
        if not res.get("success", False):
            raise RuntimeError(f"ack failed: {res}")
    return got


async def main(url):
    client = Queen(url)
    q = f"py-scenario-{uuid.uuid4().hex[:8]}"

    created = await client.queue(q).config({"retry_limit": 1, "lease_time": 5}).create()
    check("configure answers configured", created.get("configured") is True, created)
    check("configure echoes options", created.get("options", {}).get("retryLimit") == 1, created)

    # Push 20 messages over two partitions, then one duplicate.
    for part in ("alpha", "beta"):
        res = await client.queue(q).partition(part).push(
            [{"data": {"part": part, "n": n}, "transactionId": f"{part}-{n}"} for n in range(10)]
        )
        check(f"push to {part} is queued", all(r.get("status") == "queued" for r in res), res)
    dup = await client.queue(q).partition("alpha").push([{"data": {"again": True}, "transactionId": "alpha-0"}])
    check("a repeated transactionId is a duplicate", dup[0].get("status") == "duplicate", dup)

    # Queue mode: every message once, in order within its partition.
    got = await pop_until(client, q, 20)
    check("queue mode receives all 20", len(got) == 20, len(got))
    for part in ("alpha", "beta"):
        ns = [m["data"]["n"] for m in got if m["data"].get("part") == part]
        check(f"{part} arrives in order", ns == list(range(10)), ns)
    check("nothing is delivered twice", len({m["transactionId"] for m in got}) == 20)

    # Two consumer groups each see every message.
    for g in ("billing", "audit"):
        seen = await pop_until(client, q, 20, group=g)
        check(f"group {g} receives all 20", len(seen) == 20, len(seen))

    # consume(): a handler per message, acked automatically.
    handled = []
    q2 = f"{q}-consume"
    await client.queue(q2).push([{"data": {"n": n}} for n in range(5)])

    async def handler(msg):
        handled.append(msg["data"]["n"])

    await client.queue(q2).batch(5).wait(False).limit(5).idle_millis(3000).each().consume(handler)
    check("consume() handles every message in order", handled == list(range(5)), handled)
    left = await client.queue(q2).wait(False).pop()
    check("consume() acked what it handled", left == [], left)

    # DLQ: a message that fails retryLimit + 1 times lands in the DLQ with its reason.
    q3 = f"{q}-dlq"
    await client.queue(q3).config({"retry_limit": 1, "lease_time": 5}).create()
    await client.queue(q3).push([{"data": {"poison": True}, "transactionId": "poison-1"}])
    failures = 0
    deadline = time.monotonic() + 10
    while failures < 2 and time.monotonic() < deadline:
        msgs = await client.queue(q3).wait(False).pop()
        if not msgs:
            await asyncio.sleep(0.1)
            continue
        res = await client.ack(msgs[0], "failed", {"error": "card declined"})
        check(f"nack {failures + 1} accepted", res.get("success") is True, res)
        failures += 1
    after = await client.queue(q3).wait(False).pop()
    check("a dead-lettered message is not redelivered", after == [], after)
    dlq = await client.queue(q3).dlq().limit(10).get()
    rows = dlq.get("messages", [])
    check("the DLQ holds the message", len(rows) == 1 and rows[0].get("data") == {"poison": True}, dlq)
    check("the DLQ row carries the nack's reason", rows and rows[0].get("errorMessage") == "card declined", dlq)

    for name in (q, q2, q3):
        await client.queue(name).delete()
    await client.close()

    # The binary wire forms: QPB1 pushes (plain and zstd-framed) and QPF1 pops.
    for label, opts in (
        ("binary push", {"binary_push": True}),
        ("compressed binary push, framed pop", {"binary_push": True, "push_compression": True, "framed_pop": True}),
    ):
        bc = Queen(url, **opts)
        qb = f"{q}-bin-{len(label)}"
        payloads = [{"n": n, "text": "é✓" * n} for n in range(5)] + ["plain string", 42, None]
        res = await bc.queue(qb).partition("lane").push([{"data": p} for p in payloads])
        check(f"{label}: every item queued", len(res) == len(payloads) and all(r.get("status") == "queued" for r in res), res)
        got = await pop_until(bc, qb, len(payloads), batch=20)
        check(f"{label}: payloads round-trip in order", [m["data"] for m in got] == payloads, [m["data"] for m in got])
        ids = [r.get("message_id") for r in res]
        check(f"{label}: message ids match the push answer", [m["id"] for m in got] == ids, (ids, [m["id"] for m in got]))
        # A step: ack one message and push its follow-up, as one commit
        # (sent as the binary QTB1 body by the compressing client).
        await bc.queue(qb).push([{"data": {"step": 1}, "transactionId": f"{qb}-step"}])
        msgs = []
        for _ in range(50):
            msgs = await bc.queue(qb).wait(False).pop()
            if msgs:
                break
            await asyncio.sleep(0.1)
        out_q = f"{qb}-next"
        tx = await bc.transaction().ack(msgs[0]).queue(out_q).push([{"data": {"step": 2}}]).commit()
        check(f"{label}: a transaction commits", tx.get("success") is True, tx)
        nxt = await pop_until(bc, out_q, 1)
        check(f"{label}: the step's push landed once", [m["data"] for m in nxt] == [{"step": 2}], nxt)
        await bc.queue(out_q).delete()
        await bc.queue(qb).delete()
        await bc.close()

    # Ephemeral (in-memory, node-local) queues through client.ephemeral.
    ec = Queen(url)
    eph = ec.ephemeral
    eq = f"{q}-eph"
    conf = await eph.configure(eq, lease_seconds=5, retry_limit=2)
    check("ephemeral configure declares the queue", conf.get("declared") is True, conf)
    res = await eph.push(eq, [{"n": n} for n in range(3)], partition="p1")
    check("ephemeral push answers pushed", res.get("pushed") == 3, res)
    got = await eph.pop(eq, batch=2, group="workers")
    msgs = got["messages"]
    check("ephemeral pop is FIFO", [m["payload"] for m in msgs] == [{"n": 0}, {"n": 1}], got)
    acked = await eph.ack(eq, [msgs[0], {"id": msgs[1]["id"], "status": "retry"}], group="workers")
    outcomes = [r.get("outcome") for r in acked.get("results", [])]
    check("ephemeral ack settles and a retry redelivers", outcomes == ["acked", "redelivered"], acked)
    again = await eph.pop(eq, batch=10, group="workers")
    seen = [(m["payload"], m["attempts"]) for m in again["messages"]]
    check("a retried ephemeral message comes back first", seen == [({"n": 1}, 2), ({"n": 2}, 1)], again)
    await eph.ack(eq, again["messages"], group="workers")
    depth = await eph.depth(eq)
    check("ephemeral depth is empty once acked", depth.get("depth") == 0, depth)
    listed = await eph.queues()
    check("ephemeral queues lists the queue", any(x.get("queue") == eq for x in listed.get("queues", [])), listed)

    async def late_push():
        await asyncio.sleep(0.5)
        await eph.push(eq, {"payload": "wake"})

    started = time.monotonic()
    pusher = asyncio.create_task(late_push())
    woke = await eph.pop(eq, wait=True, timeout=10000)
    await pusher
    took = time.monotonic() - started
    check("an ephemeral long poll wakes on a push", [m["payload"] for m in woke["messages"]] == ["wake"] and took < 3, (woke, took))
    reset = await eph.reset(eq)
    check("ephemeral reset answers what it dropped", reset.get("dropped") == 1, reset)
    deleted = await eph.delete(eq)
    check("ephemeral delete answers deleted", deleted.get("deleted") is True, deleted)
    try:
        gone = await eph.depth(eq)
        check("depth of a deleted ephemeral queue is refused", False, gone)
    except EphemeralQueueNotFoundError as e:
        check("depth of a deleted ephemeral queue is not found", e.code == "ephemeral_queue_not_found", e)
    await ec.close()


async def several_urls(url):
    """A client given several URLs (one of them dead) still pushes and pops:
    every node answers every route and the client fails over on its own."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    client = Queen([dead, url, url + "/"], retry_delay_millis=50)
    q = f"py-multi-{uuid.uuid4().hex[:8]}"
    for n in range(6):
        res = await client.queue(q).push([{"data": {"n": n}, "transactionId": f"multi-{n}"}])
        check(f"several URLs: push {n} queued", res and res[0].get("status") == "queued", res)
    got = await pop_until(client, q, 6)
    check("several URLs: every message consumed once", sorted(m["data"]["n"] for m in got) == list(range(6)), got)
    await client.queue(q).delete()
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
    asyncio.run(several_urls(sys.argv[1]))
    failed = [n for n, ok in CHECKS if not ok]
    print(f"{len(CHECKS) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)
