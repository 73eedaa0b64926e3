#!/usr/bin/env python3
"""Network faults between three real Regina nodes, each in its own network namespace.

Three `regina` processes run in network namespaces of their own, joined by veth
pairs to a bridge in a hub namespace, where this script runs its load and its
audits (10.213.0.254; the nodes are 10.213.0.1-3, HTTP on 6632, Raft on 7632).
Each phase runs mixed load through all three nodes (pushes with client
transaction ids to 24 partitions, retried with the same ids; pops with acks as
one consumer group; KV puts with `expect`), applies one fault with a real
kernel mechanism inside a node's namespace for a few seconds, heals it, waits
for one leader and audits:

- nftables `numgen random mod 100 < P drop` on a node's ingress and egress
  (packet loss), on the leader and on every node;
- a `tbf` rate limit on the node's veth (queueing delay under load: what
  stands in for netem's delay, which this kernel lacks);
- `ip link set eth0 down` inside the node's namespace (a symmetric partition)
  of the leader and of a follower;
- nftables drops in one direction only (one-way partitions) of the leader.

The audit (after every heal, through the leader; at the end of each round
through each node in turn, with the group's leadership pinned to it so that
the node serves the reads from its own state):

- every answered push is stored exactly once, at the offset it was answered
  with, with its payload; offsets are gapless from 0; a push answered before
  another was first sent sits at a lower offset;
- a push refused with a 4xx (or never sent) is absent; a push whose answer
  never came (unknown) is stored at most once;
- answered transaction ids pushed again answer `duplicate` with the original
  offset, and half of the unknown pushes are retried after the heal;
- a pop sent after an answered ack of offset N of a partition never delivers
  offset N or below; the group's committed offset is at least every answered
  ack;
- a KV row's version never goes back and is at least the last answered
  write's; the row holds the last answered write or a later unknown one;
- the three nodes report one leader and the same applied index, their
  applied states have the same length and byte histogram at that index
  (the encoding is identical up to hash-map order), and the three per-node
  reads are identical.

Needs root (CAP_NET_ADMIN) and installs iproute2 and nftables with apt-get
when `ip`, `tc` or `nft` is missing. Every fault mechanism is checked before
the cluster starts; one that does not work fails the run. Every loop, request
and phase is bounded; the namespaces, the nodes and the temporary directory
are removed on every exit (Ctrl-C and SIGTERM included).

Standard library only. Thread interleavings are not reproducible, so a seed
replays the same choices (targets, batch shapes, delays), not the same schedule.
"""

import argparse
import ctypes
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SUBNET = "10.213.0"
CLIENT_ADDR = f"{SUBNET}.254"
HTTP_PORT = 6632
RAFT_PORT = 7632
NODES = (1, 2, 3)
QUEUE = "nf"
PARTITIONS = 24
PRODUCERS = 3
BATCH_MAX = 8
BAD_BATCH_EVERY = 15  # one batch in this many carries an invalid item: a 400
GROUP = "nf-c"
CONSUMERS = 2
LEASE_SECONDS = 3
KV_NS = "nf"
KV_KEYS = 12
REQUEST_TIMEOUT_S = 3.0
PUSH_ATTEMPTS = 4
RETRY_BUDGET_S = 10.0
START_TIMEOUT_S = 60.0
LEADER_TIMEOUT_S = 30.0
CONVERGE_TIMEOUT_S = 30.0
AUDIT_TIMEOUT_S = 15.0
DEDUP_PROBES = 16
FETCH_ENTRIES_MAX = 1000
KV_UNKNOWN_WINDOW_S = 90.0  # an unknown write may still apply this long after it was sent
NFT_TABLE = "rgnnf"
CLONE_NEWNET = 0x40000000


class Violation(Exception):
    """A check failed, or the harness itself could not do what it must."""


class SetupError(Exception):
    """The machine cannot run this test (a tool, a namespace, a fault mechanism)."""


class Unsent(Exception):
    """The connection could not be made: nothing was sent."""


class Lost(Exception):
    """The request may have reached the node; its answer was lost."""


# ---------------------------------------------------------------- HTTP


class Http:
    """One keep-alive connection to one address, a timeout on every request."""

    def __init__(self, host, port, timeout=REQUEST_TIMEOUT_S):
        self.host, self.port, self.timeout = host, port, timeout
        self.conn = None
        self.headers = {}

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def call(self, method, path, body=None, headers=None, raw=False):
        data = None if body is None else json.dumps(body).encode()
        if self.conn is None:
            c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                c.connect()
            except OSError as e:
                c.close()
                raise Unsent(repr(e)) from None
            self.conn = c
        hdrs = dict(headers or {})
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        try:
            self.conn.request(method, path, body=data, headers=hdrs)
            r = self.conn.getresponse()
            payload = r.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise Lost(repr(e)) from None
        self.headers = {k.lower(): v for k, v in r.getheaders()}
        if raw:
            return r.status, payload
        try:
            obj = json.loads(payload) if payload else None
        except ValueError:
            obj = {"unparsed": payload[:200].decode(errors="replace")}
        return r.status, obj


def addr(n):
    return f"{SUBNET}.{n}"


class Conns:
    """A thread's connections, one per node."""

    def __init__(self, timeout=REQUEST_TIMEOUT_S):
        self.by_node = {n: Http(addr(n), HTTP_PORT, timeout) for n in NODES}

    def call(self, n, method, path, body=None):
        return self.by_node[n].call(method, path, body)

    def close(self):
        for h in self.by_node.values():
            h.close()


def health(n, timeout=1.0):
    h = Http(addr(n), HTTP_PORT, timeout)
    try:
        status, body = h.call("GET", "/health")
        return body if isinstance(body, dict) else None
    except (Unsent, Lost):
        return None
    finally:
        h.close()


# ---------------------------------------------------------------- the network


def run(args, check=True, timeout=30):
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        if check:
            raise SetupError(f"`{' '.join(args)}` failed: {e}") from None
        return 1, "", str(e)
    if check and p.returncode != 0:
        raise SetupError(f"`{' '.join(args)}` exited {p.returncode}: {p.stderr.strip() or p.stdout.strip()}")
    return p.returncode, p.stdout, p.stderr


def ensure_tools():
    if os.geteuid() != 0:
        raise SetupError("needs root (CAP_NET_ADMIN) to make network namespaces")
    for d in ("/usr/sbin", "/sbin"):
        if d not in os.environ.get("PATH", "").split(":"):
            os.environ["PATH"] = os.environ.get("PATH", "") + ":" + d
    need = []
    if not shutil.which("ip") or not shutil.which("tc"):
        need.append("iproute2")
    if not shutil.which("nft"):
        need.append("nftables")
    if need:
        if not shutil.which("apt-get"):
            raise SetupError(f"missing {', '.join(need)} and no apt-get to install them")
        print(f"netfaults: installing {' '.join(need)} (apt-get)", flush=True)
        rc, _, _ = run(["apt-get", "install", "-y", "-qq", *need], check=False, timeout=600)
        if rc != 0:
            run(["apt-get", "update", "-qq"], timeout=600)
            run(["apt-get", "install", "-y", "-qq", *need], timeout=600)
    for tool in ("ip", "tc", "nft"):
        if not shutil.which(tool):
            raise SetupError(f"`{tool}` is still missing after installing {need}")


def setns(path):
    """Moves this (still single-threaded) process into the network namespace at path."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise SetupError(f"setns({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def run_alive(pid):
    """Whether pid is a live (not zombie) run of this script."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"netfaults" in f.read()
    except (OSError, IndexError):
        return False


