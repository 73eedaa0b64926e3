#!/usr/bin/env python3
"""Kill-9 soak: many SIGKILL/restart cycles of one Regina node under mixed load.

One data directory for the whole run. Each cycle starts the node (waits for
/health), runs mixed load from several threads for a bounded random time
(pushes with client transaction ids to two queues and 64 partitions, batched;
pops with acks as a consumer group; steps that ack, push, write a KV row and
sometimes schedule a timer in one entry; KV writes with and without a version
precondition; timers a little in the future), SIGKILLs the node at a random
instant while requests are in flight, leaves it down for a random outage
(timers fall due meanwhile), restarts it on the same data directory and
audits the recovered node:

- every answered push is stored exactly once (read back by offset with
  /api/v1/fetch), at the offset it was answered with, and a partition holds
  answered pushes in the order they were answered; nothing is stored that was
  never sent, refused (a refused step writes nothing) or never reached the
  node; a push whose answer was lost is stored at most once;
- re-pushing a sample of answered transaction ids answers `duplicate` with
  the original offset;
- no message is delivered to a consumer group again once an ack (or a step's
  ack) of it, or of a later offset of its partition, was answered (pops sent
  after the answer);
- a KV row's version never goes back and never falls below the last answered
  write; its value is the last answered write's, or one written later whose
  answer was lost;
- every timer scheduled by an answered request fires exactly once (one message
  with its txn in its queue), also when it fell due while the node was down;
  a refused step's timer never fires.

A request without an answer (the kill reset it, or it timed out) is unknown:
it may or may not have been applied. A request the node refused to connect is
unsent: it cannot have been applied. A 2xx answer is answered: it must be
durable. Every loop and request is bounded; the node is killed on every exit
and the temporary directory removed.

Standard library only. Thread interleavings are not reproducible, so a seed
replays the same choices (kill instants, batch shapes, delays), not the same
schedule.
"""

import argparse
import base64
import bisect
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

PRODUCER_QUEUES = ("soak-a", "soak-b")
PARTITIONS_PER_QUEUE = 32
PRODUCERS = 3
PUSH_BATCH_MAX = 12
STEPPERS = 2
STEP_QUEUE = "soak-steps"
STEP_PARTITIONS_PER_STEPPER = 4
STEP_KEYS_PER_STEPPER = 4
TIMER_QUEUE = "soak-timers"
TIMER_PARTITIONS = 4
TIMER_DELAY_MS = (100, 4000)
KV_NS = "soak"
KV_KEYS = 16
CONSUMER_GROUP = "soak-c"
STEP_GROUP = "soak-s"
LEASE_SECONDS = 2
REQUEST_TIMEOUT_S = 5.0
START_TIMEOUT_S = 60.0
AUDIT_BUDGET_S = 120.0
TIMER_FIRE_GRACE_S = 15.0
DEDUP_PROBES = 16
# Probes re-push only ids answered well inside the default dedup window
# (dedupWindowSeconds, 3600 s): past it a re-push is rightly queued again.
DEDUP_PROBE_AGE_MAX_S = 3000
RESAMPLE_PARTITIONS = 8
RESAMPLE_WINDOW = 64
FETCH_ENTRIES_MAX = 500


class Violation(Exception):
    """A check failed: the node broke a documented promise."""


class Unsent(Exception):
    """The node refused the connection: nothing was sent."""


class Lost(Exception):
    """The request may have reached the node; its answer was lost."""


class Http:
    """One keep-alive connection with a timeout on every request."""

    def __init__(self, port, timeout=REQUEST_TIMEOUT_S):
        self.port = port
        self.timeout = timeout
        self.conn = None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        if self.conn is None:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                c.connect()
            except OSError as e:
                c.close()
                raise Unsent(repr(e)) from None
            self.conn = c
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            self.conn.request(method, path, body=data, headers=headers)
            r = self.conn.getresponse()
            raw = r.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise Lost(repr(e)) from None
        try:
            obj = json.loads(raw) if raw else None
        except ValueError:
            raise Violation(f"{method} {path}: answer {r.status} is not JSON: {raw[:200]!r}") from None
        return r.status, obj


