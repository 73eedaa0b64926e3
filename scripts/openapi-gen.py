#!/usr/bin/env python3
"""Writes crates/server/openapi.json, the OpenAPI 3.1 description of every
client route. The JSON file is what is checked against the router and served
at /api/v1/openapi.json; this script is how it is written. Run it after
changing a route's description here, then commit both.

usage: scripts/openapi-gen.py            write the file
       scripts/openapi-gen.py --check    exit 1 if the file is not what it writes
"""
import json
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "crates", "server", "openapi.json")

VERSION = None
with open(os.path.join(ROOT, "Cargo.toml")) as f:
    for line in f:
        if line.strip().startswith("version") and VERSION is None:
            VERSION = line.split("=", 1)[1].strip().strip('"')

REF = lambda name: {"$ref": f"#/components/schemas/{name}"}
STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
ANY = {}
OBJ = {"type": "object", "additionalProperties": True}
ARR_OBJ = {"type": "array", "items": OBJ}
NULLSTR = {"type": ["string", "null"]}


def obj(props, required=(), extra=True):
    """An object schema; `extra`: whether other keys may appear."""
    s = {"type": "object", "properties": props, "additionalProperties": extra}
    if required:
        s["required"] = list(required)
    return s


def arr(items, **kw):
    return {"type": "array", "items": items, **kw}


def name(max_len=None, desc=None):
    """A queue, partition, group, namespace or task name: 1 to 255 bytes of
    UTF-8 without control characters (63 characters always fit)."""
    s = {"type": "string", "minLength": 1, "maxLength": max_len or 63,
         "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"}
    if desc:
        s["description"] = desc
    return s


# ---------------------------------------------------------------- parameters

PATH_EXAMPLES = {"queue": "orders", "partition": "p1", "partition_id": "1", "transaction_id": "t-1", "ns": "app",
                 "key": "k", "timer_key": "k/1", "group": "g1", "name": "step", "lease_id": "l-1"}


def path_param(n, desc, schema=None):
    p = {"name": n, "in": "path", "required": True, "description": desc, "schema": schema or name()}
    if n in PATH_EXAMPLES and (schema or {}).get("type") != "integer":
        p["example"] = PATH_EXAMPLES[n]
    return p


def q(n, schema, desc, required=False):
    p = {"name": n, "in": "query", "required": required, "description": desc, "schema": schema}
    return p


def qint(n, lo, hi, desc):
    return q(n, {"type": "integer", "minimum": lo, "maximum": hi}, desc)


QBOOL = {"type": "boolean"}
PAGE = [qint("limit", 1, 1000, "Rows per page."), qint("offset", 0, 4294967295, "Rows to skip.")]
ISO = {"type": "string", "description": "An ISO 8601 timestamp (or epoch milliseconds)."}

# ------------------------------------------------------------------ responses

def ok(schema=None, code="200", desc="Success.", media="application/json", more=None):
    content = {media: {"schema": schema if schema is not None else OBJ}}
    if more:
        content.update(more)
    return {code: {"description": desc, "content": content}}


ERRORS = {
    "4XX": {"description": "Refused: bad input, unknown thing, too large, too many. Nothing was done.",
            "content": {"application/json": {"schema": REF("Error")}}},
}


FAMILY_ERRORS = {
    "4XX": {"description": "Refused: bad input, unknown thing, too large. Nothing was done. The KV, locks and "
                           "timers routes (and a transaction's KV and timer riders) answer in their family's "
                           "envelope `{\"error\": <code>, \"reason\", \"detail\"}`; other refusals in the common one.",
            "content": {"application/json": {"schema": {"anyOf": [REF("Error"), REF("FamilyError")]}}}},
}


# Realistic requests, sent first (the examples phase) so the run walks the
# ordinary paths before it fuzzes them.
BODY_EXAMPLES = {
    "Push messages": {"items": [{"queue": "orders", "partition": "p1", "payload": {"id": 1}, "transactionId": "t-1"}]},
    "Create or configure a queue": {"queue": "orders", "options": {"leaseTime": 30, "retryLimit": 2}},
    "Acknowledge one message": {"transactionId": "t-1", "partitionId": "1", "status": "completed"},
    "Acknowledge messages": {"acknowledgments": [{"transactionId": "t-1", "partitionId": "1", "status": "failed",
                                                  "error": "boom"}], "consumerGroup": None},
    "Push, ack, KV and timer operations in one step": {
        "operations": [{"type": "push", "items": [{"queue": "orders", "payload": {"id": 2}, "transactionId": "t-2"}]}],
        "kv": [{"op": "put", "ns": "app", "key": "k2", "value": 1, "forever": True}]},
    "KV operations": {"operations": [{"op": "put", "ns": "app", "key": "k", "value": {"v": 1}, "forever": True},
                                     {"op": "get", "ns": "app", "key": "k"}]},
    "Write a key": {"value": {"v": 2}, "ttlSeconds": 60},
    "Lock and semaphore operations": {"operations": [{"op": "acquire", "name": "l1", "ttlSeconds": 30, "owner": "me"}]},
    "Job operations": {"operations": [{"op": "enqueue", "queue": "orders", "id": "job-1", "payload": {"a": 1}}]},
    "Timer operations": {"operations": [{"op": "schedule", "queue": "orders", "timerKey": "k/1",
                                         "payload": "eyJhIjoxfQ==", "delayMs": 60000, "txn": "tx-1"}]},
    "Push to an ephemeral queue": {"queue": "orders", "messages": [{"payload": {"a": 1}}]},
    "Acknowledge ephemeral messages": {"queue": "orders", "acks": [{"id": "1", "status": "completed"}]},
    "Configure an ephemeral queue": {"queue": "orders", "options": {"maxLength": 100}},
    "Drop an ephemeral queue's messages": {"queue": "orders"},
    "Record a trace event": {"transactionId": "t-1", "partitionId": "1", "consumerGroup": "__QUEUE_MODE__",
                             "traceNames": ["step"], "eventType": "info", "data": {"n": 1}},
    "Read partitions by offset": {"entries": [{"queue": "orders", "partition": "p1", "offset": 0}]},
    "Partitions changed since": {"entries": [{"queue": "orders", "limit": 100}]},
    "Move a group's cursor": {"toEnd": True},
    "Set where a group starts": {"queue": "orders", "subscriptionTimestamp": "2026-01-01T00:00:00Z"},
    "Register a stream query": {"name": "q1", "source_queue": "orders", "config_hash": "h1", "reset": False},
}