class Net:
    """A hub namespace with a bridge and three node namespaces on it, this run's own."""

    def __init__(self, tag):
        self.hub = f"rgn-nf{tag}-hub"
        self.ns = {n: f"rgn-nf{tag}-{n}" for n in NODES}
        self.made = []

    @staticmethod
    def remove_stale():
        """Namespaces left by runs that were SIGKILLed (their pid is gone)."""
        _, out, _ = run(["ip", "netns", "list"], check=False)
        for line in out.splitlines():
            m = re.match(r"(rgn-nf(\d+)-(?:hub|\d))\b", line.strip())
            if not m:
                continue
            if run_alive(int(m.group(2))):
                continue
            Net.kill_pids(m.group(1))
            run(["ip", "netns", "del", m.group(1)], check=False)
            print(f"netfaults: removed stale namespace {m.group(1)}", flush=True)

    @staticmethod
    def kill_pids(ns):
        _, out, _ = run(["ip", "netns", "pids", ns], check=False)
        for pid in out.split():
            if pid.isdigit() and int(pid) != os.getpid():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def setup(self):
        run(["ip", "netns", "add", self.hub])
        self.made.append(self.hub)
        h = ["ip", "-n", self.hub]
        run(h + ["link", "set", "lo", "up"])
        run(h + ["link", "add", "br0", "type", "bridge"])
        run(h + ["addr", "add", f"{CLIENT_ADDR}/24", "dev", "br0"])
        run(h + ["link", "set", "br0", "up"])
        for n, ns in self.ns.items():
            run(["ip", "netns", "add", ns])
            self.made.append(ns)
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            run(h + ["link", "add", f"v{n}", "type", "veth", "peer", "name", "eth0", "netns", ns])
            run(h + ["link", "set", f"v{n}", "master", "br0"])
            run(h + ["link", "set", f"v{n}", "up"])
            run(["ip", "-n", ns, "addr", "add", f"{addr(n)}/24", "dev", "eth0"])
            run(["ip", "-n", ns, "link", "set", "eth0", "up"])

    def teardown(self):
        for ns in reversed(self.made):
            if ns != self.hub:
                self.kill_pids(ns)
        for ns in reversed(self.made):
            run(["ip", "netns", "del", ns], check=False)
        self.made = []

    # -- faults, each inside one node's namespace

    def nft_drop(self, n, pct, dirs):
        """Drops pct % of the packets of eth0 in the given directions ('in', 'out')."""
        chains = []
        for d, hook, match in (("in", "input", "iifname"), ("out", "output", "oifname")):
            rules = [f'{match} "eth0" counter']
            if d in dirs:
                cond = "" if pct >= 100 else f"numgen random mod 100 < {pct} "
                rules.append(f'{match} "eth0" {cond}counter drop')
            body = "\n    ".join(rules)
            chains.append(f"  chain {hook} {{\n    type filter hook {hook} priority 0; policy accept;\n    {body}\n  }}")
        ruleset = f"table inet {NFT_TABLE} {{\n" + "\n".join(chains) + "\n}\n"
        p = subprocess.run(["ip", "netns", "exec", self.ns[n], "nft", "-f", "-"], input=ruleset, text=True,
                           capture_output=True, timeout=30)
        if p.returncode != 0:
            raise SetupError(f"nft in {self.ns[n]}: {p.stderr.strip()}")

    def nft_clear(self, n):
        run(["ip", "netns", "exec", self.ns[n], "nft", "delete", "table", "inet", NFT_TABLE], check=False)

    def nft_counters(self, n):
        """{'input': (seen, dropped), 'output': (seen, dropped)} packets."""
        _, out, _ = run(["ip", "netns", "exec", self.ns[n], "nft", "-j", "list", "table", "inet", NFT_TABLE])
        got = {"input": [0, 0], "output": [0, 0]}
        for item in json.loads(out).get("nftables", []):
            rule = item.get("rule")
            if not rule:
                continue
            exprs = rule.get("expr", [])
            pk = next((e["counter"]["packets"] for e in exprs if "counter" in e), 0)
            drop = any("drop" in e for e in exprs)
            got[rule["chain"]][1 if drop else 0] += pk
        return {k: tuple(v) for k, v in got.items()}

    def tbf(self, n, rate, burst, latency):
        run(["tc", "-n", self.ns[n], "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", burst,
             "latency", latency])

    def tbf_clear(self, n):
        run(["tc", "-n", self.ns[n], "qdisc", "del", "dev", "eth0", "root"], check=False)

    def tbf_stats(self, n):
        _, out, _ = run(["tc", "-n", self.ns[n], "-j", "-s", "qdisc", "show", "dev", "eth0"])
        for q in json.loads(out):
            if q.get("kind") == "tbf":
                return q
        return None

    def link(self, n, up):
        run(["ip", "-n", self.ns[n], "link", "set", "eth0", "up" if up else "down"])

    def link_state(self, n):
        _, out, _ = run(["ip", "-n", self.ns[n], "-j", "link", "show", "eth0"])
        info = json.loads(out)[0]
        return "UP" in info.get("flags", [])

    def clear(self, n):
        self.nft_clear(n)
        self.tbf_clear(n)
        self.link(n, True)