def iso_ms(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def b64json(v):
    return base64.b64encode(json.dumps(v).encode()).decode()


class Part:
    """What was sent to one (queue, partition) and what the audits saw."""

    def __init__(self, queue, name):
        self.queue = queue
        self.name = name
        self.state = {}  # txn -> pending | answered | unknown | unsent | refused
        self.offset = {}  # txn -> offset it was answered with (plain pushes)
        self.order = {}  # txn -> rank among this partition's answered writes
        self.answered = 0
        self.last_answered_offset = -1
        self.by_offset = []  # verified txns, index = offset
        self.seen = set()
        self.unseen_answered = set()  # answered, not yet read back by an audit
        self.last_seen_rank = -1


class Key:
    """Writes to one KV row, in the order they were sent (one writer per key)."""

    def __init__(self, name):
        self.name = name
        self.writes = {}  # value tag -> [index, state, version]
        self.sent = 0
        self.last = None  # (index, tag, version) of the last answered write
        self.version = 0  # what the writer believes the row's version is
        self.observed = 0  # highest version an audit read


class Timer:
    def __init__(self, key, partition):
        self.key = key
        self.partition = partition
        self.state = "pending"
        self.due = None  # epoch seconds, from the answer's deliverAt


class Model:
    def __init__(self):
        self.lock = threading.Lock()
        self.parts = {}
        for q in PRODUCER_QUEUES:
            for i in range(PARTITIONS_PER_QUEUE):
                self.parts[(q, f"p{i:02}")] = Part(q, f"p{i:02}")
        for s in range(STEPPERS):
            for j in range(STEP_PARTITIONS_PER_STEPPER):
                self.parts[(STEP_QUEUE, f"s{s}-{j}")] = Part(STEP_QUEUE, f"s{s}-{j}")
        for j in range(TIMER_PARTITIONS):
            self.parts[(TIMER_QUEUE, f"t{j}")] = Part(TIMER_QUEUE, f"t{j}")
        self.keys = {f"kv-{k}": Key(f"kv-{k}") for k in range(KV_KEYS)}
        for s in range(STEPPERS):
            for k in range(STEP_KEYS_PER_STEPPER):
                self.keys[f"step-{s}-{k}"] = Key(f"step-{s}-{k}")
        self.timers = {}
        # (group, queue, partition) -> [(answer time, highest acked offset)]
        self.acked = {}
        self.totals = {}
        self.cycle = {}
        self.violations = []
        self.cycle_started = {}  # cycle -> wall time its load began
        self.probe_pool = []  # (cycle, part, txn) of answered plain pushes, in answer order

    def count(self, what, n=1):
        self.cycle[what] = self.cycle.get(what, 0) + n
        self.totals[what] = self.totals.get(what, 0) + n

    def violate(self, msg):
        self.violations.append(msg)

    def send_push(self, part, txn):
        part.state[txn] = "pending"

    def settle_push(self, part, txn, state, offset=None):
        part.state[txn] = state
        if state == "answered":
            part.order[txn] = part.answered
            part.answered += 1
            if txn not in part.seen:
                part.unseen_answered.add(txn)
            if offset is not None:
                part.offset[txn] = offset
                self.probe_pool.append((int(txn.split(".")[0][1:]), part, txn))
                if offset <= part.last_answered_offset:
                    self.violate(f"{part.queue}/{part.name}: {txn} answered offset {offset}, "
                                 f"not after {part.last_answered_offset}")
                part.last_answered_offset = max(part.last_answered_offset, offset)

    def note_ack(self, group, queue, partition, offset, at):
        log = self.acked.setdefault((group, queue, partition), [])
        top = max(offset, log[-1][1]) if log else offset
        log.append((at, top))

    def check_delivery(self, group, m, sent_at):
        """A delivered message: known, at its answered offset, not acked."""
        key = (m.get("queue") or m.get("queueName"), m.get("partition"))
        part = self.parts.get(key)
        txn = m.get("transactionId")
        if part is None:
            self.violate(f"{group}: delivered {txn} from unknown partition {key}")
            return None
        st = part.state.get(txn)
        if st is None or st in ("unsent", "refused"):
            self.violate(f"{group}: delivered {txn} at {key}/{m.get('offset')}, state {st}")
            return part
        if txn in part.offset and part.offset[txn] != m.get("offset"):
            self.violate(f"{group}: delivered {txn} at offset {m.get('offset')}, answered {part.offset[txn]}")
        log = self.acked.get((group, part.queue, part.name), [])
        for at, top in reversed(log):
            if at < sent_at:
                if m.get("offset", -1) <= top:
                    self.violate(f"{group}: {part.queue}/{part.name} offset {m.get('offset')} ({txn}) "
                                 f"delivered again after an answered ack up to {top}")
                break
        return part

    def kv_send(self, key, tag):
        key.writes[tag] = [key.sent, "pending", None]
        key.sent += 1

    def kv_settle(self, key, tag, state, version=None):
        w = key.writes[tag]
        w[1] = state
        if state == "answered":
            w[2] = version
            if key.last is not None and version <= key.last[2]:
                self.violate(f"kv {key.name}: answered version {version} not above {key.last[2]}")
            key.last = (w[0], tag, version)
            key.version = version


class Load:
    """The threads of one cycle, against one running node."""

    def __init__(self, model, port, cycle, rng):
        self.m = model
        self.port = port
        self.cycle = cycle
        self.stop = threading.Event()
        self.seeds = [rng.randrange(1 << 62) for _ in range(16)]
        self.errors = []

    def run_threads(self):
        targets = [(self.producer, i) for i in range(PRODUCERS)]
        targets += [(self.consumer, 0)]
        targets += [(self.stepper, i) for i in range(STEPPERS)]
        targets += [(self.kv_writer, 0), (self.timer_writer, 0)]
        threads = []
        for n, (fn, i) in enumerate(targets):
            t = threading.Thread(target=self.guard, args=(fn, i, random.Random(self.seeds[n])), daemon=True)
            t.start()
            threads.append(t)
        return threads

    def guard(self, fn, i, rng):
        h = Http(self.port)
        try:
            fn(i, rng, h)
        except (Unsent, Lost):
            pass
        except Exception as e:  # a bug in the soak itself or a violation
            self.errors.append(f"{fn.__name__}[{i}]: {e!r}")
        finally:
            h.close()

    def settle_lost(self, exc, parts_txns, kv=(), timers=()):
        state = "unsent" if isinstance(exc, Unsent) else "unknown"
        with self.m.lock:
            for part, txn in parts_txns:
                self.m.settle_push(part, txn, state)
            for key, tag in kv:
                self.m.kv_settle(key, tag, state)
            for t in timers:
                t.state = state
            self.m.count(state)

    def producer(self, i, rng, h):
        mine = [p for n, p in enumerate(self.m.parts.values()) if p.queue in PRODUCER_QUEUES and n % PRODUCERS == i]
        seq = 0
        while not self.stop.is_set():
            items, sent = [], []
            with self.m.lock:
                for _ in range(rng.randint(1, PUSH_BATCH_MAX)):
                    part = rng.choice(mine)
                    txn = f"c{self.cycle}.p{i}.{seq}"
                    seq += 1
                    self.m.send_push(part, txn)
                    items.append({"queue": part.queue, "partition": part.name, "transactionId": txn,
                                  "payload": {"t": txn}})
                    sent.append((part, txn))
            try:
                status, body = h.call("POST", "/api/v1/push", {"items": items})
            except (Unsent, Lost) as e:
                self.settle_lost(e, sent)
                raise
            if status // 100 != 2 or not isinstance(body, list) or len(body) != len(items):
                self.settle_lost(Lost(f"push {status}"), sent)
                raise Lost(f"push answered {status}: {str(body)[:200]}")
            with self.m.lock:
                for (part, txn), r in zip(sent, body):
                    if r.get("status") == "queued":
                        self.m.settle_push(part, txn, "answered", r.get("offset"))
                        self.m.count("pushes")
                    elif r.get("status") == "duplicate":
                        self.m.settle_push(part, txn, "unknown")
                        self.m.violate(f"fresh {txn} answered duplicate: {r}")
                    else:
                        self.m.settle_push(part, txn, "refused")
                        self.m.count("push refusals")

    def pop(self, h, queue, group, batch, partitions):
        path = (f"/api/v1/pop/queue/{queue}?consumerGroup={group}&subscriptionMode=all&batch={batch}"
                f"&partitions={partitions}&wait=false&leaseSeconds={LEASE_SECONDS}")
        sent_at = time.monotonic()
        status, body = h.call("GET", path)
        if status == 204 or body is None:
            return [], None
        if status != 200:
            raise Lost(f"pop answered {status}: {str(body)[:200]}")
        msgs = [m for m in body.get("messages") or [] if m]
        for m in msgs:
            m.setdefault("queue", queue)
        with self.m.lock:
            for m in msgs:
                self.m.check_delivery(group, m, sent_at)
            self.m.count(f"delivered to {group}", len(msgs))
        return msgs, body.get("leaseId")

    def consumer(self, _i, rng, h):
        while not self.stop.is_set():
            queue = rng.choice(PRODUCER_QUEUES)
            msgs, _ = self.pop(h, queue, CONSUMER_GROUP, rng.randint(1, 50), rng.randint(1, 4))
            if not msgs:
                time.sleep(0.02)
                continue
            acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed",
                     "leaseId": m.get("leaseId") or None} for m in msgs]
            status, body = h.call("POST", "/api/v1/ack/batch", {"acknowledgments": acks, "consumerGroup": CONSUMER_GROUP})
            at = time.monotonic()
            if status != 200 or not isinstance(body, list) or len(body) != len(acks):
                raise Lost(f"ack answered {status}: {str(body)[:200]}")
            with self.m.lock:
                for m, r in zip(msgs, body):
                    if r.get("success"):
                        self.m.note_ack(CONSUMER_GROUP, queue, m["partition"], m["offset"], at)
                        self.m.count("acks")
                    else:
                        self.m.count("ack refusals")

    def stepper(self, i, rng, h):
        n = 0
        while not self.stop.is_set():
            queue = rng.choice(PRODUCER_QUEUES)
            msgs, lease = self.pop(h, queue, STEP_GROUP, rng.randint(1, 5), 1)
            with self.m.lock:
                part = self.m.parts[(STEP_QUEUE, f"s{i}-{rng.randrange(STEP_PARTITIONS_PER_STEPPER)}")]
                key = self.m.keys[f"step-{i}-{rng.randrange(STEP_KEYS_PER_STEPPER)}"]
                txn = f"c{self.cycle}.s{i}.{n}"
                n += 1
                self.m.send_push(part, txn)
                tag = txn
                self.m.kv_send(key, tag)
                expect = key.version
                timer = None
                if rng.random() < 0.3:
                    tpart = f"t{rng.randrange(TIMER_PARTITIONS)}"
                    timer = Timer(f"tm.{txn}", tpart)
                    self.m.timers[timer.key] = timer
                    self.m.send_push(self.m.parts[(TIMER_QUEUE, tpart)], timer.key)
            ops = [{"type": "push", "items": [{"queue": STEP_QUEUE, "partition": part.name, "transactionId": txn,
                                               "payload": {"t": txn}}]}]
            for m in msgs:
                ops.append({"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
                            "status": "completed", "consumerGroup": STEP_GROUP, "leaseId": m.get("leaseId") or lease})
            body = {"operations": ops, "requiredLeases": [lease] if msgs and lease else [],
                    "kv": [{"op": "put", "ns": KV_NS, "key": key.name, "value": {"w": tag}, "forever": True,
                            "expect": expect, "required": True}]}
            if timer is not None:
                body["timers"] = [{"op": "schedule", "queue": TIMER_QUEUE, "timerKey": timer.key,
                                   "payload": b64json({"t": timer.key}), "txn": timer.key,
                                   "partition": timer.partition, "delayMs": rng.randint(*TIMER_DELAY_MS)}]
            tparts = [(self.m.parts[(TIMER_QUEUE, timer.partition)], timer.key)] if timer else []
            try:
                status, res = h.call("POST", "/api/v1/transaction", body)
            except (Unsent, Lost) as e:
                self.settle_lost(e, [(part, txn)] + tparts, [(key, tag)], [timer] if timer else [])
                raise
            at = time.monotonic()
            if status != 200 or not isinstance(res, dict):
                self.settle_lost(Lost(""), [(part, txn)] + tparts, [(key, tag)], [timer] if timer else [])
                raise Lost(f"step answered {status}: {str(res)[:200]}")
            with self.m.lock:
                if res.get("success") is True:
                    self.step_committed(res, msgs, queue, part, txn, key, tag, timer, at)
                else:
                    reason = res.get("reason")
                    for p, t in [(part, txn)] + tparts:
                        self.m.settle_push(p, t, "refused")
                    self.m.kv_settle(key, tag, "refused")
                    if timer:
                        timer.state = "refused"
                    self.m.count("step refusals")
                    if reason != "rejected_ack":
                        self.m.violate(f"step {txn} refused ({reason}) though only a lapsed lease may refuse it: {res}")

    def step_committed(self, res, msgs, queue, part, txn, key, tag, timer, at):
        results = res.get("results") or []
        kv = [r for r in results if r.get("type") == "kv"]
        tm = [r for r in results if r.get("type") == "timer"]
        if len(kv) != 1 or not kv[0].get("applied") or not isinstance(kv[0].get("version"), int):
            self.m.violate(f"step {txn}: kv result {kv}")
            return
        self.m.settle_push(part, txn, "answered")
        self.m.kv_settle(key, tag, "answered", kv[0]["version"])
        for m in msgs:
            self.m.note_ack(STEP_GROUP, queue, m["partition"], m["offset"], at)
        if timer is not None:
            if len(tm) != 1 or tm[0].get("status") != "scheduled":
                self.m.violate(f"step {txn}: timer result {tm}")
            else:
                timer.state = "answered"
                timer.due = iso_ms(tm[0]["deliverAt"])
                self.m.settle_push(self.m.parts[(TIMER_QUEUE, timer.partition)], timer.key, "answered")
                self.m.count("timers")
        self.m.count("steps")
        self.m.count("acks", len(msgs))

    def kv_writer(self, _i, rng, h):
        while not self.stop.is_set():
            with self.m.lock:
                names = rng.sample([f"kv-{k}" for k in range(KV_KEYS)], rng.randint(1, 3))
                ops, sent = [], []
                for name in names:
                    key = self.m.keys[name]
                    tag = f"c{self.cycle}.k.{key.sent}"
                    self.m.kv_send(key, tag)
                    op = {"op": "put", "ns": KV_NS, "key": name, "value": {"w": tag}, "forever": True}
                    if rng.random() < 0.7:
                        op["expect"] = key.version
                    ops.append(op)
                    sent.append((key, tag))
            try:
                status, body = h.call("POST", "/api/v1/kv", {"operations": ops})
            except (Unsent, Lost) as e:
                self.settle_lost(e, [], sent)
                raise
            results = (body or {}).get("results") if isinstance(body, dict) else None
            if status != 200 or not isinstance(results, list) or len(results) != len(ops):
                self.settle_lost(Lost(""), [], sent)
                raise Lost(f"kv answered {status}: {str(body)[:200]}")
            with self.m.lock:
                for (key, tag), r in zip(sent, results):
                    if r.get("applied") and isinstance(r.get("version"), int):
                        self.m.kv_settle(key, tag, "answered", r["version"])
                        self.m.count("kv writes")
                    else:
                        self.m.kv_settle(key, tag, "refused")
                        self.m.violate(f"kv {key.name}: write {tag} (expect {key.version}) refused: {r}")

    def timer_writer(self, _i, rng, h):
        n = 0
        while not self.stop.is_set():
            ops, sent = [], []
            with self.m.lock:
                for _ in range(rng.randint(1, 3)):
                    t = Timer(f"tm.c{self.cycle}.{n}", f"t{rng.randrange(TIMER_PARTITIONS)}")
                    n += 1
                    self.m.timers[t.key] = t
                    self.m.send_push(self.m.parts[(TIMER_QUEUE, t.partition)], t.key)
                    ops.append({"op": "schedule", "queue": TIMER_QUEUE, "timerKey": t.key,
                                "payload": b64json({"t": t.key}), "txn": t.key, "partition": t.partition,
                                "delayMs": rng.randint(*TIMER_DELAY_MS)})
                    sent.append(t)
            pts = [(self.m.parts[(TIMER_QUEUE, t.partition)], t.key) for t in sent]
            try:
                status, body = h.call("POST", "/api/v1/timers", {"operations": ops})
            except (Unsent, Lost) as e:
                self.settle_lost(e, pts, (), sent)
                raise
            results = body.get("results") if isinstance(body, dict) else None
            if status != 200 or not isinstance(results, list) or len(results) != len(ops):
                self.settle_lost(Lost(""), pts, (), sent)
                raise Lost(f"timers answered {status}: {str(body)[:200]}")
            with self.m.lock:
                for t, (p, k), r in zip(sent, pts, results):
                    if r.get("ok") and r.get("status") == "scheduled":
                        t.state = "answered"
                        t.due = iso_ms(r["deliverAt"])
                        self.m.settle_push(p, k, "answered")
                        self.m.count("timers")
                    else:
                        t.state = "unknown"
                        self.m.settle_push(p, k, "unknown")
                        self.m.violate(f"timer {t.key}: schedule answered {r}")
            time.sleep(rng.uniform(0.005, 0.03))