def op(summary, tag, responses, params=(), body=None, body_required=True, desc=None, body_media=None):
    errors = FAMILY_ERRORS if tag in ("kv", "locks", "timers") or summary.startswith("Push, ack, KV") else ERRORS
    o = {"summary": summary, "tags": [tag], "responses": {**responses, **errors}}
    if desc:
        o["description"] = desc
    if params:
        o["parameters"] = list(params)
    if body is not None:
        content = {"application/json": {"schema": body}}
        if summary in BODY_EXAMPLES:
            content["application/json"]["example"] = BODY_EXAMPLES[summary]
        if body_media:
            content.update(body_media)
        o["requestBody"] = {"required": body_required, "content": content}
    return o


# -------------------------------------------------------------- the schemas

ERROR = obj({
    "error": {"type": "string", "description": "What was wrong, in words."},
    "code": {"type": "string", "description": "A stable code (see docs/limits.md for the limits' codes)."},
    "field": {"type": "string", "description": "The input field that was wrong, where one was."},
}, ["error", "code"])

FAMILY_ERROR = obj({
    "error": {"type": "string", "description": "The family's code, e.g. `kv_bad_request`, `timers_bad_request`."},
    "reason": {"type": "string", "description": "A stable id of what was wrong, e.g. `kv_bad_namespace`."},
    "detail": {"type": "string", "description": "What was wrong, in words."},
}, ["error", "reason"])

POP_MESSAGE = obj({
    "id": STR, "transactionId": STR, "traceId": NULLSTR, "data": ANY, "producerSub": NULLSTR,
    "createdAt": STR, "partitionId": STR, "partition": STR, "leaseId": STR, "consumerGroup": STR,
    "deliveryAttempt": INT, "offset": INT,
}, ["id", "transactionId", "partitionId"])

POP_ANSWER = obj({
    "success": BOOL, "queue": STR, "partition": STR, "partitionId": STR, "leaseId": STR,
    "consumerGroup": STR, "messages": arr(POP_MESSAGE), "partitionsClaimed": INT,
    "conflation": BOOL, "conflationConflict": BOOL, "autopilot": OBJ,
}, ["messages"])

PUSH_ITEM = obj({
    "queue": name(desc="The queue (created if it does not exist)."),
    "partition": {"anyOf": [name(), {"const": ""}, {"type": "null"}],
                  "description": "The partition; absent, empty or null is `Default`."},
    "payload": {"description": "Any JSON value."},
    "transactionId": {"type": "string", "description": "The producer's id, for deduplication; minted when absent."},
    "traceId": {"type": "string"},
}, ["queue"])

PUSH_RESULT = obj({
    "index": INT, "message_id": NULLSTR, "transaction_id": NULLSTR, "transactionId": NULLSTR,
    "queueName": STR, "status": STR, "error": NULLSTR, "offset": INT,
})

ACK = obj({
    "transactionId": STR, "partitionId": {"type": ["string", "integer"]}, "status": STR,
    "error": NULLSTR, "consumerGroup": {"anyOf": [name(), {"const": ""}, {"type": "null"}]},
    "leaseId": {"type": ["string", "null"], "maxLength": 128},
}, ["transactionId", "partitionId"])

ACK_RESULT = obj({"index": INT, "transactionId": NULLSTR, "success": BOOL, "error": NULLSTR,
                  "leaseReleased": BOOL, "dlq": BOOL, "noop": BOOL})

KV_OP = obj({
    "op": {"type": "string", "enum": ["get", "getMany", "getPrefix", "put", "putIfAbsent", "delete", "check", "incr"]},
    "ns": STR, "key": STR, "keys": arr(STR), "prefix": STR, "after": STR, "limit": INT, "keysOnly": BOOL,
    "value": ANY, "ttlSeconds": INT, "forever": BOOL, "expect": INT, "required": BOOL,
    "delta": {"type": "number"}, "min": {"type": "number"}, "max": {"type": "number"},
}, ["op"])

TIMER_OP = obj({
    "op": {"type": "string", "enum": ["schedule", "reschedule", "cancel"]},
    "queue": STR, "timerKey": STR, "payload": {"type": "string", "description": "Base64 of the JSON payload."},
    "payloadZstd": BOOL, "delayMs": INT, "txn": STR, "partition": STR,
}, ["op"])

LOCK_OP = obj({
    "op": {"type": "string", "enum": ["acquire", "renew", "release", "get"]},
    "name": STR, "ttlSeconds": INT, "owner": STR, "limit": INT, "token": INT, "slot": INT,
}, ["op"])

