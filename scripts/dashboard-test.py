#!/usr/bin/env python3
"""The dashboard in headless Chromium against a real Regina.

Starts the `regina` binary given by --binary on 127.0.0.1 with a temporary
data dir, fills it through the HTTP API (queues with messages, a consumer
group with lag, a dead letter, KV rows, a lock, a pending and a failed
timer, jobs, one of them failed, a trace), then opens every page of the
dashboard and checks that it loads without console errors and shows what
the API says, and that the operator actions work end to end: replaying a
dead letter (it leaves the DLQ and is back in its partition), deleting one,
retrying a failed timer and a failed job, seeking a group. Then, on a
second node started with JWT on, that the page asks for a token, a 401
shows the login, and the login works.

Needs Chromium (`chromium`, installed with apt-get when missing) and the
Python package playwright (pinned, installed in a virtualenv under the
target dir by scripts/dashboard-test.sh; no browser download: it drives
the system's Chromium). Every wait is bounded; the whole run takes well
under two minutes. Prints `N/M dashboard checks passed` and exits 1 on any
failure.

usage: scripts/dashboard-test.py --binary target/release/regina [--screenshots docs/dashboard]
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

from localnet import free_port

WAIT_MS = 10_000  # the longest any one check waits for the page

CHECKS = []  # (name, ok, detail)


def check(name, ok, detail=""):
    CHECKS.append((name, bool(ok), detail))
    print(f"{'ok  ' if ok else 'FAIL'} {name}{'' if ok else ': ' + str(detail)}", flush=True)
    return ok


class Node:
    def __init__(self, binary, env=None):
        self.dir = tempfile.mkdtemp(prefix="regina-dash-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = None
        self.log = open(os.path.join(self.dir, "node.log"), "w")
        e = dict(os.environ, REGINA_DISK_HIGH_PCT="100", REGINA_DISK_LOW_PCT="99")
        e.update(env or {})
        self.proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(self.port), "--data-dir",
                                      os.path.join(self.dir, "data")], stdout=self.log, stderr=subprocess.STDOUT, env=e)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    health = json.load(r)
            except urllib.error.HTTPError as e:  # 503: unhealthy, e.g. a full disk
                health = json.loads(e.read() or b"{}")
            except (OSError, ValueError):
                health = {}
            if health.get("leader") is not None:
                return
            if self.proc.poll() is not None:
                raise SystemExit(f"regina exited with {self.proc.returncode}; see {self.dir}/node.log")
            time.sleep(0.1)
        raise SystemExit("regina did not answer /health with a leader within 20 s")

    def call(self, method, path, body=None, token=None, expect_ok=True):
        headers = {"content-type": "application/json"}
        token = token or self.token
        if token:
            headers["authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.url + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, text = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read()
        if expect_ok and status >= 300:
            raise RuntimeError(f"{method} {path}: {status} {text[:300]!r}")
        try:
            return json.loads(text) if text else None
        except ValueError:
            return text.decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def hs256(secret, claims):
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


# ---------------------------------------------------------------- the data

def seed(n):
    """What every page shows, made through the API. Returns the names the
    checks need."""
    n.call("POST", "/api/v1/configure", {"queue": "orders", "options": {"retryLimit": 0, "leaseTime": 60}})
    n.call("POST", "/api/v1/push", {"items": [{"queue": "orders", "partition": "p1", "payload": {"order": i}}
                                              for i in range(5)]
                                    + [{"queue": "orders", "partition": "p2", "payload": {"order": 100 + i}}
                                       for i in range(3)]})
    n.call("POST", "/api/v1/push", {"items": [{"queue": "emails", "payload": {"to": f"u{i}@example.com"}}
                                              for i in range(4)]})
    # Two dead letters: a failed ack past retryLimit 0, twice.
    dead = []
    for _ in range(2):
        r = n.call("GET", "/api/v1/pop/queue/orders/partition/p1?batch=1&wait=false")
        m = r["messages"][0]
        a = n.call("POST", "/api/v1/ack", {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                                          "leaseId": m["leaseId"], "status": "failed", "error": "card declined"})
        assert a[0]["dlq"], a
        dead.append(m)
    # A consumer group that read one message and acked it: it lags behind.
    r = n.call("GET", "/api/v1/pop/queue/orders?batch=1&wait=false&consumerGroup=billing&subscriptionMode=all")
    m = r["messages"][0]
    n.call("POST", "/api/v1/ack", {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                                   "leaseId": m["leaseId"], "status": "completed", "consumerGroup": "billing"})
    # KV rows, and a lock (a KV row of its own namespace).
    n.call("POST", "/api/v1/kv", {"operations": [
        {"op": "put", "ns": "app", "key": "user/1", "value": {"name": "ann"}, "forever": True},
        {"op": "put", "ns": "app", "key": "user/2", "value": {"name": "bob"}, "forever": True},
        {"op": "put", "ns": "app", "key": "config/theme", "value": "dark", "forever": True},
        {"op": "put", "ns": "sessions", "key": "s-1", "value": {"user": 1}, "ttlSeconds": 3600}]})
    n.call("POST", "/api/v1/locks", {"operations": [{"op": "acquire", "name": "nightly-report", "ttlSeconds": 600,
                                                     "owner": "worker-7"}]})
    # Timers: one pending (an hour away), one failed (its queue is full and
    # it may try once).
    n.call("POST", "/api/v1/configure", {"queue": "full", "options": {"maxSize": 1, "timerMaxAttempts": 1}})
    n.call("POST", "/api/v1/push", {"items": [{"queue": "full", "payload": {"x": 1}}]})
    payload = base64.b64encode(b'{"remind": true}').decode()
    n.call("POST", "/api/v1/timers", {"operations": [
        {"op": "schedule", "queue": "orders", "timerKey": "remind/1", "payload": payload, "delayMs": 3_600_000,
         "txn": "tx-remind"},
        {"op": "schedule", "queue": "full", "timerKey": "overflow/1", "payload": payload, "delayMs": 0,
         "txn": "tx-overflow"}]})
    deadline = time.time() + 10
    while time.time() < deadline:
        rows = n.call("GET", "/api/v1/timers/full")["rows"]
        if rows and rows[0]["state"] == "failed":
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("the timer into the full queue did not fail within 10 s")
    # Jobs: one pending, one failed (claimed, then failed without retry).
    n.call("POST", "/api/v1/jobs", {"operations": [
        {"op": "enqueue", "queue": "render", "id": "job-failing", "payload": {"scene": "intro"}},
        {"op": "enqueue", "queue": "render", "id": "job-waiting", "payload": {"scene": "outro"},
         "delayMs": 3_600_000}]})
    c = n.call("POST", "/api/v1/jobs", {"operations": [{"op": "claim", "queue": "render", "owner": "gpu-1"}]})
    job = c["results"][0]["claim"]
    token = job["token"]
    n.call("POST", "/api/v1/jobs", {"operations": [{"op": "fail", "queue": "render", "id": job["id"], "owner": "gpu-1",
                                                    "token": token, "error": {"msg": "gpu lost"}, "retry": False}]})
    # A trace on a message.
    p2 = n.call("GET", "/api/v1/messages?queue=orders&partition=p2")["messages"][0]
    n.call("POST", "/api/v1/traces", {"transactionId": p2["transactionId"], "partitionId": p2["partitionId"],
                                      "consumerGroup": "__QUEUE_MODE__", "traceNames": ["checkout"],
                                      "eventType": "info", "data": {"step": "paid"}})
    return {"dead": dead, "traced": p2}


# ---------------------------------------------------------------- the page

def table_texts(page, selector):
    """The cell texts of the Grid.js table inside `selector`, row by row."""
    return page.eval_on_selector_all(f"{selector} tbody tr.gridjs-tr",
                                     "rows => rows.filter(r => !r.querySelector('td.gridjs-message'))"
                                     ".map(r => [...r.querySelectorAll('td')].map(td => td.innerText.trim()))")


def wait_rows(page, selector, pred, what):
    """Waits (bounded) until the table's rows satisfy `pred`; checks it."""
    deadline = time.time() + WAIT_MS / 1000
    rows = []
    while time.time() < deadline:
        rows = table_texts(page, selector)
        if pred(rows):
            return check(what, True)
        time.sleep(0.2)
    return check(what, False, f"rows: {rows[:8]}")


