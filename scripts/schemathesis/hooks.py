"""Schemathesis hooks for scripts/schemathesis.sh.

Long polls legitimately wait as long as they are told to (a pop with
`wait=true` and no `timeout` waits 30 s). So that no legitimate wait reaches
the per-request timeout, which is how the run catches a hang, every request
that asks to wait is bounded here to a short wait before it is sent. Nothing
else about the generated request changes.
"""
import schemathesis

WAIT_MS = 500
WAIT_KEYS = ("maxWaitMs", "waitMs")


def _last(v):
    """A repeated query parameter: the server reads its last value."""
    return v[-1] if isinstance(v, list) and v else v


def _truthy(v):
    v = _last(v)
    return v is True or v == 1 or (isinstance(v, str) and v.lower() in ("true", "1"))


def _bound_body(body):
    if isinstance(body, dict):
        for k in WAIT_KEYS:
            if isinstance(body.get(k), int) and not isinstance(body.get(k), bool) and body[k] > WAIT_MS:
                body[k] = WAIT_MS
        for v in body.values():
            _bound_body(v)
    elif isinstance(body, list):
        for v in body:
            _bound_body(v)


@schemathesis.hook
def before_call(context, case, kwargs):
    query = case.query
    if isinstance(query, dict) and _truthy(query.get("wait")):
        t = _last(query.get("timeout"))
        try:
            # Absent or empty: the route's default wait (30 s).
            ms = int(t) if t not in (None, "") else None
        except (TypeError, ValueError):
            ms = -1  # refused as bad input at once: no wait
        if ms is None or ms > WAIT_MS:
            query["timeout"] = WAIT_MS
    _bound_body(case.body)