LIFETIMES = ["ttlSeconds", "forever", "expiresAt", "afterCreationMs", "afterUpdateMs"]
KV_PUT = {
    **obj({"value": ANY, "ttlSeconds": {"type": "integer", "minimum": 1, "maximum": 31536000},
           "forever": {"const": True}, "expiresAt": STR,
           "afterCreationMs": {"type": "integer", "minimum": 1}, "afterUpdateMs": {"type": "integer", "minimum": 1},
           "expect": {"type": "integer", "minimum": 0}}, ["value"]),
    "description": "A value and one lifetime (`ttlSeconds`, `forever: true`, `expiresAt`, `afterCreationMs` or "
                   "`afterUpdateMs`), unless the namespace has a default lifetime.",
    "oneOf": [{"required": [k]} for k in LIFETIMES],
}

OPERATIONS = lambda item: obj({"operations": arr(item)}, ["operations"])
RESULTS = obj({"results": ARR_OBJ}, ["results"])

SCHEMAS = {"Error": ERROR, "FamilyError": FAMILY_ERROR, "PopAnswer": POP_ANSWER, "PushItem": PUSH_ITEM, "Ack": ACK}

# ------------------------------------------------------------------- routes

POP_QUERY = [
    q("consumerGroup", name(), "The consumer group; absent is queue mode (`__QUEUE_MODE__`)."),
    qint("batch", 1, 10000, "Most messages in this pop (default 200)."),
    qint("partitions", 1, 4294967295, "Most partitions a wildcard pop claims (larger values are clamped to 64)."),
    q("wait", QBOOL, "Long-poll while nothing is ready (default false)."),
    qint("timeout", 0, 60000, "Long-poll budget in ms (default 30000). The server takes any larger integer and clamps it to 60000; the document bounds it there."),
    qint("leaseSeconds", 0, 86400, "This pop's lease length, over the queue's `leaseTime`."),
    q("autoAck", QBOOL, "Commit at delivery: no lease."),
    q("commitOnDelivery", QBOOL, "The same as `autoAck`."),
    q("conflation", QBOOL, "Last-value delivery for the group."),
    q("autopilot", QBOOL, "The broker chooses omitted knobs and echoes them."),
    q("subscriptionMode", {"type": "string", "enum": ["all", "new", "new-only", "from_beginning"]},
      "How a new group's cursor is seeded."),
    q("subscriptionFrom", STR, "`now` or an ISO timestamp: where a new group's cursor starts."),
    q("frames", QBOOL, "Answer in the binary `QPF1` form where possible."),
    q("namespace", name(), "Discovery filter."),
    q("task", name(), "Discovery filter."),
]
POP_RESPONSES = ok(REF("PopAnswer"), desc="The claimed messages (possibly none).",
                   more={"application/x-queen-pop": {"schema": {"type": "string", "format": "binary"}}})

JOB_OPS = ["configure", "enqueue", "claim", "renew", "complete", "fail", "release", "retry", "cancel", "get",
           "scan", "stats"]
QUEUE = path_param("queue", "A queue name.")
PART_ID = path_param("partition_id", "A partition id (decimal).", STR)
TXN_ID = path_param("transaction_id", "A message's transaction id.", STR)
GROUP = path_param("group", "A consumer group name.")


HEALTH = obj({"status": {"type": "string", "enum": ["healthy", "storage_failed", "storage_full", "unhealthy"]},
              "engine": STR, "version": STR, "nodeId": INT, "leader": {"type": ["integer", "null"]}, "role": STR,
              "members": ARR_OBJ, "disk": OBJ, "storageFull": BOOL, "storageShort": NULLSTR,
              "storageError": NULLSTR}, ["status", "engine"])


PAGINATION = obj({"limit": INT, "offset": INT, "total": INT})
QUEUE_ROW = obj({"name": STR, "namespace": NULLSTR, "task": NULLSTR, "partitions": INT, "depth": INT,
                 "messages": obj({"total": INT, "pending": INT, "processing": INT, "completed": INT,
                                  "deadLetter": INT})}, ["name"])
TRACES = obj({"traces": ARR_OBJ, "total": INT}, ["traces"])
VIEWS = {
    "/api/v1/resources/queues": obj({"queues": arr(QUEUE_ROW), "pagination": PAGINATION}, ["queues"]),
    "/api/v1/status/queues": obj({"queues": arr(QUEUE_ROW), "pagination": PAGINATION}, ["queues"]),
    "/api/v1/resources/namespaces": obj({"namespaces": ARR_OBJ, "total": INT}, ["namespaces"]),
    "/api/v1/resources/tasks": obj({"tasks": ARR_OBJ, "total": INT}, ["tasks"]),
    "/api/v1/resources/partitions": obj({"partitions": arr(obj({"id": STR, "partition": STR, "queue": STR},
                                                               ["id", "partition", "queue"])),
                                         "total": INT}, ["partitions"]),
    "/api/v1/resources/queues/{queue}/depth": obj({"queue": STR, "pending": INT, "processing": INT, "ready": INT,
                                                   "partitions": ARR_OBJ}, ["queue"]),
    "/api/v1/messages": obj({"messages": arr(obj({"id": STR, "transactionId": STR, "queue": STR,
                                                  "partition": STR, "partitionId": STR, "offset": INT,
                                                  "status": STR, "data": ANY}, ["id", "transactionId"]))},
                            ["messages"]),
    "/api/v1/messages/{partition_id}/{transaction_id}": obj({"id": STR, "data": ANY, "consumerGroups": ARR_OBJ},
                                                            ["id"]),
    "/api/v1/status/analytics": obj({"dataPoints": ARR_OBJ, "bucketMinutes": INT}),
    "/api/v1/analytics/system-metrics": obj({"replicas": ARR_OBJ, "bucketMinutes": INT, "pointCount": INT}),
}