class Node:
    def __init__(self, binary, port, data_dir, log_path):
        self.binary = binary
        self.port = port
        self.data_dir = data_dir
        self.log_path = log_path
        self.proc = None

    def start(self):
        env = dict(os.environ)
        env.setdefault("REGINA_DISK_HIGH_PCT", "100")
        env.setdefault("REGINA_DISK_LOW_PCT", "99")
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--data-dir", self.data_dir],
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        finally:
            log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        h = Http(self.port, timeout=2.0)
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise Violation(f"node exited with {self.proc.returncode} while starting; log {self.log_path}:\n"
                                    + tail(self.log_path))
                try:
                    status, _ = h.call("GET", "/health")
                    if status == 200:
                        return
                except (Unsent, Lost):
                    pass
                time.sleep(0.05)
        finally:
            h.close()
        raise Violation(f"node not healthy within {START_TIMEOUT_S:.0f} s; log:\n" + tail(self.log_path))

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)
        self.proc = None


def tail(path, n=30):
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
    except OSError:
        return ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Auditor:
    def __init__(self, model, port, rng):
        self.m = model
        self.rng = rng
        self.h = Http(port, timeout=30.0)

    def call(self, method, path, body=None):
        try:
            return self.h.call(method, path, body)
        except (Unsent, Lost) as e:
            raise Violation(f"audit: {method} {path} got no answer from the recovered node: {e}") from None

    def fetch(self, asks):
        """asks: [(part, offset)] -> {part: (records, hwm, log start)}, every record up to the hwm."""
        out = {p: [[], None, None] for p, _ in asks}
        todo = list(asks)
        while todo:
            batch, todo = todo[:FETCH_ENTRIES_MAX], todo[FETCH_ENTRIES_MAX:]
            entries = [{"queue": p.queue, "partition": p.name, "offset": off} for p, off in batch]
            status, body = self.call("POST", "/api/v1/fetch", {"entries": entries})
            if status != 200 or len(body.get("entries", [])) != len(batch):
                raise Violation(f"fetch answered {status}: {str(body)[:300]}")
            for (p, off), e in zip(batch, body["entries"]):
                err = e.get("error")
                if err == "UNKNOWN_TOPIC_OR_PARTITION":
                    out[p][1], out[p][2] = 0, 0
                    continue
                if err:
                    raise Violation(f"fetch {p.queue}/{p.name} from {off}: {err} (hwm {e.get('highWatermark')}, "
                                    f"log start {e.get('logStartOffset')})")
                recs = e.get("records") or []
                out[p][0].extend(recs)
                out[p][1], out[p][2] = e["highWatermark"], e["logStartOffset"]
                nxt = off + len(recs)
                if recs and recs[-1]["offset"] != nxt - 1:
                    raise Violation(f"fetch {p.queue}/{p.name}: offsets not gapless from {off}: "
                                    f"{[r['offset'] for r in recs[:5]]}...")
                if nxt < e["highWatermark"]:
                    todo.append((p, nxt))
        return out

    def partitions(self, deadline):
        """New records of every partition, checked; every answered write present."""
        asks = [(p, len(p.by_offset)) for p in self.m.parts.values()]
        got = self.fetch(asks)
        with self.m.lock:
            for p, (recs, hwm, start) in got.items():
                if hwm is None:
                    continue
                if start != 0:
                    self.m.violate(f"{p.queue}/{p.name}: log start {start}, nothing is ever dropped")
                if hwm < len(p.by_offset):
                    self.m.violate(f"{p.queue}/{p.name}: high watermark {hwm} went back below {len(p.by_offset)}")
                for r in recs:
                    self.record(p, r)
                if p.queue != TIMER_QUEUE:
                    missing = sorted(p.unseen_answered)
                    if missing:
                        self.m.violate(f"{p.queue}/{p.name}: {len(missing)} answered pushes missing, "
                                       f"e.g. {missing[:3]} (hwm {hwm})")
                self.m.count("audited messages", len(recs))
        if time.monotonic() > deadline:
            raise Violation("audit ran out of time")

    def record(self, p, r):
        txn, off = r.get("transactionId"), r.get("offset")
        where = f"{p.queue}/{p.name}@{off}"
        if off != len(p.by_offset):
            self.m.violate(f"{where}: expected offset {len(p.by_offset)}")
        p.by_offset.append(txn)
        st = p.state.get(txn)
        if st is None:
            self.m.violate(f"{where}: {txn} was never sent to this partition")
            return
        if st in ("unsent", "refused"):
            self.m.violate(f"{where}: {txn} is stored but was {st}")
        if txn in p.seen:
            self.m.violate(f"{where}: {txn} stored twice")
        p.seen.add(txn)
        p.unseen_answered.discard(txn)
        if not isinstance(r.get("payload"), dict) or r["payload"].get("t") != txn:
            self.m.violate(f"{where}: {txn} payload {r.get('payload')!r}")
        if txn in p.offset and p.offset[txn] != off:
            self.m.violate(f"{where}: {txn} answered at offset {p.offset[txn]}")
        if txn in p.order and p.queue != TIMER_QUEUE:  # timers fire by due time
            if p.order[txn] <= p.last_seen_rank:
                self.m.violate(f"{where}: {txn} answered before a write stored ahead of it")
            p.last_seen_rank = p.order[txn]

    def resample(self):
        """Records verified by earlier audits are still there, unchanged."""
        parts = [p for p in self.m.parts.values() if p.by_offset]
        asks = []
        for p in self.rng.sample(parts, min(RESAMPLE_PARTITIONS, len(parts))):
            asks.append((p, self.rng.randrange(len(p.by_offset))))
        for p, off in asks:
            entries = [{"queue": p.queue, "partition": p.name, "offset": off}]
            status, body = self.call("POST", "/api/v1/fetch", {"entries": entries})
            recs = (body.get("entries") or [{}])[0].get("records") or [] if status == 200 else None
            if recs is None:
                raise Violation(f"fetch answered {status}: {str(body)[:300]}")
            for r in recs[:RESAMPLE_WINDOW]:
                o = r["offset"]
                if o < len(p.by_offset) and p.by_offset[o] != r.get("transactionId"):
                    self.m.violate(f"{p.queue}/{p.name}@{o}: now {r.get('transactionId')}, "
                                   f"an earlier audit read {p.by_offset[o]}")

    def dedup_probe(self):
        """Answered transaction ids pushed again answer duplicate, with their offset."""
        with self.m.lock:
            oldest = min((c for c, at in self.m.cycle_started.items() if at > time.time() - DEDUP_PROBE_AGE_MAX_S),
                         default=None)
            pool = self.m.probe_pool
            start = bisect.bisect_left(pool, oldest, key=lambda e: e[0]) if oldest is not None else len(pool)
            if start >= len(pool):
                return
            picks = self.rng.sample(range(start, len(pool)), min(DEDUP_PROBES, len(pool) - start))
            probes = list({(pool[i][1].queue, pool[i][1].name, pool[i][2]): (pool[i][1], pool[i][2])
                           for i in picks}.values())
        items = [{"queue": p.queue, "partition": p.name, "transactionId": t, "payload": {"t": t}} for p, t in probes]
        status, body = self.call("POST", "/api/v1/push", {"items": items})
        if status // 100 != 2 or not isinstance(body, list) or len(body) != len(items):
            raise Violation(f"dedup probe answered {status}: {str(body)[:300]}")
        with self.m.lock:
            for (p, t), r in zip(probes, body):
                if r.get("status") != "duplicate" or r.get("offset") != p.offset[t]:
                    self.m.violate(f"{p.queue}/{p.name}: answered {t} (offset {p.offset[t]}) pushed again "
                                   f"answered {r}")
                self.m.count("dedup probes")

    def kv(self):
        with self.m.lock:
            names = sorted(self.m.keys)
        status, body = self.call("POST", "/api/v1/kv", {"operations": [{"op": "getMany", "ns": KV_NS, "keys": names}]})
        if status != 200:
            raise Violation(f"kv getMany answered {status}: {str(body)[:300]}")
        res = body["results"][0]
        rows = {r["key"]: r for r in res.get("rows") or []}
        with self.m.lock:
            for name in names:
                self.kv_key(self.m.keys[name], rows.get(name))
                self.m.count("audited kv rows")

    def kv_key(self, key, row):
        if row is None:
            if key.last is not None:
                self.m.violate(f"kv {key.name}: absent, though write {key.last[1]} (v{key.last[2]}) was answered")
            key.version = 0
            return
        tag = (row.get("value") or {}).get("w") if isinstance(row.get("value"), dict) else None
        v = row.get("version")
        w = key.writes.get(tag)
        if w is None or w[1] in ("unsent", "refused"):
            self.m.violate(f"kv {key.name}: holds {row.get('value')!r} v{v}, a write that was "
                           f"{'never sent' if w is None else w[1]}")
        if v < key.observed:
            self.m.violate(f"kv {key.name}: version {v} went back below {key.observed}")
        if key.last is not None:
            li, ltag, lv = key.last
            if v < lv:
                self.m.violate(f"kv {key.name}: version {v} below the last answered write's {lv}")
            if tag == ltag and v != lv:
                self.m.violate(f"kv {key.name}: holds {ltag} at v{v}, answered at v{lv}")
            if w is not None and w[0] < li:
                self.m.violate(f"kv {key.name}: holds {tag}, older than the answered {ltag}")
        key.observed = max(key.observed, v)
        key.version = v

    def timers(self, deadline, final=False):
        """Answered timers that are due fired (checked in partitions: at most once)."""
        grace_end = time.monotonic() + TIMER_FIRE_GRACE_S
        while True:
            now = time.time()
            with self.m.lock:
                due = [t for t in self.m.timers.values()
                       if t.state == "answered" and (final or t.due < now - 0.2)
                       and t.key not in self.m.parts[(TIMER_QUEUE, t.partition)].seen]
            if not due:
                break
            if time.monotonic() > min(grace_end, deadline):
                with self.m.lock:
                    self.m.violate(f"{len(due)} answered timers due but not fired, e.g. "
                                   f"{[(t.key, t.due) for t in due[:3]]}")
                return
            time.sleep(0.2)
            self.fetch_timer_fires()
        self.timer_rows()
        with self.m.lock:
            fired = sum(1 for t in self.m.timers.values()
                        if t.key in self.m.parts[(TIMER_QUEUE, t.partition)].seen)
            self.m.totals["timers fired"] = fired  # answered and unknown ones

    def fetch_timer_fires(self):
        asks = [(p, len(p.by_offset)) for p in self.m.parts.values() if p.queue == TIMER_QUEUE]
        got = self.fetch(asks)
        with self.m.lock:
            for p, (recs, _, _) in got.items():
                for r in recs:
                    self.record(p, r)

    def timer_rows(self):
        """The timer table: a fired timer's row is gone (it cannot fire again),
        and an answered timer that has not fired is still waiting."""
        self.fetch_timer_fires()
        rows, after = [], None
        for _ in range(1000):
            path = f"/api/v1/timers/{TIMER_QUEUE}?limit=1000" + (f"&after={after}" if after else "")
            status, body = self.call("GET", path)
            if status != 200:
                raise Violation(f"timer list answered {status}: {str(body)[:300]}")
            rows += body.get("rows") or []
            after = body.get("nextAfter")
            if not body.get("truncated"):
                break
        else:
            raise Violation("timer list did not end within 1000 pages")
        listed = set()
        with self.m.lock:
            for r in rows:
                k = r.get("timerKey")
                listed.add(k)
                t = self.m.timers.get(k)
                if t is None or t.state in ("unsent", "refused"):
                    self.m.violate(f"timer {k} is scheduled but was {'never sent' if t is None else t.state}")
                    continue
                if k in self.m.parts[(TIMER_QUEUE, t.partition)].seen:
                    self.m.violate(f"timer {k} fired but is still {r.get('state')} (it would fire again)")
                if r.get("state") != "pending" or r.get("txn") != k or r.get("partition") != t.partition:
                    self.m.violate(f"timer {k}: row {r}")
        self.fetch_timer_fires()
        with self.m.lock:
            lost = [t.key for t in self.m.timers.values() if t.state == "answered" and t.key not in listed
                    and t.key not in self.m.parts[(TIMER_QUEUE, t.partition)].seen]
            if lost:
                self.m.violate(f"{len(lost)} answered timers neither fired nor scheduled, e.g. {lost[:3]}")
            self.m.count("audited timer rows", len(rows))

    def full_reread(self, deadline):
        """The final audit: every partition read again from offset 0."""
        asks = [(p, 0) for p in self.m.parts.values()]
        got = self.fetch(asks)
        with self.m.lock:
            for p, (recs, hwm, _) in got.items():
                txns = [r.get("transactionId") for r in recs]
                if txns[:len(p.by_offset)] != p.by_offset or (hwm or 0) != len(p.by_offset):
                    self.m.violate(f"{p.queue}/{p.name}: a full re-read differs from the audited records")
        if time.monotonic() > deadline:
            raise Violation("final audit ran out of time")

    def run(self, final=False):
        deadline = time.monotonic() + AUDIT_BUDGET_S
        self.partitions(deadline)
        self.kv()
        self.timers(deadline, final)
        self.resample()
        self.dedup_probe()
        if final:
            self.full_reread(deadline)
        self.h.close()