def card(page, key):
    return page.inner_text(f'.card[data-k="{key}"] .v').strip()


def wait_card(page, key, want, what):
    deadline = time.time() + WAIT_MS / 1000
    got = None
    while time.time() < deadline:
        try:
            got = card(page, key)
            if got == want:
                return check(what, True)
        except Exception:
            pass
        time.sleep(0.2)
    return check(what, False, f"card {key} shows {got!r}, the API says {want!r}")


def goto(page, base, hash_):
    page.goto(f"{base}/#/{hash_}")
    page.wait_for_selector(f'#page[data-loaded="1"]', timeout=WAIT_MS)


def shot(page, shots, name):
    if shots:
        page.screenshot(path=os.path.join(shots, f"{name}.png"))


def fmt(n):
    return f"{n:,}"


ASSETS_DIR = None


def new_context(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    if ASSETS_DIR:
        def serve(name):
            kind = "text/javascript" if name.endswith(".js") else "text/css"
            return lambda route, _request=None: route.fulfill(path=os.path.join(ASSETS_DIR, name), content_type=kind)
        for name in ("app.js", "app.css"):
            ctx.route(f"**/dashboard/{name}", serve(name))
    return ctx


def pages_without_auth(browser, n, seeded, shots):
    ctx = new_context(browser)
    page = ctx.new_page()
    errors = []
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("dialog", lambda d: d.accept())
    base = n.url

    # Static files: content types and validators.
    with urllib.request.urlopen(base + "/", timeout=5) as r:
        check("/ is HTML", r.headers["content-type"].startswith("text/html") and r.headers.get("etag"),
              dict(r.headers))
    with urllib.request.urlopen(base + "/dashboard/vendor/uPlot.iife.min.js", timeout=5) as r:
        tag = r.headers["etag"]
        check("a vendored file is JavaScript", r.headers["content-type"].startswith("text/javascript"), dict(r.headers))
    req = urllib.request.Request(base + "/dashboard/vendor/uPlot.iife.min.js", headers={"if-none-match": tag})
    try:
        urllib.request.urlopen(req, timeout=5)
        check("a revalidation with the ETag is 304", False, "answered 200")
    except urllib.error.HTTPError as e:
        check("a revalidation with the ETag is 304", e.code == 304, e.code)
    missing = n.call("GET", "/dashboard/nope.js", expect_ok=False)
    check("an unknown dashboard file is a JSON 404", isinstance(missing, dict) and missing.get("code") == "no_such_route",
          missing)
    bad = n.call("GET", "/api/v1/resources/kv/list", expect_ok=False)
    check("kv/list without a namespace is a JSON 400", isinstance(bad, dict) and bad.get("code") == "bad_request", bad)

    # Overview.
    goto(page, base, "overview")
    ov = n.call("GET", "/api/v1/resources/overview")
    wait_card(page, "depth", fmt(ov["depth"]), "overview: depth as the API says")
    wait_card(page, "queues", fmt(ov["queues"]), "overview: queue count as the API says")
    wait_card(page, "deadLetter", fmt(ov["deadLetterRows"]), "overview: dead letters as the API says")
    hist = n.call("GET", "/api/v1/dashboard/history")
    check("history: kept samples and a current one", len(hist["samples"]) >= 1 and hist["current"]["depth"] == ov["depth"],
          hist)
    check("history: the lagging group is sampled",
          any(g["group"] == "billing" and g["lagMessages"] > 0 for g in hist["current"]["groups"]), hist["current"])
    page.wait_for_function("document.querySelectorAll('#overview-charts .uplot').length === 4", timeout=WAIT_MS)
    check("overview: four uPlot charts", True)
    groups = n.call("GET", "/api/v1/consumer-groups")
    billing = next(g for g in groups if g["name"] == "billing")
    wait_rows(page, "#t-lag", lambda rows: any(r[0] == "billing" and r[2] == str(billing["totalLag"]) for r in rows),
              f"overview: billing lags {billing['totalLag']} as the API says")
    shot(page, shots, "overview")

    # Queues → partitions → messages → payload.
    goto(page, base, "queues")
    queues = n.call("GET", "/api/v1/resources/queues")["queues"]
    wait_rows(page, "#t-queues", lambda rows: sorted(r[0] for r in rows) == sorted(q["name"] for q in queues)
              and all(any(r[0] == q["name"] and r[2] == str(q["depth"]) for r in rows) for q in queues),
              "queues: every queue with its depth")
    shot(page, shots, "queues")
    page.click("#t-queues a:text-is('orders')")
    page.wait_for_selector("#queue-name:text-is('orders')", timeout=WAIT_MS)
    parts = n.call("GET", "/api/v1/resources/partitions?queue=orders")["partitions"]
    wait_rows(page, "#t-partitions", lambda rows: sorted((r[0], r[2]) for r in rows)
              == sorted((p["partition"], str(p["pending"])) for p in parts), "queue: partitions with pending counts")
    page.click("#t-partitions a:text-is('p2')")
    msgs = n.call("GET", "/api/v1/messages?queue=orders&partition=p2")["messages"]
    wait_rows(page, "#t-messages", lambda rows: sorted(r[1] for r in rows) == sorted(m["transactionId"] for m in msgs),
              "partition: its messages")
    page.click(f"#t-messages a:text-is('{seeded['traced']['transactionId']}')")
    page.wait_for_selector("#message-payload", timeout=WAIT_MS)
    page.wait_for_function("document.querySelector('#message-payload').textContent.includes('\"order\"')",
                           timeout=WAIT_MS)
    payload = json.loads(page.inner_text("#message-payload"))
    check("message: the payload as pushed", payload == seeded["traced"]["payload"], payload)
    wait_rows(page, "#t-msg-traces", lambda rows: any("paid" in r[3] for r in rows), "message: its trace")
    shot(page, shots, "message")

    # Consumer groups: lag, then a seek to the end.
    goto(page, base, "groups")
    wait_rows(page, "#t-groups", lambda rows: any(r[0] == "billing" and r[2] == str(billing["totalLag"]) for r in rows),
              "groups: billing with its lag")
    shot(page, shots, "groups")
    page.select_option("#seek-target", json.dumps(["billing", "orders"], separators=(",", ":")))
    page.select_option("#seek-where", "end")
    page.click("#seek-form button[type=submit]")
    page.wait_for_selector(".say.ok", timeout=WAIT_MS)
    after = next(g for g in n.call("GET", "/api/v1/consumer-groups") if g["name"] == "billing")
    check("seek to the end: the API shows no lag", after["totalLag"] == 0, after)
    wait_rows(page, "#t-groups", lambda rows: any(r[0] == "billing" and r[2] == "0" for r in rows),
              "seek to the end: the page shows no lag")

    # Dead letters: inspect, replay one, delete the other.
    goto(page, base, "dlq")
    dlq = n.call("GET", "/api/v1/dlq?queue=orders")["messages"]
    check("dlq: the API lists both dead letters", len(dlq) == 2, dlq)
    wait_rows(page, "#t-dlq", lambda rows: sorted(r[2] for r in rows) == sorted(m["transactionId"] for m in dlq),
              "dlq: the page lists the same")
    first, second = seeded["dead"]
    page.click(f"#t-dlq button[data-action=inspect][data-txn='{first['transactionId']}']")
    page.wait_for_function("document.querySelector('#dlq-inspect').textContent.includes('card declined')",
                           timeout=WAIT_MS)
    check("dlq: inspect shows the error", True)
    shot(page, shots, "dlq")
    page.click(f"#t-dlq button[data-action=replay][data-txn='{first['transactionId']}']")
    wait_rows(page, "#t-dlq", lambda rows: [r[2] for r in rows] == [second["transactionId"]],
              "replay: the message leaves the page's DLQ")
    left = [m["transactionId"] for m in n.call("GET", "/api/v1/dlq?queue=orders")["messages"]]
    check("replay: the API's DLQ no longer holds it", first["transactionId"] not in left, left)
    back = n.call("GET", f"/api/v1/messages/{first['partitionId']}/{first['transactionId']}")
    check("replay: the message is back in its partition, pending", back.get("status") == "pending", back)
    page.click("#dlq-purge")
    page.wait_for_function("document.querySelector('#dlq-progress').textContent === 'purged 1/1'", timeout=WAIT_MS)
    check("purge: progress counted 1/1", True)
    left = n.call("GET", "/api/v1/dlq?queue=orders")["messages"]
    check("purge: the API's DLQ is empty", left == [], left)

    # KV by namespace and prefix.
    goto(page, base, "kv")
    spaces = n.call("GET", "/api/v1/resources/kv/namespaces")["namespaces"]
    check("kv: the API lists app, sessions and the locks' namespace",
          {"app", "sessions", "queen-locks"} <= {s["namespace"] for s in spaces}, spaces)
    wait_rows(page, "#t-kv-ns", lambda rows: sorted((r[0], r[1]) for r in rows)
              == sorted((s["namespace"], str(s["rows"])) for s in spaces), "kv: namespaces with row counts")
    page.select_option("#kv-ns", "app")
    page.fill("#kv-prefix", "user/")
    want = [r["key"] for r in n.call("GET", "/api/v1/resources/kv/list?namespace=app&prefix=user/")["rows"]]
    check("kv: the API lists two user rows", want == ["user/1", "user/2"], want)
    wait_rows(page, "#t-kv", lambda rows: [r[0] for r in rows] == want and '"ann"' in rows[0][1],
              "kv: the prefix shows the same rows and values")
    shot(page, shots, "kv")

    # Timers: pending and failed; retry the failed one after making room.
    goto(page, base, "timers")
    wait_rows(page, "#t-timers-pending", lambda rows: any(r[1] == "remind/1" for r in rows), "timers: the pending one")
    wait_rows(page, "#t-timers-failed", lambda rows: any(r[1] == "overflow/1" and "full" in r[5] for r in rows),
              "timers: the failed one with its error")
    shot(page, shots, "timers")
    # Room for it: the queue may hold more now.
    n.call("POST", "/api/v1/configure", {"queue": "full", "options": {"maxSize": 10, "timerMaxAttempts": 1}})
    page.click("#t-timers-failed button[data-action=retry-timer][data-key='overflow/1']")
    page.wait_for_selector(".say.ok", timeout=WAIT_MS)
    deadline = time.time() + 10
    fired = False
    while time.time() < deadline and not fired:
        fired = not any(t["timerKey"] == "overflow/1" for t in n.call("GET", "/api/v1/timers/full")["rows"])
        time.sleep(0.2)
    check("timer retry: it fired (it left the timer list)", fired)
    wait_rows(page, "#t-timers-failed", lambda rows: not any(r[1] == "overflow/1" for r in rows),
              "timer retry: the page no longer lists it as failed")

    # Jobs: stats, the failed one, retry it.
    goto(page, base, "jobs")
    stats = n.call("GET", "/api/v1/jobs/render/stats")
    check("jobs: the API counts one failed job", stats["counts"]["failed"] == 1, stats)
    wait_card(page, "failed", fmt(stats["counts"]["failed"]), "jobs: failed count as the API says")
    wait_card(page, "pending", fmt(stats["counts"]["pending"]), "jobs: pending count as the API says")
    page.select_option("#job-state", "failed")
    wait_rows(page, "#t-jobs", lambda rows: [r[0] for r in rows] == ["job-failing"], "jobs: the failed one, by state")
    shot(page, shots, "jobs")
    page.click("#t-jobs button[data-action=retry-job][data-id='job-failing']")
    page.wait_for_selector(".say.ok", timeout=WAIT_MS)
    job = next(j for j in n.call("GET", "/api/v1/jobs/render")["rows"] if j["id"] == "job-failing")
    check("job retry: the API shows it pending again", job["state"] == "pending", job)
    wait_rows(page, "#t-jobs", lambda rows: all(r[0] != "job-failing" for r in rows),
              "job retry: it leaves the failed list")

    # Locks and holders.
    goto(page, base, "locks")
    locks = n.call("GET", "/api/v1/resources/locks")["locks"]
    check("locks: the API lists the lock", [l["name"] for l in locks] == ["nightly-report"], locks)
    token = str(locks[0]["holders"][0]["token"])
    wait_rows(page, "#t-locks", lambda rows: rows and rows[0][0] == "nightly-report" and rows[0][2] == "worker-7"
              and rows[0][3] == token, "locks: holder and token as the API says")
    shot(page, shots, "locks")

    # Traces.
    goto(page, base, "traces")
    wait_rows(page, "#t-trace-names", lambda rows: any(r[0] == "checkout" for r in rows), "traces: the trace name")
    page.click("#t-trace-names button[data-action=show-trace][data-name='checkout']")
    wait_rows(page, "#t-traces", lambda rows: any(seeded["traced"]["transactionId"] in r[2] for r in rows),
              "traces: its event")
    shot(page, shots, "traces")

    # The cluster.
    goto(page, base, "cluster")
    c = n.call("GET", "/api/v1/cluster")
    wait_card(page, "role", c["role"], "cluster: role as the API says")
    wait_card(page, "term", fmt(c["term"]), "cluster: term as the API says")
    wait_rows(page, "#t-members", lambda rows: [r[0] for r in rows] == [str(m["id"]) for m in c["members"]],
              "cluster: the members")
    check("cluster: no banner on a healthy node", page.is_hidden("#banner"))
    shot(page, shots, "cluster")

    check("no console errors on any page", not errors, errors)
    ctx.close()


def pages_with_auth(browser, binary):
    secret = "dashboard-test-" + os.urandom(8).hex()
    n = Node(binary, {"JWT_ENABLED": "true", "JWT_SECRET": secret})
    try:
        admin = hs256(secret, {"sub": "ops", "role": "admin", "iat": int(time.time()), "exp": int(time.time()) + 600})
        n.call("POST", "/api/v1/push", {"items": [{"queue": "secured", "payload": {"a": 1}}]}, token=admin)
        check("auth: the API refuses a call without a token",
              n.call("GET", "/api/v1/resources/overview", expect_ok=False, token=None).get("code") is not None)
        ctx = new_context(browser)
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(n.url + "/#/queues")
        page.wait_for_selector("#login:not([hidden])", timeout=WAIT_MS)
        check("auth: the page and its files load without a token, and a 401 shows the login", True)
        page.fill("#login-token", "not-a-token")
        page.click("#login-form button")
        page.wait_for_selector("#login:not([hidden])", timeout=WAIT_MS)
        check("auth: a refused token shows the login again",
              "refused" in page.inner_text("#login-why"), page.inner_text("#login-why"))
        page.fill("#login-token", admin)
        page.click("#login-form button")
        wait_rows(page, "#t-queues", lambda rows: any(r[0] == "secured" for r in rows), "auth: after login the queues show")
        check("auth: the token is kept in sessionStorage",
              page.evaluate("sessionStorage.getItem('regina.token')") == admin)
        check("auth: no page errors", not errors, errors)
        ctx.close()
    finally:
        n.stop()


def banner_when_full(browser, binary):
    """A node whose disk watermark is below what this disk uses refuses
    writes: every page says so in the banner."""
    n = Node(binary, {"REGINA_DISK_HIGH_PCT": "1", "REGINA_DISK_LOW_PCT": "0"})
    try:
        deadline = time.time() + 10
        health = {}
        while time.time() < deadline and not health.get("storageFull"):
            health = n.call("GET", "/health", expect_ok=False)
            time.sleep(0.2)
        check("full disk: /health says storageFull", health.get("storageFull"), health)
        ctx = new_context(browser)
        page = ctx.new_page()
        page.goto(n.url + "/#/cluster")
        page.wait_for_selector("#banner:not([hidden])", timeout=WAIT_MS)
        text = page.inner_text("#banner")
        check("full disk: the banner says the node refuses writes", "refuses writes" in text, text)
        page.wait_for_selector('#page[data-loaded="1"]', timeout=WAIT_MS)
        wait_card(page, "full", "yes", "full disk: the cluster page says it refuses writes")
        ctx.close()
    finally:
        n.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--screenshots", help="write PNGs of the main pages here")
    ap.add_argument("--no-auth-run", action="store_true", help="skip the run with JWT on")
    ap.add_argument("--assets-dir", help="serve the page's own files (index.html, app.js, app.css) from this "
                    "directory instead of the binary's: for working on the page without a rebuild")
    args = ap.parse_args()
    global ASSETS_DIR
    ASSETS_DIR = args.assets_dir
    from playwright.sync_api import sync_playwright

    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
    started = time.time()
    n = Node(os.path.abspath(args.binary))
    try:
        seeded = seed(n)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, headless=True,
                                         args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            try:
                pages_without_auth(browser, n, seeded, args.screenshots)
                banner_when_full(browser, os.path.abspath(args.binary))
                if not args.no_auth_run:
                    pages_with_auth(browser, os.path.abspath(args.binary))
            finally:
                browser.close()
    except Exception as e:
        traceback.print_exc()
        check("the run finished", False, repr(e))
    finally:
        n.stop()
    passed = sum(1 for _, ok, _ in CHECKS if ok)
    failed = len(CHECKS) - passed
    print(f"{passed}/{len(CHECKS)} dashboard checks passed in {time.time() - started:.1f} s")
    sys.exit(0 if failed == 0 and passed > 0 else 1)


if __name__ == "__main__":
    main()