def routes():
    r = {}

    def add(method, path, operation):
        r.setdefault(path, {})[method.lower()] = operation

    # Health and metrics.
    add("GET", "/health", op("Node health", "health",
        {**ok(HEALTH, desc="Healthy."),
         "503": {"description": "Unhealthy (no leader, storage error or full disk).",
                 "content": {"application/json": {"schema": HEALTH}}}}))
    add("GET", "/metrics", op("Node metrics (JSON; Prometheus text when Accept asks for text/plain)", "health",
        ok(OBJ, more={"text/plain": {"schema": STR}})))
    add("GET", "/metrics/prometheus", op("Prometheus metrics", "health", ok(STR, media="text/plain")))
    add("GET", "/api/v1/openapi.json", op("This document", "health", ok(OBJ, desc="The OpenAPI document.")))

    # Messages.
    push_body = obj({"items": arr(REF("PushItem"))}, ["items"])
    add("POST", "/api/v1/push", op("Push messages", "messages",
        ok(arr(PUSH_RESULT), "201", "One result per item, in order."),
        body=push_body, desc="Also accepts the binary `QPB1` form (a body starting with `QPB1`)."))
    msg = {"partition_id": "$response.body#/0/partitionId", "transaction_id": "$response.body#/0/transactionId"}
    r["/api/v1/push"]["post"]["responses"]["201"]["links"] = {
        "GetMessage": {"operationId": "getMessage", "parameters": msg},
        "GetTraces": {"operationId": "getMessageTraces", "parameters": msg},
        "RetryMessage": {"operationId": "retryDeadLetter", "parameters": msg},
        "DeleteMessage": {"operationId": "deleteDeadLetter", "parameters": msg},
    }
    add("GET", "/api/v1/pop", op("Pop by namespace/task", "messages", POP_RESPONSES, params=POP_QUERY,
        desc="Needs `namespace` or `task`."))
    add("GET", "/api/v1/pop/queue/{queue}", op("Pop from any partition of a queue", "messages", POP_RESPONSES,
        params=[QUEUE] + POP_QUERY[:-2]))
    add("GET", "/api/v1/pop/queue/{queue}/partition/{partition}", op("Pop from one partition", "messages",
        POP_RESPONSES, params=[QUEUE, path_param("partition", "A partition name.")] + POP_QUERY[:-2]))
    add("POST", "/api/v1/ack", op("Acknowledge one message", "messages", ok(arr(ACK_RESULT)), body=REF("Ack")))
    add("POST", "/api/v1/ack/batch", op("Acknowledge messages", "messages", ok(arr(ACK_RESULT)),
        body=obj({"acknowledgments": arr(REF("Ack")), "consumerGroup": NULLSTR}, ["acknowledgments"])))
    add("POST", "/api/v1/lease/{lease_id}/extend", op("Extend a lease", "messages",
        ok(obj({"leaseId": STR, "success": BOOL, "renewed": INT})),
        params=[path_param("lease_id", "A lease id.", STR)], body=OBJ, body_required=False))
    add("POST", "/api/v1/transaction", op("Push, ack, KV and timer operations in one step", "messages",
        ok(obj({"success": BOOL, "transactionId": STR, "results": ARR_OBJ})),
        body=obj({"operations": arr(obj({"type": {"type": "string", "enum": ["push", "ack"]},
                                         "items": arr(REF("PushItem"))}, ["type"])),
                  "requiredLeases": arr(STR), "kv": arr(KV_OP), "timers": arr(TIMER_OP)}, ["operations"]),
        desc="Also accepts the binary `QTB1` form."))
    add("POST", "/api/v1/configure", op("Create or configure a queue", "queues",
        ok(obj({"configured": BOOL, "queue": STR, "options": OBJ})),
        body=obj({"queue": name(), "namespace": NULLSTR, "task": NULLSTR, "options": OBJ,
                  "mode": {"type": "string", "enum": ["merge", "replace"]}}, ["queue"])))
    add("GET", "/api/v1/dlq", op("Dead-letter rows", "messages", ok(obj({"messages": ARR_OBJ, "total": INT},
                                                                        ["messages"])),
        params=[q("queue", STR, "The queue."), q("consumerGroup", STR, "The group."),
                q("partition", STR, "The partition."), q("from", ISO, "From."), q("to", ISO, "To."),
                qint("limit", 1, 1000, "Rows per page (default 100)."), PAGE[1]]))
    add("DELETE", "/api/v1/dlq", op("Purge dead letters", "messages", ok(obj({"purged": INT}, ["purged"])),
        params=[q("queue", STR, "The queue (required)."), q("consumerGroup", STR, "Only this group's rows."),
                q("partition", STR, "Only this partition's rows.")]))
    add("POST", "/api/v1/dlq/{id}/replay", op("Replay a dead letter by id", "messages", ok(),
        params=[path_param("id", "The dead-lettered message's id.", {"type": "string", "format": "uuid"})]))
    add("DELETE", "/api/v1/messages/{partition_id}/{transaction_id}", op("Delete a dead letter", "messages",
        ok(), params=[PART_ID, TXN_ID]))
    add("POST", "/api/v1/messages/{partition_id}/{transaction_id}/retry", op("Retry a dead letter", "messages",
        ok(), params=[PART_ID, TXN_ID]))
    add("POST", "/api/v1/fetch", op("Read partitions by offset", "messages", ok(obj({"entries": ARR_OBJ})),
        body=obj({"entries": arr(obj({"queue": STR, "partition": {"type": ["string", "integer"]},
                                      "offset": INT, "maxBytes": INT}, ["queue", "offset"])),
                  "maxBytes": INT, "minBytes": INT,
                  "maxWaitMs": {"type": "integer", "minimum": 0, "description": "Wait for records (clamped to 30000)."}})))
    add("POST", "/api/v1/fetch/offsets", op("Find offsets by time", "messages", ok(obj({"entries": ARR_OBJ})),
        body=obj({"entries": arr(obj({"queue": STR, "partition": {"type": ["string", "integer"]},
                                      "timestamp": {"type": "string", "format": "date-time"}},
                                     ["queue", "timestamp"]))}, ["entries"])))
    add("POST", "/api/v1/partitions/changed", op("Partitions changed since", "messages",
        ok(obj({"entries": ARR_OBJ})),
        body=obj({"entries": arr(obj({"queue": STR, "limit": INT, "since": STR, "after": ANY}, ["queue"]))})))

    # KV, locks, jobs, timers.
    key = path_param("key", "The key. In the router a `{*key}` wildcard: it may hold `/`.", STR)
    ns = path_param("ns", "A KV namespace.")
    add("POST", "/api/v1/kv", op("KV operations", "kv", ok(RESULTS), body=OPERATIONS(KV_OP)))
    add("GET", "/api/v1/kv/{ns}/{key}", op("Read a key", "kv",
        ok(obj({"found": BOOL, "key": STR, "value": ANY, "version": INT, "expiresAt": NULLSTR}, ["found"])),
        params=[ns, key]))
    add("PUT", "/api/v1/kv/{ns}/{key}", op("Write a key", "kv", ok(), params=[ns, key],
        body=KV_PUT))
    add("DELETE", "/api/v1/kv/{ns}/{key}", op("Delete a key", "kv", ok(), params=[ns, key]))
    add("POST", "/api/v1/locks", op("Lock and semaphore operations", "locks", ok(RESULTS),
        body=OPERATIONS(LOCK_OP)))
    add("POST", "/api/v1/jobs", op("Job operations", "jobs", ok(),
        body=OPERATIONS(obj({"op": {"type": "string", "enum": JOB_OPS}, "queue": name(), "id": STR,
                             "waitMs": {"type": "integer", "minimum": 0}}, ["op", "queue"]))))
    add("GET", "/api/v1/jobs/{queue}", op("List jobs", "jobs",
        ok(obj({"rows": arr(obj({"id": STR, "queue": STR, "state": STR, "attempts": INT, "payload": ANY}, ["id"])),
                "truncated": BOOL, "nextAfter": NULLSTR}, ["rows"])), params=[
        QUEUE, q("scope", STR, "A scope."), q("state", STR, "A state."), q("limit", STR, "Rows."),
        q("after", STR, "Exclusive cursor.")]))
    add("GET", "/api/v1/jobs/{queue}/stats", op("Job counts", "jobs",
        ok(obj({"counts": {"type": "object", "additionalProperties": INT}, "ready": BOOL, "readyCount": INT},
               ["counts"])), params=[QUEUE]))
    add("POST", "/api/v1/timers", op("Timer operations", "timers", ok(RESULTS), body=OPERATIONS(TIMER_OP)))
    add("GET", "/api/v1/timers/{queue}", op("List timers", "timers",
        ok(obj({"rows": ARR_OBJ, "truncated": BOOL, "nextAfter": NULLSTR})), params=[
        QUEUE, q("after", STR, "Exclusive cursor."), qint("limit", 1, 4294967295, "Rows (clamped)."),
        q("order", STR, "Sort order."), q("state", STR, "A state.")]))
    tkey = path_param("timer_key", "The timer key. In the router a `{*timer_key}` wildcard: it may hold `/`.", STR)
    add("GET", "/api/v1/timers/{queue}/{timer_key}", op("Peek at a timer", "timers",
        ok(obj({"found": BOOL}, ["found"])), params=[QUEUE, tkey]))
    add("DELETE", "/api/v1/timers/{queue}/{timer_key}", op("Cancel a timer", "timers",
        ok(obj({"ok": BOOL, "status": STR})), params=[QUEUE, tkey, q("txn", STR, "The timer's txn.")]))

    # Ephemeral queues.
    add("POST", "/api/v1/ephemeral/push", op("Push to an ephemeral queue", "ephemeral",
        ok(obj({"pushed": INT}, ["pushed"]), "201"),
        body=obj({"queue": name(), "partition": STR, "messages": arr(obj({"payload": ANY}))}, ["queue", "messages"])))
    add("GET", "/api/v1/ephemeral/pop", op("Pop from an ephemeral queue", "ephemeral",
        ok(obj({"queue": STR, "messages": arr(obj({"id": STR, "partition": STR, "attempts": INT, "payload": ANY},
                                                 ["id", "partition", "payload"]))}, ["messages"])), params=[
        q("queue", name(), "The queue.", required=True), q("partition", STR, "The partition."),
        qint("batch", 1, 10000, "Most messages."), q("wait", QBOOL, "Long-poll."),
        qint("timeout", 0, 300000, "Long-poll budget in ms (clamped to 300000)."),
        q("group", STR, "The group."), q("consumerGroup", STR, "The group."), q("autoAck", QBOOL, "No lease."),
        q("commitOnDelivery", QBOOL, "The same as `autoAck`.")]))
    add("POST", "/api/v1/ephemeral/ack", op("Acknowledge ephemeral messages", "ephemeral", ok(RESULTS),
        body=obj({"queue": name(), "group": STR, "acks": arr(obj({"id": STR, "status": STR, "error": STR}, ["id"]))},
                 ["queue", "acks"])))
    add("POST", "/api/v1/ephemeral/configure", op("Configure an ephemeral queue", "ephemeral", ok(),
        body=obj({"queue": name(), "options": OBJ}, ["queue"])))
    add("GET", "/api/v1/ephemeral/queues", op("Ephemeral queues", "ephemeral",
        ok(obj({"queues": arr(obj({"queue": STR, "depth": INT, "bytes": INT, "partitions": INT}, ["queue"])),
                "bytes": INT, "bytesMax": INT}, ["queues"]))))
    add("GET", "/api/v1/ephemeral/queues/{queue}/depth", op("Ephemeral queue depth", "ephemeral", ok(),
        params=[QUEUE]))
    add("POST", "/api/v1/ephemeral/reset", op("Drop an ephemeral queue's messages", "ephemeral", ok(),
        body=obj({"queue": name()}, ["queue"])))
    add("DELETE", "/api/v1/ephemeral/queue/{queue}", op("Delete an ephemeral queue", "ephemeral", ok(),
        params=[QUEUE]))

    # Traces.
    add("POST", "/api/v1/traces", op("Record a trace event", "traces",
        ok(obj({"success": BOOL, "traceId": STR}), "201"),
        body=obj({"transactionId": STR, "partitionId": {"type": ["string", "integer"]}, "consumerGroup": STR,
                  "traceNames": {"type": ["array", "null"], "items": STR}, "eventType": STR, "data": ANY},
                 ["transactionId", "partitionId"])))
    add("GET", "/api/v1/traces/names", op("Trace names", "traces",
        ok(obj({"trace_names": ARR_OBJ, "total": INT, "pagination": PAGINATION}, ["trace_names"])), params=PAGE))
    add("GET", "/api/v1/traces/by-name/{name}", op("Traces by name", "traces", ok(TRACES),
        params=[path_param("name", "A trace name.", STR)] + PAGE))
    add("GET", "/api/v1/traces/{partition_id}/{transaction_id}", op("A message's traces", "traces", ok(TRACES),
        params=[PART_ID, TXN_ID]))

    # Views.
    labels = [q("namespace", STR, "Filter."), q("task", STR, "Filter.")]
    for path, summary, params in [
        ("/api/v1/resources/overview", "Overview", []),
        ("/api/v1/resources/namespaces", "Namespaces", []),
        ("/api/v1/resources/tasks", "Tasks", []),
        ("/api/v1/resources/queues", "Queues", labels + [q("search", STR, "Name contains.")] + PAGE),
        ("/api/v1/resources/queues/{queue}", "A queue", [QUEUE]),
        ("/api/v1/resources/queues/{queue}/depth", "A queue's depth", [QUEUE, q("group", STR, "A group.")]),
        ("/api/v1/resources/partitions", "Partitions", [q("queue", STR, "A queue."), qint("limit", 1, 10000, "Rows.")]),
        ("/api/v1/messages", "Messages", [q("queue", STR, "A queue."), q("partition", STR, "A partition."),
                                          q("status", STR, "A status.")] + labels
         + [q("from", ISO, "From."), q("to", ISO, "To.")] + PAGE),
        ("/api/v1/messages/{partition_id}/{transaction_id}", "A message", [PART_ID, TXN_ID]),
        ("/api/v1/consumer-groups/{group}", "A consumer group", [GROUP]),
        ("/api/v1/status", "Status", [q("from", ISO, "From."), q("to", ISO, "To.")]),
        ("/api/v1/status/queues", "Status per queue", labels + PAGE),
        ("/api/v1/status/queues/{queue}", "A queue's status", [QUEUE]),
        ("/api/v1/status/analytics", "Analytics", [q("queue", STR, "A queue."), q("from", ISO, "From."),
                                                   q("to", ISO, "To.")]),
        ("/api/v1/analytics/system-metrics", "System metrics", [q("from", ISO, "From."), q("to", ISO, "To.")]),
        ("/api/v1/analytics/worker-metrics", "Worker metrics", [q("from", ISO, "From."), q("to", ISO, "To.")]),
    ]:
        add("GET", path, op(summary, "views", ok(VIEWS.get(path)), params=params))
    add("GET", "/api/v1/consumer-groups", op("Consumer groups", "views", ok(ARR_OBJ)))
    add("GET", "/api/v1/consumer-groups/lagging", op("Lagging consumer groups", "views", ok(ARR_OBJ),
        params=[q("minLagSeconds", INT, "Least lag in seconds (default 60; a negative value is 0).")]))
    add("POST", "/api/v1/stats/refresh", op("Refresh consumer statistics", "views", ok()))

    # The dashboard: its page, its files, its history and its listings.
    add("GET", "/", op("The dashboard (a web page)", "dashboard", ok(STR, media="text/html", desc="The page."),
        desc="Served without a token when `/` is a skip path (the default)."))
    add("GET", "/dashboard/{file}", op("A file of the dashboard", "dashboard",
        {"200": {"description": "The file.", "content": {"text/javascript": {"schema": STR},
                                                          "text/css": {"schema": STR}}},
         "304": {"description": "Not modified (If-None-Match named its ETag)."}},
        params=[path_param("file", "A file name, e.g. `app.js` or `vendor/uPlot.min.css`.", STR)],
        desc="Served without a token: the files hold no data. An unknown name is 404 `no_such_route`."))
    group_lag = obj({"group": STR, "lagMessages": INT, "lagSeconds": INT})
    sample = obj({"at": STR, "atMs": INT, "pushed": INT, "consumed": INT, "pushedPerSecond": {"type": "number"},
                  "consumedPerSecond": {"type": "number"}, "depth": INT, "deadLetters": INT,
                  "oldestUnconsumedSeconds": INT, "groups": arr(group_lag)},
                 ["atMs", "pushed", "consumed", "depth", "groups"])
    add("GET", "/api/v1/dashboard/history", op("The last hour of samples the dashboard charts", "dashboard",
        ok(obj({"intervalMs": INT, "pointsMax": INT, "samples": arr(sample), "current": sample},
               ["intervalMs", "pointsMax", "samples", "current"])),
        desc="A sample every `intervalMs`, the last `pointsMax` kept in memory (not logged; empty after a "
             "restart), and `current`, measured now."))
    listed = lambda key, item: ok(obj({key: arr(item), "total": INT, "truncated": BOOL}, [key, "total"]))
    add("GET", "/api/v1/resources/kv/namespaces", op("KV namespaces", "dashboard",
        listed("namespaces", obj({"namespace": STR, "rows": INT, "locks": BOOL}, ["namespace", "rows"]))))
    add("GET", "/api/v1/resources/kv/list", op("KV rows of a namespace by prefix", "dashboard",
        ok(obj({"namespace": STR, "prefix": STR, "nextAfter": NULLSTR,
                "rows": arr(obj({"key": STR, "value": ANY, "version": INT, "createdAt": STR, "updatedAt": STR,
                                 "expiresAt": NULLSTR}, ["key", "version"]))}, ["rows"])),
        params=[q("namespace", {"type": "string", "minLength": 1}, "A namespace.", required=True),
                q("prefix", STR, "Keys starting with it."), q("after", STR, "Keys after it (the cursor)."),
                qint("limit", 1, 1000, "Rows (default 100).")]))
    add("GET", "/api/v1/resources/locks", op("Locks and semaphores with their holders", "dashboard",
        listed("locks", obj({"name": STR, "held": INT, "holders": arr(obj({
            "slot": INT, "owner": NULLSTR, "token": INT, "since": NULLSTR, "expiresAt": NULLSTR,
            "renewedAt": STR}))}, ["name", "holders"]))))
    add("GET", "/api/v1/resources/timers", op("Timer queues", "dashboard",
        listed("queues", obj({"queue": STR, "pending": INT, "failed": INT}, ["queue", "pending", "failed"]))))
    add("GET", "/api/v1/resources/jobs", op("Job queues", "dashboard",
        listed("queues", obj({"queue": STR, "scopes": INT, "pending": INT, "leased": INT, "finished": INT},
                             ["queue"]))))

    # Consumer-group maintenance.
    add("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/seek", op("Move a group's cursor", "groups", ok(),
        params=[GROUP, QUEUE], body=obj({"timestamp": STR, "toEnd": BOOL})))
    add("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek",
        op("Move a group's cursor on one partition", "groups", ok(),
           params=[GROUP, QUEUE, path_param("partition", "A partition name.", STR)],
           body=obj({"timestamp": STR, "toEnd": BOOL})))
    add("POST", "/api/v1/consumer-groups/{group}/subscription", op("Set where a group starts", "groups", ok(),
        params=[GROUP], body=obj({"queue": name(), "subscriptionTimestamp": {"type": "string", "format": "date-time"}},
                 ["subscriptionTimestamp"])))
    add("DELETE", "/api/v1/consumer-groups/{group}", op("Delete a consumer group", "groups", ok(),
        params=[GROUP, q("deleteMetadata", QBOOL, "Also forget its metadata (default true).")]))
    add("DELETE", "/api/v1/consumer-groups/{group}/queues/{queue}", op("Delete a group on one queue", "groups",
        ok(), params=[GROUP, QUEUE, q("deleteMetadata", QBOOL, "Also forget its metadata (default true).")]))
    add("DELETE", "/api/v1/resources/queues/{queue}", op("Delete a queue", "queues", ok(), params=[QUEUE]))

    # The cluster.
    add("GET", "/api/v1/cluster", op("The cluster", "cluster",
        ok(obj({"nodeId": INT, "leader": {"type": ["integer", "null"]}, "role": STR, "term": INT,
                "members": arr(obj({"id": INT, "addr": STR, "voter": BOOL}, ["id", "addr"]))}, ["members"]))))
    add("POST", "/api/v1/cluster/members", op("Add a member", "cluster", ok(),
        body=obj({"id": {"type": "integer", "minimum": 1}, "addr": STR}, ["id", "addr"], extra=False)))
    add("DELETE", "/api/v1/cluster/members/{id}", op("Remove a member", "cluster", ok(),
        params=[path_param("id", "A node id.", {"type": "integer", "minimum": 1})]))
    add("POST", "/api/v1/cluster/snapshot", op("Take a snapshot", "cluster", ok()))
    add("GET", "/api/v1/cluster/groups", op("The Raft groups", "cluster",
        ok(obj({"groups": arr(obj({"group": INT, "leader": {"type": ["integer", "null"]}, "term": INT}, ["group"]))},
               ["groups"]))))
    gnum = path_param("group", "A Raft group number.", {"type": "integer", "minimum": 0})
    add("PUT", "/api/v1/cluster/groups/{group}/leader", op("Pin a group's leader", "cluster", ok(),
        params=[gnum], body=obj({"node": {"type": "integer", "minimum": 0}}, ["node"], extra=False)))
    add("DELETE", "/api/v1/cluster/groups/{group}/leader", op("Unpin a group's leader", "cluster", ok(),
        params=[gnum]))

    # Queen's membership routes, and backups.
    node_id = path_param("id", "A node id.", {"type": "integer", "minimum": 1})
    ids = arr({"type": "integer", "minimum": 1})
    add("GET", "/api/v1/system/raft/membership", op("The membership (Queen's form)", "cluster",
        ok(obj({"membership": obj({"voters": ids, "learners": ids, "members": ARR_OBJ})}, ["membership"]))))
    add("POST", "/api/v1/system/raft/membership/learners", op("Add a learner", "cluster", ok(),
        body=obj({"id": {"type": "integer", "minimum": 1}, "raft": STR, "http": STR}, ["id", "raft"])))
    add("POST", "/api/v1/system/raft/membership/promote", op("Promote learners", "cluster", ok(),
        body=obj({"ids": ids}, ["ids"])))
    add("PUT", "/api/v1/system/raft/membership/voters", op("Set the voters", "cluster", ok(),
        body=obj({"voters": ids}, ["voters"])))
    add("DELETE", "/api/v1/system/raft/membership/members/{id}", op("Remove a member (Queen's path)", "cluster",
        ok(), params=[node_id]))
    octets = {"type": "string", "format": "binary"}
    add("GET", "/api/v1/system/backup/{group}", op("A group's backup snapshot", "cluster",
        ok(octets, media="application/octet-stream", desc="The snapshot file."),
        params=[gnum], desc="The snapshot file (application/octet-stream); `x-regina-backup-segments` lists the body segments."))
    add("GET", "/api/v1/system/backup/{group}/segments/{segment}", op("One body segment of a backup", "cluster",
        ok(octets, media="application/octet-stream", desc="The segment file."), params=[gnum, path_param("segment", "A body segment number.", {"type": "integer", "minimum": 0})]))

    # Stream queries.
    pid = {"type": ["string", "integer"]}
    add("POST", "/streams/v1/queries", op("Register a stream query", "streams", ok(),
        body=obj({"name": STR, "source_queue": STR, "sink_queue": STR, "config_hash": STR, "reset": BOOL},
                 ["name", "source_queue", "config_hash"])))
    add("POST", "/streams/v1/cycle", op("One stream cycle", "streams", ok(),
        body=obj({"query_id": STR, "partition_id": pid, "consumer_group": STR, "state_ops": ARR_OBJ,
                  "push_items": ARR_OBJ, "ack": {"type": ["object", "null"]}, "release_lease": BOOL},
                 ["query_id", "partition_id"])))
    add("POST", "/streams/v1/claim", op("Claim stream partitions", "streams", ok(),
        body=obj({"query_id": STR, "partition_ids": arr(pid), "consumer_group": STR, "lease_seconds": INT},
                 ["query_id"])))
    add("POST", "/streams/v1/state/get", op("Read stream state", "streams", ok(),
        body=obj({"query_id": STR, "partition_id": pid, "keys": arr(STR), "key_prefix": STR,
                  "ripe_at_or_before": {"type": "number"}}, ["query_id", "partition_id"])))
    add("POST", "/streams/v1/state/partitions", op("Stream state partitions", "streams", ok(),
        body=obj({"query_id": STR, "untouched_for_ms": INT, "after": pid, "limit": INT}, ["query_id"])))
    # Operation ids the links name.
    for path, method, ident in [
        ("/api/v1/messages/{partition_id}/{transaction_id}", "get", "getMessage"),
        ("/api/v1/messages/{partition_id}/{transaction_id}", "delete", "deleteDeadLetter"),
        ("/api/v1/messages/{partition_id}/{transaction_id}/retry", "post", "retryDeadLetter"),
        ("/api/v1/traces/{partition_id}/{transaction_id}", "get", "getMessageTraces"),
    ]:
        r[path][method]["operationId"] = ident
    return r


def document():
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Regina",
            "version": VERSION,
            "description": (
                "The HTTP API of a Regina node (Queen MQ compatible). Every route of the client port is here. "
                "The routes between nodes (`/internal/...`: Raft append, vote, snapshots, membership, campaign, "
                "state) are served only on the Raft address, to callers with the cluster token, and are not "
                "described. Errors are JSON `{\"error\", \"code\", \"field\"?}`. Where the router has a wildcard "
                "segment (`{*key}`, `{*timer_key}`) this document names it `{key}`/`{timer_key}`; it may hold `/`. "
                "Every answer also carries `x-regina-leader` and `x-regina-group`. With a multi-tenant node, "
                "`x-queen-tenant` selects the tenant; with auth on, a bearer token is required."),
        },
        "servers": [{"url": "/"}],
        "paths": routes(),
        "components": {"schemas": SCHEMAS},
    }


if __name__ == "__main__":
    import sys
    text = json.dumps(document(), indent=2) + "\n"
    if sys.argv[1:] == ["--check"]:
        with open(OUT) as f:
            if f.read() != text:
                sys.exit(f"{OUT} is not what scripts/openapi-gen.py writes: run it and commit both")
        sys.exit(0)
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}")