def sabotage_lost_push(m):
    p = m.parts[(PRODUCER_QUEUES[0], "p00")]
    m.settle_push(p, "c1.never-stored", "answered", p.last_answered_offset + 1000)


def sabotage_order(m):
    p = next(p for p in m.parts.values() if p.queue == STEP_QUEUE and p.answered >= 2)
    a, b = [t for t, r in sorted(p.order.items(), key=lambda kv: kv[1])][-2:]
    p.order[a], p.order[b] = p.order[b], p.order[a]


def sabotage_kv_ahead(m):
    k = m.keys["kv-0"]
    k.last = (k.last[0], k.last[1], k.last[2] + 1_000_000)


def sabotage_timer(m):
    t = Timer("tm.never", "t0")
    t.state, t.due = "answered", time.time() - 10
    m.timers[t.key] = t
    m.settle_push(m.parts[(TIMER_QUEUE, "t0")], t.key, "answered")


def sabotage_timer_row(m):
    t = Timer("tm.unlisted", "t1")
    t.state, t.due = "answered", time.time() + 3600
    m.timers[t.key] = t
    m.settle_push(m.parts[(TIMER_QUEUE, "t1")], t.key, "answered")


def sabotage_refused(m):
    p = next(p for p in m.parts.values() if p.queue in PRODUCER_QUEUES and p.offset)
    p.state[next(iter(p.offset))] = "refused"