def reachable(n, timeout=0.7):
    """True when node n's address answers a TCP SYN (a connection or a refusal)."""
    try:
        socket.create_connection((addr(n), HTTP_PORT), timeout=timeout).close()
        return True
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def probe_mechanisms(net):
    """Each fault mechanism, tried before any node runs; one that fails fails the run."""
    lines = []
    for n in NODES:
        if not reachable(n):
            raise SetupError(f"node address {addr(n)} is not reachable from the hub before any fault")
    # nftables with numgen: 100 % of ingress drops everything, then nothing.
    net.nft_drop(1, 100, ("in",))
    if reachable(1):
        raise SetupError("an nftables drop of all ingress did not cut node 1's address")
    cnt = net.nft_counters(1)
    net.nft_clear(1)
    if cnt["input"][1] == 0 or not reachable(1):
        raise SetupError(f"nftables counters {cnt} or reachability after removal are wrong")
    # numgen random: half of the SYNs to node 2 dropped, so some connects time out, not all.
    net.nft_drop(2, 50, ("in",))
    tries = [reachable(2, timeout=0.2) for _ in range(20)]
    c2 = net.nft_counters(2)
    net.nft_clear(2)
    if all(tries) or not any(tries):
        raise SetupError(f"nftables numgen 50 % loss let {sum(tries)} of 20 connects through ({c2})")
    lines.append(f"nftables drop of everything ({cnt['input'][1]} SYNs dropped); numgen random 50 % loss "
                 f"({sum(tries)} of 20 connects through, {c2['input'][1]} of {c2['input'][0]} packets dropped)")
    # one direction: egress only
    net.nft_drop(3, 100, ("out",))
    if reachable(3):
        raise SetupError("an nftables drop of all egress did not cut node 3's answers")
    net.nft_clear(3)
    lines.append("one-way nftables drop works")
    # tbf
    net.tbf(1, "1mbit", "16kb", "400ms")
    st = net.tbf_stats(1)
    net.tbf_clear(1)
    if st is None:
        raise SetupError("a tbf qdisc did not show after being added")
    lines.append(f"tbf qdisc ({st['options']})")
    # netem is what would give delay, jitter and reordering: say whether it exists.
    rc, _, err = run(["tc", "-n", net.ns[2], "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "1ms"], check=False)
    if rc == 0:
        net.tbf_clear(2)
        lines.append("netem is available (unused: the test stays the same on kernels without it)")
    else:
        lines.append(f"netem is not available ({err.strip()}): tbf stands in for delay, nothing for reordering")
    # link down
    net.link(2, False)
    down_ok = not net.link_state(2) and not reachable(2)
    net.link(2, True)
    t0 = time.monotonic()
    while not reachable(2) and time.monotonic() - t0 < 5:
        time.sleep(0.1)
    if not down_ok or not reachable(2):
        raise SetupError("`ip link set eth0 down/up` inside a node's namespace did not cut and restore it")
    lines.append("link down/up cuts and restores a node")
    return lines


# ---------------------------------------------------------------- nodes


class Node:
    def __init__(self, n, net, binary, root, token_file, groups):
        self.n = n
        self.groups = groups
        self.net = net
        self.binary = binary
        self.data_dir = os.path.join(root, f"node{n}")
        self.log_path = os.path.join(root, f"node{n}.log")
        self.token_file = token_file
        self.proc = None

    def start(self):
        peers = ",".join(f"{i}={addr(i)}:{RAFT_PORT}" for i in NODES)
        env = dict(os.environ)
        env.setdefault("REGINA_DISK_HIGH_PCT", "100")
        env.setdefault("REGINA_DISK_LOW_PCT", "99")
        cmd = ["ip", "netns", "exec", self.net.ns[self.n], self.binary, "--node-id", str(self.n), "--bind", addr(self.n),
               "--port", str(HTTP_PORT), "--raft-addr", f"{addr(self.n)}:{RAFT_PORT}", "--peers", peers,
               "--data-dir", self.data_dir, "--cluster-token-file", self.token_file, "--raft-groups", str(self.groups)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.proc = None


def tail(path, n=25):
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
    except OSError:
        return ""


class Cluster:
    def __init__(self, net, binary, root, groups):
        self.net = net
        self.root = root
        self.token_file = os.path.join(root, "cluster.token")
        with open(os.open(self.token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        with open(self.token_file) as f:
            self.token = f.readline().strip()
        self.nodes = {n: Node(n, net, binary, root, self.token_file, groups) for n in NODES}

    def start(self):
        for node in self.nodes.values():
            node.start()
        return self.wait_one_leader(START_TIMEOUT_S)

    def check_alive(self):
        for node in self.nodes.values():
            if not node.alive():
                code = node.proc.returncode if node.proc else None
                raise Violation(f"node {node.n} exited ({code}); log:\n{tail(node.log_path)}")

    def kill(self):
        for node in self.nodes.values():
            node.kill()

    def views(self):
        return {n: health(n) for n in NODES}

    def wait_one_leader(self, within):
        """(leader, seconds) once every node names the same leader and it says it leads."""
        t0 = time.monotonic()
        last = None
        while time.monotonic() - t0 < within:
            self.check_alive()
            v = self.views()
            last = {n: (h or {}).get("leader") for n, h in v.items()}
            leaders = set(last.values())
            if len(leaders) == 1 and None not in leaders:
                ld = leaders.pop()
                if (v[ld] or {}).get("role") == "leader":
                    return ld, time.monotonic() - t0
            time.sleep(0.1)
        raise Violation(f"no single leader within {within:.0f} s (leaders seen {last})")

    def wait_converged(self, within):
        """The applied index every node reports, once they agree with the commit index."""
        t0 = time.monotonic()
        last = None
        while time.monotonic() - t0 < within:
            v = self.views()
            last = {n: ((h or {}).get("appliedIndex"), (h or {}).get("commitIndex")) for n, h in v.items()}
            vals = set(last.values())
            if len(vals) == 1 and None not in next(iter(vals)) and len(set(next(iter(vals)))) == 1:
                return next(iter(vals))[0]
            time.sleep(0.1)
        raise Violation(f"applied and commit indexes did not converge within {within:.0f} s: {last}")

    def state_dump(self, n):
        h = Http(addr(n), RAFT_PORT, timeout=AUDIT_TIMEOUT_S)
        try:
            status, data = h.call("GET", "/internal/g/0/state", headers={"x-regina-cluster-token": self.token}, raw=True)
            if status != 200:
                raise Violation(f"node {n}: the state dump answered {status}: {data[:200]!r}")
            return int(h.headers.get("x-regina-applied-index", "-1")), data
        except (Unsent, Lost) as e:
            raise Violation(f"node {n}: the state dump got no answer: {e}") from None
        finally:
            h.close()


class Monitor(threading.Thread):
    """Polls every node's /health: the (term, leader) pairs seen during the run."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.terms = {}
        self.lock = threading.Lock()

    def run(self):
        while not self.stop.is_set():
            for n in NODES:
                h = health(n, timeout=0.5)
                if h and h.get("leader") is not None and h.get("term") is not None:
                    with self.lock:
                        self.terms.setdefault(h["term"], h["leader"])
            self.stop.wait(0.2)

    def leader_terms(self):
        with self.lock:
            return len(self.terms)


# ---------------------------------------------------------------- the model


class Push:
    __slots__ = ("txn", "part", "state", "offset", "first_send", "answered_at", "how")

    def __init__(self, txn, part, now):
        self.txn, self.part = txn, part
        self.state = "pending"  # pending | answered | unknown | unsent | refused
        self.offset = None
        self.first_send = now
        self.answered_at = None
        self.how = None  # queued | duplicate (of an earlier attempt) | resolved-queued | resolved-duplicate


class Key:
    """Writes to one KV row in the order they were sent (one writer)."""

    def __init__(self, name):
        self.name = name
        self.writes = {}  # tag -> [index, state, version]
        self.sent = 0
        self.last = None  # (index, tag, version) of the last answered write
        self.version = 0  # what the writer believes the version is
        self.certain = True
        self.observed = 0  # highest version answered or read
        self.unknown_at = None  # monotonic time of the last unknown write


class Model:
    def __init__(self):
        self.lock = threading.Lock()
        self.parts = {f"p{i:02}": {} for i in range(PARTITIONS)}  # partition -> {txn: Push}
        self.keys = {f"k{i:02}": Key(f"k{i:02}") for i in range(KV_KEYS)}
        self.acked = {}  # partition -> [(answer time, highest acked offset so far)]
        self.totals = {}
        self.phase = {}
        self.violations = []  # (family, message), found while the load ran
        self.latencies = []

    def count(self, what, n=1):
        self.phase[what] = self.phase.get(what, 0) + n
        self.totals[what] = self.totals.get(what, 0) + n

    def violate(self, family, msg):
        self.violations.append((family, msg))

    def answered(self):
        return [p for part in self.parts.values() for p in part.values() if p.state == "answered"]

    def note_ack(self, partition, offset, at):
        log = self.acked.setdefault(partition, [])
        top = max(offset, log[-1][1]) if log else offset
        log.append((at, top))

    def check_delivery(self, m, sent_at):
        partition, txn, off = m.get("partition"), m.get("transactionId"), m.get("offset")
        part = self.parts.get(partition)
        p = part.get(txn) if part is not None else None
        if p is None or p.state in ("unsent", "refused"):
            self.violate("deliveries", f"delivered {txn} at {partition}/{off}: "
                         f"{'never sent' if p is None else p.state}")
            return
        if p.offset is not None and p.offset != off:
            self.violate("deliveries", f"delivered {txn} at offset {off}, answered at {p.offset}")
        for at, top in reversed(self.acked.get(partition, [])):
            if at < sent_at:
                if off is not None and off <= top:
                    self.violate("redelivery", f"{partition} offset {off} ({txn}) delivered by a pop sent after "
                                 f"an answered ack up to offset {top}")
                break

    def kv_settle(self, key, tag, state, version=None):
        w = key.writes[tag]
        w[1] = state
        if state == "answered":
            w[2] = version
            if key.last is not None and version <= key.last[2]:
                self.violate("kv", f"kv {key.name}: answered version {version} not above {key.last[2]}")
            if version < key.observed:
                self.violate("kv", f"kv {key.name}: answered version {version} below one seen before ({key.observed})")
            key.last = (w[0], tag, version)
            key.version = version
            key.observed = max(key.observed, version)
        elif state == "unknown":
            key.certain = False
            key.unknown_at = time.monotonic()


# ---------------------------------------------------------------- load


class Load:
    """The threads of one phase; they run until stop is set."""

    def __init__(self, model, tag, rng):
        self.m = model
        self.tag = tag
        self.stop = threading.Event()
        self.seeds = [rng.randrange(1 << 62) for _ in range(PRODUCERS + CONSUMERS + 1)]
        self.errors = []
        self.threads = []

    def start(self):
        targets = [(self.producer, i) for i in range(PRODUCERS)]
        targets += [(self.consumer, i) for i in range(CONSUMERS)]
        targets += [(self.kv_writer, 0)]
        for n, (fn, i) in enumerate(targets):
            t = threading.Thread(target=self.guard, args=(fn, i, random.Random(self.seeds[n])), daemon=True)
            t.start()
            self.threads.append(t)

    def finish(self):
        self.stop.set()
        deadline = time.monotonic() + RETRY_BUDGET_S + REQUEST_TIMEOUT_S + 10
        for t in self.threads:
            t.join(timeout=max(0.1, deadline - time.monotonic()))
        if any(t.is_alive() for t in self.threads):
            raise Violation("a load thread did not finish within its bound")
        if self.errors:
            raise Violation("; ".join(self.errors))

    def guard(self, fn, i, rng):
        c = Conns()
        try:
            fn(i, rng, c)
        except Exception as e:  # a bug in the harness
            self.errors.append(f"{fn.__name__}[{i}]: {e!r}")
        finally:
            c.close()

    def send_with_retries(self, c, rng, method, path, body, accept, attempts=PUSH_ATTEMPTS):
        """('answered', body, maybe_applied_before) | ('refused', body, _) | ('unknown'|'unsent', None, _).

        accept(status, body) says whether an answer is final. A 503 or 429 that
        is not final is retried (same body, so the same transaction ids), a lost
        answer too, each time through a node picked at random."""
        maybe_sent = False
        t0 = time.monotonic()
        for attempt in range(attempts):
            if attempt and (self.stop.is_set() or time.monotonic() - t0 > RETRY_BUDGET_S):
                break
            n = rng.choice(NODES)
            try:
                status, res = c.call(n, method, path, body)
            except Unsent:
                time.sleep(rng.uniform(0.05, 0.2))
                continue
            except Lost:
                maybe_sent = True
                self.m_count("lost answers")
                continue
            verdict = accept(status, res)
            if verdict == "answered":
                return "answered", res, maybe_sent
            if verdict == "refused":
                return "refused", res, maybe_sent
            code = (res or {}).get("code") if isinstance(res, dict) else None
            if code not in ("no_leader", "no_quorum", "overloaded"):
                maybe_sent = True  # outcome_unknown or anything else: it may have been applied
            self.m_count(f"retried {status} {code}")
            time.sleep(rng.uniform(0.05, 0.25))
        return ("unknown" if maybe_sent else "unsent"), None, maybe_sent

    def m_count(self, what):
        with self.m.lock:
            self.m.count(what)

    def producer(self, i, rng, c):
        mine = [name for k, name in enumerate(self.m.parts) if k % PRODUCERS == i]
        seq = 0

        def accept(status, res):
            if status == 201 and isinstance(res, list):
                return "answered"
            if 400 <= status < 500 and status != 429:
                return "refused"
            return "retry"

        while not self.stop.is_set():
            items, sent = [], []
            now = time.monotonic()
            with self.m.lock:
                for _ in range(rng.randint(1, BATCH_MAX)):
                    partition = rng.choice(mine)
                    txn = f"{self.tag}.p{i}.{seq}"
                    seq += 1
                    p = Push(txn, partition, now)
                    self.m.parts[partition][txn] = p
                    items.append({"queue": QUEUE, "partition": partition, "transactionId": txn, "payload": {"t": txn}})
                    sent.append(p)
            bad = rng.randrange(BAD_BATCH_EVERY) == 0
            if bad:  # a queue name must not be empty: the whole push is refused
                items.insert(rng.randrange(len(items) + 1), {"queue": "", "partition": "x", "payload": {}})
            t0 = time.monotonic()
            # One batch in four is sent once and never retried, so some answers stay unknown.
            attempts = 1 if rng.random() < 0.25 else PUSH_ATTEMPTS
            verdict, res, maybe_before = self.send_with_retries(c, rng, "POST", "/api/v1/push", {"items": items}, accept,
                                                                attempts)
            at = time.monotonic()
            with self.m.lock:
                self.settle_pushes(sent, verdict, res, maybe_before, bad, at, (t0, at - t0))
            time.sleep(rng.uniform(0.002, 0.01))

    def settle_pushes(self, sent, verdict, res, maybe_before, bad, at, took):
        m = self.m
        if verdict == "refused":
            for p in sent:
                p.state = "refused"
            m.count("refused pushes (4xx)", len(sent))
            if not bad:
                m.violate("answers", f"a valid push was refused: {str(res)[:300]}")
            return
        if verdict in ("unknown", "unsent"):
            for p in sent:
                p.state = verdict
            m.count(f"{verdict} pushes", len(sent))
            return
        if bad:
            m.violate("answers", f"a push with an empty queue name was answered: {str(res)[:300]}")
        if len(res) != len(sent):
            m.violate("answers", f"a push of {len(sent)} items answered {len(res)}")
            for p in sent:
                p.state = "unknown"
            return
        m.latencies.append(took)
        last = {}
        for p, r in zip(sent, res):
            st = r.get("status")
            if st not in ("queued", "duplicate") or not isinstance(r.get("offset"), int):
                p.state = "unknown"
                m.violate("answers", f"{p.txn}: item answered {r}")
                continue
            if st == "duplicate" and not maybe_before:
                m.violate("answers", f"{p.txn}: answered duplicate though no earlier attempt can have reached a node: {r}")
            p.state, p.offset, p.answered_at, p.how = "answered", r["offset"], at, st
            if p.part in last and last[p.part] >= p.offset:
                m.violate("order", f"{p.txn}: offset {p.offset} in {p.part} not after the same push's earlier item "
                          f"at {last[p.part]}")
            last[p.part] = p.offset
            m.count("answered pushes")
            if st == "duplicate":
                m.count("retries answered duplicate")

    def consumer(self, i, rng, c):
        while not self.stop.is_set():
            n = rng.choice(NODES)
            path = (f"/api/v1/pop/queue/{QUEUE}?consumerGroup={GROUP}&subscriptionMode=all"
                    f"&batch={rng.randint(1, 32)}&partitions={rng.randint(1, 4)}&wait=false&leaseSeconds={LEASE_SECONDS}")
            sent_at = time.monotonic()
            try:
                status, body = c.call(n, "GET", path)
            except (Unsent, Lost):
                self.m_count("lost pops")
                time.sleep(0.05)
                continue
            if status != 200 or not isinstance(body, dict):
                time.sleep(0.03 if status == 204 else 0.1)
                continue
            msgs = [m for m in body.get("messages") or [] if m]
            with self.m.lock:
                for m in msgs:
                    self.m.check_delivery(m, sent_at)
                self.m.count("deliveries", len(msgs))
            if not msgs:
                continue
            acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed",
                     "leaseId": m.get("leaseId") or body.get("leaseId")} for m in msgs]
            try:
                status, res = c.call(rng.choice(NODES), "POST", "/api/v1/ack/batch",
                                     {"acknowledgments": acks, "consumerGroup": GROUP})
            except (Unsent, Lost):
                self.m_count("lost acks")
                continue
            at = time.monotonic()
            if status != 200 or not isinstance(res, list) or len(res) != len(acks):
                self.m_count(f"ack answered {status}")
                continue
            with self.m.lock:
                for m, r in zip(msgs, res):
                    if r.get("success"):
                        self.m.note_ack(m["partition"], m["offset"], at)
                        self.m.count("answered acks")
                    else:
                        self.m.count("refused acks")

    def kv_read(self, c, rng, names):
        """{name: row or None} read through some node, or None when no node answered."""
        for _ in range(3):
            try:
                status, body = c.call(rng.choice(NODES), "POST", "/api/v1/kv",
                                      {"operations": [{"op": "getMany", "ns": KV_NS, "keys": names}]})
            except (Unsent, Lost):
                continue
            if status == 200 and isinstance(body, dict):
                rows = {r["key"]: r for r in body["results"][0].get("rows") or []}
                return {name: rows.get(name) for name in names}
            time.sleep(0.1)
        return None

    def kv_writer(self, _i, rng, c):
        while not self.stop.is_set():
            with self.m.lock:
                names = rng.sample(sorted(self.m.keys), rng.randint(1, 3))
                uncertain = [n for n in names if not self.m.keys[n].certain]
            if uncertain:
                rows = self.kv_read(c, rng, uncertain)
                if rows is None:
                    time.sleep(0.1)
                    continue
                with self.m.lock:
                    for name, row in rows.items():
                        key = self.m.keys[name]
                        for fam, msg in check_kv_row(key, row, "load read"):
                            self.m.violate(fam, msg)
                        key.version = row["version"] if row else 0
                        key.observed = max(key.observed, key.version)
                        key.certain = True
            with self.m.lock:
                ops, sent = [], []
                for name in names:
                    key = self.m.keys[name]
                    tag = f"{self.tag}.k.{key.sent}"
                    key.writes[tag] = [key.sent, "pending", None]
                    key.sent += 1
                    ops.append({"op": "put", "ns": KV_NS, "key": name, "value": {"w": tag}, "forever": True,
                                "expect": key.version})
                    sent.append((key, tag))

            def accept(status, res):
                if status == 200 and isinstance(res, dict) and isinstance(res.get("results"), list):
                    return "answered"
                return "refused" if 400 <= status < 500 and status != 429 else "retry"

            verdict, res, maybe_before = self.send_with_retries(c, rng, "POST", "/api/v1/kv", {"operations": ops},
                                                                accept)
            with self.m.lock:
                self.settle_kv(sent, verdict, res, maybe_before)
            time.sleep(rng.uniform(0.005, 0.02))

    def settle_kv(self, sent, verdict, res, maybe_before):
        m = self.m
        if verdict != "answered" or len(res["results"]) != len(sent):
            for key, tag in sent:
                m.kv_settle(key, tag, "unknown" if verdict != "unsent" else "unsent")
            if verdict == "refused":
                m.violate("answers", f"a KV write was refused: {str(res)[:300]}")
            m.count("unknown kv writes" if verdict != "unsent" else "unsent kv writes", len(sent))
            return
        for (key, tag), r in zip(sent, res["results"]):
            if r.get("applied") and isinstance(r.get("version"), int):
                m.kv_settle(key, tag, "answered", r["version"])
                m.count("answered kv writes")
                continue
            if maybe_before:  # an earlier attempt of this very write may have been applied
                m.kv_settle(key, tag, "unknown")
                m.count("kv expect misses after an unknown write")
                continue
            m.kv_settle(key, tag, "refused")
            key.certain = False
            recent = key.unknown_at is not None and time.monotonic() - key.unknown_at < KV_UNKNOWN_WINDOW_S
            if recent:
                m.count("kv expect misses after an unknown write")
            else:
                m.violate("kv", f"kv {key.name}: write {tag} (expect {key.version}) refused with no unknown write "
                          f"before it: {r}")


# ---------------------------------------------------------------- the audit


def check_kv_row(key, row, where):
    out = []
    name = key.name
    if row is None:
        if key.last is not None:
            out.append(("kv", f"{where}: kv {name} absent, though write {key.last[1]} (v{key.last[2]}) was answered"))
        return out
    v = row.get("version")
    tag = row["value"].get("w") if isinstance(row.get("value"), dict) else None
    w = key.writes.get(tag)
    if w is None or w[1] in ("unsent", "refused"):
        out.append(("kv", f"{where}: kv {name} holds {row.get('value')!r} v{v}, a write that was "
                    f"{'never sent' if w is None else w[1]}"))
    if not isinstance(v, int) or v < key.observed:
        out.append(("kv", f"{where}: kv {name} version {v} went back below {key.observed}"))
    if key.last is not None:
        li, ltag, lv = key.last
        if isinstance(v, int) and v < lv:
            out.append(("kv", f"{where}: kv {name} version {v} below the last answered write's {lv}"))
        if tag == ltag and v != lv:
            out.append(("kv", f"{where}: kv {name} holds {ltag} at v{v}, answered at v{lv}"))
        if w is not None and w[0] < li:
            out.append(("kv", f"{where}: kv {name} holds {tag}, older than the answered {ltag}"))
    return out


class Snap:
    """What one node served: every partition from offset 0, the KV rows, the group's cursors."""

    def __init__(self, node):
        self.node = node
        self.parts = {}  # partition -> (records, hwm, log start)
        self.kv = {}
        self.cursors = {}

    def digest(self):
        return ({p: [(r.get("offset"), r.get("transactionId")) for r in recs] for p, (recs, _, _) in self.parts.items()},
                {k: (r or {}).get("version") for k, r in self.kv.items()}, dict(self.cursors))


def extends(a, b):
    """(why not, extra records) when the later read b should extend the earlier read a.

    Reads through different nodes are minutes apart at most but not at one
    instant: a push whose answer was lost may still be applied in between
    (a request the kernel was still retransmitting), so b may hold more."""
    extra = 0
    for k in sorted(set(a[0]) | set(b[0])):
        x, y = a[0].get(k, []), b[0].get(k, [])
        if y[:len(x)] != x:
            return digest_diff(a, b), extra
        extra += len(y) - len(x)
    for k in sorted(set(a[1]) | set(b[1])):
        if (b[1].get(k) or 0) < (a[1].get(k) or 0):
            return f"KV {k} version {b[1].get(k)} after {a[1].get(k)}", extra
    for k in sorted(set(a[2]) | set(b[2])):
        if b[2].get(k, -1) < a[2].get(k, -1):
            return f"cursor of {k} {b[2].get(k)} after {a[2].get(k)}", extra
    return None, extra


def digest_diff(a, b):
    """The first difference between two Snap digests, in words."""
    for what, x, y in (("messages", a[0], b[0]), ("KV versions", a[1], b[1]), ("cursors", a[2], b[2])):
        for k in sorted(set(x) | set(y)):
            if x.get(k) != y.get(k):
                xv, yv = x.get(k), y.get(k)
                if isinstance(xv, list) and isinstance(yv, list):
                    i = next((i for i, (u, v) in enumerate(zip(xv, yv)) if u != v), min(len(xv), len(yv)))
                    return f"{what} of {k}: {len(xv)} vs {len(yv)} entries, first differing at {i}: " \
                           f"{xv[i:i + 2]} vs {yv[i:i + 2]}"
                return f"{what} of {k}: {xv} vs {yv}"
    return "no difference"


def gather(n):
    """A Snap read through node n (served by the leader: n itself when it leads)."""
    h = Http(addr(n), HTTP_PORT, timeout=AUDIT_TIMEOUT_S)

    def call(method, path, body=None):
        for attempt in range(3):
            try:
                status, res = h.call(method, path, body)
            except (Unsent, Lost) as e:
                if attempt == 2:
                    raise Violation(f"audit through node {n}: {method} {path} got no answer: {e}") from None
                time.sleep(0.5)
                continue
            if status == 503 and attempt < 2:
                time.sleep(0.5)
                continue
            return status, res
        raise Violation(f"audit through node {n}: {method} {path} kept answering 503")

    s = Snap(n)
    try:
        todo = [(p, 0) for p in sorted(PARTITION_NAMES)]
        acc = {p: [] for p, _ in todo}
        for _ in range(10_000):
            if not todo:
                break
            batch, todo = todo[:FETCH_ENTRIES_MAX], todo[FETCH_ENTRIES_MAX:]
            status, body = call("POST", "/api/v1/fetch",
                                {"entries": [{"queue": QUEUE, "partition": p, "offset": o} for p, o in batch]})
            if status != 200 or len((body or {}).get("entries", [])) != len(batch):
                raise Violation(f"audit through node {n}: fetch answered {status}: {str(body)[:300]}")
            for (p, o), e in zip(batch, body["entries"]):
                if e.get("error") == "UNKNOWN_TOPIC_OR_PARTITION":
                    s.parts[p] = ([], 0, 0)
                    continue
                if e.get("error"):
                    raise Violation(f"audit through node {n}: fetch {p} from {o}: {e.get('error')}")
                recs = e.get("records") or []
                acc[p].extend(recs)
                s.parts[p] = (acc[p], e["highWatermark"], e["logStartOffset"])
                if o + len(recs) < e["highWatermark"]:
                    todo.append((p, o + len(recs)))
        else:
            raise Violation(f"audit through node {n}: fetch did not end")
        status, body = call("POST", "/api/v1/kv", {"operations": [{"op": "getMany", "ns": KV_NS,
                                                                   "keys": sorted(KEY_NAMES)}]})
        if status != 200:
            raise Violation(f"audit through node {n}: kv getMany answered {status}: {str(body)[:300]}")
        rows = {r["key"]: r for r in body["results"][0].get("rows") or []}
        s.kv = {k: rows.get(k) for k in KEY_NAMES}
        status, body = call("GET", f"/api/v1/consumer-groups/{GROUP}")
        if status == 200:
            for q in (body or {}).values():
                for c in q.get("partitions") or []:
                    s.cursors[c["partition"]] = c["committedOffset"]
        elif status != 404:
            raise Violation(f"audit through node {n}: consumer group answered {status}: {str(body)[:300]}")
        s.leader_hdr = h.headers.get("x-regina-leader")
    finally:
        h.close()
    return s


PARTITION_NAMES = [f"p{i:02}" for i in range(PARTITIONS)]
KEY_NAMES = [f"k{i:02}" for i in range(KV_KEYS)]

FAMILIES = {
    "pushes": "answered pushes stored exactly once at their offsets",
    "gapless": "offsets gapless from 0",
    "order": "answered pushes in answer order",
    "absent": "refused and unsent pushes absent",
    "once": "unknown pushes stored at most once",
    "kv": "KV versions never back, last answered write kept",
    "acks": "committed offsets cover every answered ack",
}


def check(m, s, where):
    """Every violation the Snap s shows against the model m (which it does not change)."""
    out = []
    v = lambda fam, msg: out.append((fam, f"{where}: {msg}"))
    for name, txns in m.parts.items():
        recs, hwm, start = s.parts.get(name, ([], 0, 0))
        if start != 0:
            v("gapless", f"{name}: log start {start}, nothing is ever dropped")
        offs = [r.get("offset") for r in recs]
        if offs != list(range(len(recs))) or hwm != len(recs):
            v("gapless", f"{name}: offsets {offs[:5]}... of {len(recs)} records, high watermark {hwm}")
        seen = {}
        for r in recs:
            txn, off = r.get("transactionId"), r.get("offset")
            p = txns.get(txn)
            if p is None:
                v("pushes", f"{name}@{off}: {txn} was never sent to this partition")
                continue
            if txn in seen:
                v("once" if p.state == "unknown" else "pushes", f"{name}: {txn} ({p.state}) stored twice, at "
                  f"{seen[txn]} and {off}")
            seen[txn] = off
            if p.state in ("refused", "unsent"):
                v("absent", f"{name}@{off}: {txn} is stored but was {p.state}")
            if p.state == "answered" and p.offset != off:
                v("pushes", f"{name}@{off}: {txn} answered at offset {p.offset}")
            if r.get("payload") != {"t": txn}:
                v("pushes", f"{name}@{off}: {txn} payload {r.get('payload')!r}")
        answered = [p for p in txns.values() if p.state == "answered"]
        for p in answered:
            if p.txn not in seen:
                v("pushes", f"{name}: answered {p.txn} (offset {p.offset}, {p.how}) is missing")
        by_answer = sorted(answered, key=lambda p: p.answered_at)
        j, best, best_txn = 0, -1, None
        for b in sorted(answered, key=lambda p: p.first_send):
            while j < len(by_answer) and by_answer[j].answered_at < b.first_send:
                if by_answer[j].offset > best:
                    best, best_txn = by_answer[j].offset, by_answer[j].txn
                j += 1
            if b.offset <= best:
                v("order", f"{name}: {b.txn} at offset {b.offset} was first sent after {best_txn} was answered at "
                  f"offset {best}")
        top = max((t for _, t in m.acked.get(name, [])), default=-1)
        cur = s.cursors.get(name, -1)
        if cur < top:
            v("acks", f"{name}: committed offset {cur} below an answered ack of offset {top}")
        if cur >= max(hwm, 0) and cur != -1:
            v("acks", f"{name}: committed offset {cur} at or past the end ({hwm})")
    for name, key in m.keys.items():
        for fam, msg in check_kv_row(key, s.kv.get(name), where):
            out.append((fam, msg))
    return out


# ---------------------------------------------------------------- sabotage


def sabotage_forget_push(m):
    """Forget an answered push: the stored message then was never sent."""
    p = next(p for p in m.answered())
    del m.parts[p.part][p.txn]
    return lambda: m.parts[p.part].__setitem__(p.txn, p)


def sabotage_phantom_push(m):
    """An answered push that was never sent: it is missing."""
    name = PARTITION_NAMES[0]
    p = Push("phantom", name, 0.0)
    p.state, p.offset, p.answered_at, p.how = "answered", 1 << 30, time.monotonic(), "queued"
    m.parts[name]["phantom"] = p
    return lambda: m.parts[name].pop("phantom")


def sabotage_extra_ack(m):
    """An ack answered past everything: the committed offset is then behind it, and the next delivery is a redelivery."""
    name = next(n for n in PARTITION_NAMES if any(p.state == "answered" for p in m.parts[n].values()))
    log = m.acked.setdefault(name, [])
    log.append((0.0, 1 << 40))
    return lambda: log.remove((0.0, 1 << 40))


def sabotage_kv_back(m):
    """A KV write answered at a higher version than the row holds: its version went back."""
    key = next(k for k in m.keys.values() if k.last is not None)
    saved = (key.last, key.observed)
    key.last = (key.last[0], key.last[1], key.last[2] + 1_000_000)
    key.observed = key.last[2]

    def undo():
        key.last, key.observed = saved
    return undo


def sabotage_refused(m):
    """An answered (stored) push marked refused: it is present though refused."""
    p = next(p for p in m.answered())
    p.state = "refused"

    def undo():
        p.state = "answered"
    return undo


def sabotage_offset(m):
    """An answered push recorded at another offset."""
    p = next(p for p in m.answered())
    p.offset += 1

    def undo():
        p.offset -= 1
    return undo


SABOTAGE = {"forget-push": sabotage_forget_push, "phantom-push": sabotage_phantom_push,
            "extra-ack": sabotage_extra_ack, "kv-back": sabotage_kv_back, "refused": sabotage_refused,
            "offset": sabotage_offset}


# ---------------------------------------------------------------- phases


class Fault:
    """One fault: what it does to which nodes, how it is undone and how its effect is shown."""

    def __init__(self, name, kind, who, **kw):
        self.name, self.kind, self.who, self.kw = name, kind, who, kw


PHASES = [
    Fault("loss-leader", "loss", "leader", pct=25, dirs=("in", "out")),
    Fault("loss-all", "loss", "all", pct=12, dirs=("in", "out")),
    Fault("delay-leader", "tbf", "leader", rate="256kbit", burst="8kb", latency="1000ms"),
    Fault("delay-all", "tbf", "all", rate="128kbit", burst="4kb", latency="500ms"),
    Fault("partition-leader", "down", "leader"),
    Fault("partition-follower", "down", "follower"),
    Fault("oneway-leader-out", "loss", "leader", pct=100, dirs=("out",)),
    Fault("oneway-leader-in", "loss", "leader", pct=100, dirs=("in",)),
]


def apply_fault(net, f, targets):
    for n in targets:
        if f.kind == "loss":
            net.nft_drop(n, f.kw["pct"], f.kw["dirs"])
        elif f.kind == "tbf":
            net.tbf(n, f.kw["rate"], f.kw["burst"], f.kw["latency"])
        elif f.kind == "down":
            net.link(n, False)


def fault_effect(net, f, targets, cut_seen, rtts=None):
    """(took effect?, what shows it), read just before the heal."""
    parts, ok, shaped = [], True, f.kind != "tbf"
    for n in targets:
        if f.kind == "loss":
            c = net.nft_counters(n)
            shown = []
            for chain, d in (("input", "in"), ("output", "out")):
                seen, dropped = c[chain]
                if d in f.kw["dirs"]:
                    total = seen
                    shown.append(f"{d} {dropped}/{total} dropped ({100 * dropped / max(1, total):.0f}%)")
                    ok = ok and dropped > 0
            parts.append(f"node {n}: " + ", ".join(shown))
        elif f.kind == "tbf":
            st = net.tbf_stats(n) or {}
            parts.append(f"node {n}: tbf sent {st.get('packets', 0)} pkts, {st.get('overlimits', 0)} overlimits, "
                         f"{st.get('drops', 0)} drops")
            ok = ok and st.get("packets", 0) > 0
            shaped = shaped or st.get("overlimits", 0) > 0
        elif f.kind == "down":
            parts.append(f"node {n}: link down, unreachable {'yes' if cut_seen.get(n) else 'NO'}")
            ok = ok and cut_seen.get(n, False)
    if f.kind == "tbf" and rtts:
        parts.append(f"/health round trip {pct(rtts[0], .5) * 1000:.0f} ms before, {pct(rtts[1], .5) * 1000:.0f} ms "
                     f"(max {max(rtts[1] or [0]) * 1000:.0f} ms) under the fault")
    return ok and shaped, "; ".join(parts)


def heal(net, targets):
    for n in targets:
        net.clear(n)


def pct(values, q):
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


class Run:
    def __init__(self, args, net, cluster, monitor, model, rng):
        self.args, self.net, self.cluster, self.monitor, self.m, self.rng = args, net, cluster, monitor, model, rng
        self.checks = []  # (name, passed, detail)
        self.sabotaged = False

    def record(self, name, violations):
        self.checks.append((name, not violations, violations[:8]))
        if violations:
            for fam, msg in violations[:8]:
                print(f"  VIOLATION [{fam}] {msg}", flush=True)

    def record_families(self, where, found):
        for fam, label in FAMILIES.items():
            self.record(f"{where}: {label}", [x for x in found if x[0] == fam])
        other = [x for x in found if x[0] not in FAMILIES]
        if other:
            self.record(f"{where}: other", other)

    def phase(self, rnd, idx, f):
        m = self.m
        with m.lock:
            m.phase = {}
            m.violations = []
            m.latencies = []
        leader, _ = self.cluster.wait_one_leader(LEADER_TIMEOUT_S)
        followers = [n for n in NODES if n != leader]
        targets = {"leader": [leader], "follower": [self.rng.choice(followers)], "all": list(NODES)}[f.who]
        terms0 = self.monitor.leader_terms()
        load = Load(m, f"r{rnd}.{idx}", self.rng)
        load.start()
        t0 = time.monotonic()
        rtts = ([], [])
        warm_end = time.monotonic() + self.args.warm_s
        while time.monotonic() < warm_end:
            rtts[0].append(self.rtt(targets[0]))
            time.sleep(0.2)
        cut_seen = {}
        try:
            apply_fault(self.net, f, targets)
            fault_at = time.monotonic()
            end = fault_at + self.args.hold_s
            while time.monotonic() < end:
                if f.kind == "down":
                    for n in targets:
                        if not reachable(n, timeout=0.3):
                            cut_seen[n] = True
                elif f.kind == "tbf":
                    rtts[1].append(self.rtt(targets[0]))
                time.sleep(0.2)
            took, effect = fault_effect(self.net, f, targets, cut_seen, rtts)
        finally:
            heal(self.net, targets)
            healed_at = time.monotonic()
        heal_s = None
        while time.monotonic() - healed_at < max(self.args.after_s, LEADER_TIMEOUT_S):
            v = self.cluster.views()
            leaders = {(h or {}).get("leader") for h in v.values()}
            if len(leaders) == 1 and None not in leaders and (v[next(iter(leaders))] or {}).get("role") == "leader":
                heal_s = time.monotonic() - healed_at
                break
            time.sleep(0.05)
        time.sleep(max(0.0, healed_at + self.args.after_s - time.monotonic()))
        load.finish()
        load_s = time.monotonic() - t0
        if self.args.sabotage and not self.sabotaged:
            with m.lock:
                SABOTAGE[self.args.sabotage](m)
            self.sabotaged = True
            print(f"  sabotage {self.args.sabotage} applied to the record", flush=True)
        self.record(f"{f.name}: fault took effect ({effect})", [] if took else [("fault", effect)])
        with m.lock:
            during = list(m.violations)
        for fam, label in (("redelivery", "no redelivery below an answered ack"),
                           ("deliveries", "deliveries were sent pushes at their offsets"),
                           ("answers", "answers consistent (no fresh duplicate, no valid push refused)")):
            self.record(f"{f.name}: {label}", [x for x in during if x[0] == fam])
        load_found = [x for x in during if x[0] not in ("redelivery", "deliveries", "answers")]
        # heal: one leader, converged indexes, then the audit through the leader
        try:
            new_leader, _ = self.cluster.wait_one_leader(LEADER_TIMEOUT_S)
            self.record(f"{f.name}: one leader after the heal", [])
        except Violation as e:
            self.record(f"{f.name}: one leader after the heal", [("leader", str(e))])
            raise
        idx_ok = self.converged(f"{f.name}")
        snap = gather(new_leader)
        found = check(m, snap, f"after {f.name}, through node {new_leader}") + load_found
        self.record_families(f.name, found)
        resolved = self.resolve_unknowns(f"r{rnd}.{idx}.")
        self.dedup_probe(f.name)
        if idx_ok:
            self.fingerprints(f.name)
        with m.lock:
            ph = dict(m.phase)
            lat = [took for start, took in m.latencies if fault_at <= start < healed_at]
        changes = self.monitor.leader_terms() - terms0
        print(f"phase {idx}/{len(self.phases)} {f.name} (round {rnd}): nodes {targets} for {self.args.hold_s:.1f} s; "
              f"{effect}; answered pushes {ph.get('answered pushes', 0)} ({len(lat)} batches sent under the fault: "
              f"p50 {pct(lat, .5) * 1000:.0f} ms, p99 {pct(lat, .99) * 1000:.0f} ms), unknown {ph.get('unknown pushes', 0)}, "
              f"unsent {ph.get('unsent pushes', 0)}, refused {ph.get('refused pushes (4xx)', 0)}, "
              f"duplicate answers {ph.get('retries answered duplicate', 0)}, acks {ph.get('answered acks', 0)}, "
              f"kv writes {ph.get('answered kv writes', 0)} ({ph.get('unknown kv writes', 0)} unknown); "
              f"leader {leader} -> {new_leader}, {changes} new leader terms; one leader "
              f"{'?' if heal_s is None else f'{heal_s:.2f}'} s after the heal; resolved {resolved}; load {load_s:.1f} s; "
              f"{'checks passed' if all(c[1] for c in self.checks) else 'VIOLATIONS'}", flush=True)

    @staticmethod
    def rtt(n):
        t0 = time.monotonic()
        health(n, timeout=2.0)
        return time.monotonic() - t0

    def converged(self, where):
        try:
            self.cluster.wait_converged(CONVERGE_TIMEOUT_S)
            self.record(f"{where}: nodes agree on applied and commit index", [])
            return True
        except Violation as e:
            self.record(f"{where}: nodes agree on applied and commit index", [("index", str(e))])
            return False

    def fingerprints(self, where):
        """The three applied states at one index: same length, same byte histogram."""
        for _ in range(10):
            dumps = {n: self.cluster.state_dump(n) for n in NODES}
            idxs = {i for i, _ in dumps.values()}
            if len(idxs) == 1:
                break
            time.sleep(0.3)
        else:
            self.record(f"{where}: state fingerprints agree", [("state", f"indexes kept moving: "
                                                                f"{ {n: i for n, (i, _) in dumps.items()} }")])
            return
        prints = {n: (len(d), tuple(d.count(bytes([b])) for b in range(256))) for n, (_, d) in dumps.items()}
        bad = [("state", f"node {n}'s state ({prints[n][0]} bytes) differs from node 1's ({prints[1][0]} bytes) "
                f"at index {idxs}") for n in NODES if prints[n] != prints[1]]
        self.record(f"{where}: state fingerprints agree at index {next(iter(idxs))}", bad)

    def resolve_unknowns(self, prefix):
        """Half of this phase's unknown pushes, pushed again with their ids."""
        with self.m.lock:
            unknown = [p for part in self.m.parts.values() for p in part.values()
                       if p.state == "unknown" and p.txn.startswith(prefix)]
        picks = [p for p in unknown if self.rng.random() < 0.5]
        if not picks:
            return "0 of 0"
        c = Conns(timeout=AUDIT_TIMEOUT_S)
        dup = new = 0
        try:
            for i in range(0, len(picks), 64):
                chunk = picks[i:i + 64]
                items = [{"queue": QUEUE, "partition": p.part, "transactionId": p.txn, "payload": {"t": p.txn}}
                         for p in chunk]
                res = self.push_after_heal(c, items)
                at = time.monotonic()
                with self.m.lock:
                    for p, r in zip(chunk, res):
                        if r.get("status") not in ("queued", "duplicate") or not isinstance(r.get("offset"), int):
                            self.m.violate("answers", f"{p.txn}: retried after the heal, answered {r}")
                            continue
                        p.state, p.offset, p.answered_at = "answered", r["offset"], at
                        p.how = "resolved-" + r["status"]
                        dup += r["status"] == "duplicate"
                        new += r["status"] == "queued"
                        self.m.count("unknown pushes resolved as duplicate" if r["status"] == "duplicate"
                                     else "unknown pushes resolved as new")
        finally:
            c.close()
        return f"{len(picks)} of {len(unknown)} unknown ({dup} had been stored, {new} had not)"

    def push_after_heal(self, c, items):
        for attempt in range(5):
            n = self.rng.choice(NODES)
            try:
                status, res = c.call(n, "POST", "/api/v1/push", {"items": items})
            except (Unsent, Lost):
                time.sleep(0.3)
                continue
            if status == 201 and isinstance(res, list) and len(res) == len(items):
                return res
            time.sleep(0.3)
        raise Violation(f"a push after the heal was not answered in 5 attempts")

    def dedup_probe(self, where):
        with self.m.lock:
            pool = self.m.answered()
        probes = self.rng.sample(pool, min(DEDUP_PROBES, len(pool)))
        if not probes:
            return
        c = Conns(timeout=AUDIT_TIMEOUT_S)
        try:
            res = self.push_after_heal(c, [{"queue": QUEUE, "partition": p.part, "transactionId": p.txn,
                                            "payload": {"t": p.txn}} for p in probes])
        finally:
            c.close()
        bad = [("dedup", f"{p.part}: answered {p.txn} (offset {p.offset}) pushed again answered {r}")
               for p, r in zip(probes, res) if r.get("status") != "duplicate" or r.get("offset") != p.offset]
        with self.m.lock:
            self.m.count("dedup probes", len(probes))
        self.record(f"{where}: {len(probes)} answered ids pushed again answer duplicate at their offsets", bad)

    def per_node_audit(self, rnd):
        """Each node leads in turn (a pin) and serves the whole audit from its own state."""
        snaps = {}
        c = Conns(timeout=AUDIT_TIMEOUT_S)
        try:
            for n in NODES:
                label = f"round {rnd} through node {n} (leading)"
                try:
                    self.pin(c, n)
                    snap = gather(n)
                    h = health(n, timeout=2.0) or {}
                    if h.get("leader") != n or snap.leader_hdr != f"{addr(n)}:{HTTP_PORT}":
                        raise Violation(f"node {n} stopped leading during its audit ({h.get('leader')}, "
                                        f"{snap.leader_hdr})")
                except Violation as e:
                    self.record(f"{label}: audited", [("pin", str(e))])
                    continue
                snaps[n] = snap
                self.record_families(label, check(self.m, snap, label))
            if len(snaps) == len(NODES):
                bad, late = [], 0
                for a, b in zip(NODES, NODES[1:]):
                    why, extra = extends(snaps[a].digest(), snaps[b].digest())
                    late += extra
                    if why:
                        bad.append(("nodes", f"node {b}'s read (after node {a}'s) does not extend it: {why}"))
                self.record(f"round {rnd}: each node's read extends the one before (same messages, KV versions and "
                            f"cursors; {late} unknown pushes applied in between)", bad)
        finally:
            self.unpin(c)
            c.close()
        return snaps

    def pin(self, c, n):
        t0 = time.monotonic()
        while time.monotonic() - t0 < LEADER_TIMEOUT_S:
            try:
                status, body = c.call(self.rng.choice(NODES), "PUT", "/api/v1/cluster/groups/0/leader", {"node": n})
            except (Unsent, Lost):
                time.sleep(0.3)
                continue
            if status // 100 == 2:
                break
            time.sleep(0.3)
        else:
            raise Violation(f"pinning the leader to node {n} was not answered")
        ld, _ = self.cluster.wait_one_leader(LEADER_TIMEOUT_S)
        while ld != n and time.monotonic() - t0 < LEADER_TIMEOUT_S:
            time.sleep(0.2)
            ld, _ = self.cluster.wait_one_leader(LEADER_TIMEOUT_S)
        if ld != n:
            raise Violation(f"leadership did not move to node {n} within {LEADER_TIMEOUT_S:.0f} s (leader {ld})")
        self.cluster.wait_converged(CONVERGE_TIMEOUT_S)

    def unpin(self, c):
        for _ in range(10):
            try:
                status, _ = c.call(self.rng.choice(NODES), "DELETE", "/api/v1/cluster/groups/0/leader")
                if status // 100 == 2:
                    return
            except (Unsent, Lost):
                pass
            time.sleep(0.3)
        raise Violation("dropping the leader pin was not answered")

    def self_check(self, snap, where):
        """Every sabotage, applied to the record and undone, must make the audit of the same reads fail."""
        for mode, fn in SABOTAGE.items():
            with self.m.lock:
                undo = fn(self.m)
                try:
                    found = check(self.m, snap, where)
                finally:
                    undo()
                clean = check(self.m, snap, where)
            self.record(f"self-check: sabotage {mode} makes the audit fail ({len(found)} violations)",
                        [] if found and not clean else [("self-check", f"{mode}: {len(found)} violations with the "
                                                        f"sabotage, {len(clean)} without")])


def ok_so_far(r):
    return all(c[1] for c in r.checks)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default="target/release/regina")
    ap.add_argument("--rounds", type=int, default=1, help="times to run every phase (each round ends with the "
                    "per-node audit)")
    ap.add_argument("--phases", default=",".join(f.name for f in PHASES),
                    help=f"comma-separated subset, in order (default all: {', '.join(f.name for f in PHASES)})")
    ap.add_argument("--hold-s", type=float, default=4.0, help="how long each fault lasts (default 4)")
    ap.add_argument("--warm-s", type=float, default=1.5, help="load before the fault (default 1.5)")
    ap.add_argument("--after-s", type=float, default=1.5, help="load after the heal (default 1.5)")
    ap.add_argument("--raft-groups", type=int, default=2, help="Raft groups per node (default 2; the load uses "
                    "group 0, and the per-node audit pins group 0's leader)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the data directories and node logs")
    ap.add_argument("--sabotage", choices=sorted(SABOTAGE), help="falsify the record after the first phase's load "
                    "(the run must fail)")
    ap.add_argument("--self-check", action="store_true", help="after the last audit, apply every sabotage to the "
                    "record in turn and check the audit of the same reads fails")
    args = ap.parse_args()
    names = [x for x in args.phases.split(",") if x]
    by_name = {f.name: f for f in PHASES}
    if not names or any(x not in by_name for x in names):
        ap.error(f"--phases takes names among {', '.join(by_name)}")
    if not 1 <= args.raft_groups <= 64:
        ap.error("--raft-groups takes 1 to 64")
    if args.rounds < 1 or not 0.5 <= args.hold_s <= 60 or not 0 <= args.warm_s <= 30 or not 0 <= args.after_s <= 30:
        ap.error("--rounds at least 1, --hold-s 0.5-60, --warm-s and --after-s 0-30")
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        sys.exit(f"netfaults: no binary at {binary} (build: cargo build --release -p regina-server --bin regina)")

    def on_term(_sig, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="regina-netfaults-")
    net = Net(os.getpid())
    cluster = None
    monitor = None
    run_ = None
    ok = interrupted = False
    try:
        ensure_tools()
        Net.remove_stale()
        net.setup()
        setns(f"/run/netns/{net.hub}")  # before any thread starts: every thread then lives in the hub
        print(f"netfaults: seed {seed}, {args.rounds} round(s) of {len(names)} phases, hold {args.hold_s:.1f} s, "
              f"namespaces {net.hub}, {', '.join(net.ns.values())}, dir {tmp}", flush=True)
        for line in probe_mechanisms(net):
            print(f"netfaults: mechanism: {line}", flush=True)
        cluster = Cluster(net, binary, tmp, args.raft_groups)
        leader, took = cluster.start()
        print(f"netfaults: cluster up in {took:.1f} s, leader node {leader}", flush=True)
        monitor = Monitor()
        monitor.start()
        model = Model()
        run_ = Run(args, net, cluster, monitor, model, rng)
        run_.phases = names
        last_snaps = {}
        for rnd in range(1, args.rounds + 1):
            for idx, name in enumerate(names, 1):
                run_.phase(rnd, idx, by_name[name])
                if not all(c[1] for c in run_.checks):
                    break
            if not all(c[1] for c in run_.checks):
                break
            last_snaps = run_.per_node_audit(rnd)
            passed = sum(1 for c in run_.checks if c[1])
            print(f"round {rnd}/{args.rounds}: per-node audit through nodes {sorted(last_snaps)}; "
                  f"{passed}/{len(run_.checks)} checks so far", flush=True)
        if args.self_check and ok_so_far(run_):
            n, snap = max(last_snaps.items()) if last_snaps else (None, None)
            if snap is None:
                n, _ = cluster.wait_one_leader(LEADER_TIMEOUT_S)
                snap = gather(n)
            run_.self_check(snap, f"self-check through node {n}")
        cluster.check_alive()
        ok = all(c[1] for c in run_.checks)
    except SetupError as e:
        print(f"netfaults: SETUP FAILED: {e}", flush=True)
    except Violation as e:
        print(f"netfaults: violation: {e}", flush=True)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if monitor is not None:
            monitor.stop.set()
        if cluster is not None:
            cluster.kill()
            if not ok and not interrupted:
                for node in cluster.nodes.values():
                    print(f"--- node {node.n} log tail ---\n{tail(node.log_path)}", flush=True)
        net.teardown()
        if args.keep:
            print(f"netfaults: kept {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started
    if run_ is not None:
        t = run_.m.totals
        keys = ("answered pushes", "unknown pushes", "unsent pushes", "refused pushes (4xx)", "retries answered duplicate",
                "unknown pushes resolved as duplicate", "unknown pushes resolved as new", "answered acks",
                "deliveries", "answered kv writes", "unknown kv writes", "kv expect misses after an unknown write",
                "dedup probes", "lost answers")
        print("netfaults: totals: " + ", ".join(f"{k} {t.get(k, 0)}" for k in keys)
              + f", leader terms seen {monitor.leader_terms() if monitor else 0}", flush=True)
        failed = [c for c in run_.checks if not c[1]]
        for name, _, detail in failed[:20]:
            print(f"  FAILED: {name}: {detail[:2]}", flush=True)
    n_checks = len(run_.checks) if run_ else 0
    n_passed = sum(1 for c in run_.checks if c[1]) if run_ else 0
    if ok:
        print(f"netfaults: {n_passed}/{n_checks} network fault checks passed in {elapsed:.0f} s (seed {seed})",
              flush=True)
        return 0
    if interrupted:
        print(f"netfaults: interrupted ({n_passed} of {n_checks} checks passed so far)", flush=True)
        return 130
    print(f"netfaults: FAILED: {n_passed} of {n_checks} network fault checks passed in {elapsed:.0f} s; reproduce "
          f"with --seed {seed} --rounds {args.rounds}" + (f" --sabotage {args.sabotage}" if args.sabotage else ""),
          flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