def sabotage_acked(m):
    p = next(p for p in m.parts.values() if p.queue in PRODUCER_QUEUES and p.offset)
    m.note_ack(CONSUMER_GROUP, p.queue, p.name, 1 << 40, 0.0)
    m.note_ack(STEP_GROUP, p.queue, p.name, 1 << 40, 0.0)


SABOTAGE = {"lost-push": sabotage_lost_push, "order": sabotage_order, "kv-ahead": sabotage_kv_ahead,
            "timer": sabotage_timer, "timer-row": sabotage_timer_row, "refused": sabotage_refused, "acked": sabotage_acked}


def summary(totals, keys):
    return ", ".join(f"{k} {totals.get(k, 0)}" for k in keys)


CYCLE_KEYS = ("pushes", "steps", "kv writes", "timers", "acks", "unknown", "unsent")
TOTAL_KEYS = ("pushes", "steps", "step refusals", "kv writes", "timers", "timers fired", "timers due while down", "acks", "ack refusals",
              "delivered to soak-c", "delivered to soak-s", "unknown", "unsent", "dedup probes",
              "audited messages", "audited kv rows", "audited timer rows")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--binary", default="target/release/regina")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--load-ms", type=int, default=2000, help="longest load before the kill (at least a quarter runs)")
    ap.add_argument("--outage-ms", type=int, default=600, help="longest pause between the kill and the restart")
    ap.add_argument("--port", type=int, default=0, help="default: a free port")
    ap.add_argument("--keep", action="store_true", help="keep the data directory and node log")
    ap.add_argument("--sabotage", choices=sorted(SABOTAGE), help="falsify the record after the first load, to "
                    "show the audit catches it (the run must fail)")
    args = ap.parse_args()
    if args.cycles < 1 or args.load_ms < 100 or args.outage_ms < 0:
        ap.error("--cycles must be at least 1, --load-ms at least 100 and --outage-ms not negative")
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        sys.exit(f"soak: no binary at {binary} (build: cargo build --release -p regina-server --bin regina)")
    rng = random.Random(seed)
    port = args.port or free_port()
    tmp = tempfile.mkdtemp(prefix="regina-soak-")
    node = Node(binary, port, os.path.join(tmp, "data"), os.path.join(tmp, "node.log"))
    model = Model()
    print(f"soak: seed {seed}, {args.cycles} cycles, load up to {args.load_ms} ms, port {port}, dir {tmp}", flush=True)

    def on_term(_sig, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    passed = 0
    ok = False
    interrupted = False
    try:
        node.start()
        for cycle in range(1, args.cycles + 1):
            model.cycle = {}
            model.cycle_started[cycle] = time.time()
            load = Load(model, port, cycle, rng)
            kill_after = rng.uniform(0.25, 1.0) * args.load_ms / 1000
            threads = load.run_threads()
            time.sleep(kill_after)
            node.kill()
            load.stop.set()
            for t in threads:
                t.join(timeout=REQUEST_TIMEOUT_S + 5)
            if any(t.is_alive() for t in threads):
                raise Violation("a load thread did not finish after the kill")
            if load.errors:
                raise Violation("; ".join(load.errors))
            if args.sabotage and cycle == 1:
                with model.lock:
                    SABOTAGE[args.sabotage](model)
            killed_at = time.time()
            time.sleep(rng.uniform(0, args.outage_ms / 1000))
            t0 = time.monotonic()
            node.start()
            restart = time.monotonic() - t0
            with model.lock:
                model.count("timers due while down", sum(1 for t in model.timers.values() if t.state == "answered"
                                                         and killed_at <= t.due <= time.time()))
            Auditor(model, port, random.Random(rng.randrange(1 << 62))).run()
            c = model.cycle
            line = (f"cycle {cycle}/{args.cycles}: killed at {kill_after * 1000:.0f} ms; answered {summary(c, CYCLE_KEYS)}; "
                    f"restart {restart:.2f} s; audit {time.monotonic() - t0 - restart:.2f} s")
            if model.violations:
                print(line + "; VIOLATIONS:", flush=True)
                for v in model.violations[:20]:
                    print(f"  {v}", flush=True)
                break
            passed += 1
            print(line + "; checks passed", flush=True)
        if not model.violations:
            Auditor(model, port, random.Random(rng.randrange(1 << 62))).run(final=True)
            for v in model.violations[:20]:
                print(f"  final audit: {v}", flush=True)
        ok = not model.violations and passed == args.cycles
    except Violation as e:
        print(f"soak: violation: {e}", flush=True)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        node.kill()
        if model.violations or not (ok or interrupted):
            print("node log tail:\n" + tail(node.log_path), flush=True)
        if args.keep:
            print(f"soak: kept {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(f"soak: totals: {summary(model.totals, TOTAL_KEYS)}", flush=True)
    if ok:
        print(f"soak: {passed}/{args.cycles} cycles checks passed in {elapsed:.0f} s (seed {seed})", flush=True)
        return 0
    if interrupted:
        print(f"soak: interrupted after {passed} of {args.cycles} cycles passed their checks (seed {seed})", flush=True)
        return 130
    print(f"soak: FAILED after {passed} of {args.cycles} cycles in {elapsed:.0f} s; reproduce with "
          f"--seed {seed} --cycles {args.cycles} --load-ms {args.load_ms}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
