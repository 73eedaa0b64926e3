//! `POST /api/v1/locks`: acquire, renew, release and get, one result per
//! operation, each on a different lock. A held lock or a lost permit is a
//! verdict (200 with a false flag and the holders); 4xx is only for a bad
//! call. A call with a write is one log entry; a call of gets is answered
//! from the applied state.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use regina_state::command::{LockOp, LocksCmd};
use regina_state::locks::{permit_key, LOCK_NAMESPACE};
use regina_state::outcome::{LockHolder, LockResult};
use regina_state::{Command, Outcome};
use regina_types::limits::{
    KV_TTL_SECONDS_MAX, LOCK_LIMIT_DEFAULT, LOCK_LIMIT_MAX, LOCK_NAME_BYTES_MAX, LOCK_OPS_PER_CALL_MAX,
    LOCK_OWNER_BYTES_MAX, LOCK_SLOTS_PER_CALL_MAX,
};
use regina_types::time::format_iso;

use crate::http::error::KvError;
use crate::http::routes::kv::input::{operations, Fields, Surface};
use crate::http::routes::kv::kv_body;
use regina_node::Replica;

pub async fn locks(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> Result<Response, KvError> {
    let bytes = kv_body(body, Surface::Locks)?;
    let raw = operations(&bytes, Surface::Locks)?;
    if raw.len() > LOCK_OPS_PER_CALL_MAX {
        let detail = format!("{} operations; the limit is {LOCK_OPS_PER_CALL_MAX}", raw.len());
        return Err(KvError::locks("locks_too_many_ops", detail));
    }
    let mut ops: Vec<LockOp> = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let f = Fields::parse(r, format!("operations[{i}]"), Surface::Locks)?;
        let op = parse(&f)?;
        if ops.iter().any(|o| o.name() == op.name()) {
            return Err(f.fail("locks_duplicate_in_call", format!("lock {:?} is named twice in one call", op.name())));
        }
        ops.push(op);
    }
    let slots: usize =
        ops.iter().map(|o| if let LockOp::Acquire { limit, .. } = o { *limit as usize } else { 1 }).sum();
    if slots > LOCK_SLOTS_PER_CALL_MAX {
        let detail = format!("the call touches {slots} slots; the limit is {LOCK_SLOTS_PER_CALL_MAX}");
        return Err(KvError::locks("locks_too_many_keys", detail));
    }
    let results = if ops.iter().all(|o| matches!(o, LockOp::Get { .. })) {
        let names: Vec<&str> = ops.iter().map(LockOp::name).collect();
        node.tenant_state().locks_read(&names, node.stamp())
    } else {
        match node.propose(Command::Locks(LocksCmd { ops: ops.clone() })).await {
            Ok(Outcome::Locks(r)) => r,
            Ok(o) => {
                return Err(KvError::new(
                    crate::http::codes::LOCKS_ERROR,
                    "locks_error",
                    format!("locks answered {o:?}"),
                ))
            }
            Err(e) => return Err(KvError::unavailable(crate::http::codes::LOCKS_UNAVAILABLE, e)),
        }
    };
    let rendered: Vec<Value> = ops.iter().zip(&results).enumerate().map(|(i, (op, r))| render(i, op, r)).collect();
    Ok(axum::Json(json!({ "results": rendered })).into_response())
}

fn parse(f: &Fields) -> Result<LockOp, KvError> {
    f.no_tenant("locks_tenant_not_an_input")?;
    let kind = f.str("op", "locks_unknown_op")?.unwrap_or_default();
    let name = f.str("name", "locks_bad_name")?.unwrap_or_default();
    if name.is_empty() || name.len() > LOCK_NAME_BYTES_MAX || name.contains('#') || name.chars().any(char::is_control) {
        let why = format!("a lock name is 1 to {LOCK_NAME_BYTES_MAX} bytes with no control character and no '#'");
        return Err(f.fail("locks_bad_name", why));
    }
    let ttl = || -> Result<u64, KvError> {
        match f.int("ttlSeconds", "locks_bad_ttl", false)? {
            None => Err(f.fail("locks_ttl_required", "ttlSeconds is required")),
            Some(t) if t <= 0 || t as u64 > KV_TTL_SECONDS_MAX => {
                Err(f.fail("locks_bad_ttl", format!("ttlSeconds must be from 1 to {KV_TTL_SECONDS_MAX}, not {t}")))
            }
            Some(t) => Ok(t as u64),
        }
    };
    let owner = || -> Result<Option<String>, KvError> {
        let owner = f.str("owner", "locks_bad_owner")?.filter(|o| !o.is_empty());
        if owner.as_ref().is_some_and(|o| o.len() > LOCK_OWNER_BYTES_MAX) {
            return Err(f.fail("locks_bad_owner", format!("an owner is at most {LOCK_OWNER_BYTES_MAX} bytes")));
        }
        Ok(owner)
    };
    let token = || -> Result<u64, KvError> {
        match f.int("token", "locks_bad_token", false)? {
            None => Err(f.fail("locks_token_required", "token is required")),
            Some(t) if t <= 0 => Err(f.fail("locks_bad_token", "token must be above zero")),
            Some(t) => Ok(t as u64),
        }
    };
    let slot = || -> Result<u32, KvError> {
        match f.int("slot", "locks_bad_slot", false)? {
            None => Ok(0),
            Some(s) if (0..LOCK_LIMIT_MAX as i64).contains(&s) => Ok(s as u32),
            Some(s) => Err(f.fail("locks_bad_slot", format!("slot must be from 0 to {}, not {s}", LOCK_LIMIT_MAX - 1))),
        }
    };
    match kind.as_str() {
        "acquire" => {
            let limit = match f.int("limit", "locks_bad_limit", false)? {
                None => LOCK_LIMIT_DEFAULT,
                Some(l) if (1..=LOCK_LIMIT_MAX as i64).contains(&l) => l as u32,
                Some(l) => {
                    return Err(f.fail("locks_bad_limit", format!("limit must be from 1 to {LOCK_LIMIT_MAX}, not {l}")))
                }
            };
            Ok(LockOp::Acquire { ttl_seconds: ttl()?, owner: owner()?, limit, name })
        }
        "renew" => Ok(LockOp::Renew { token: token()?, ttl_seconds: ttl()?, slot: slot()?, owner: owner()?, name }),
        "release" => Ok(LockOp::Release { token: token()?, slot: slot()?, name }),
        "get" => Ok(LockOp::Get { name }),
        "" => Err(f.fail("locks_unknown_op", "op is required")),
        other => Err(f.fail("locks_unknown_op", format!("unknown op {other:?}"))),
    }
}

/// The KV check that holds while the permit is the caller's.
fn guard(name: &str, slot: u32, token: u64) -> Value {
    json!({ "op": "check", "ns": LOCK_NAMESPACE, "key": permit_key(name, slot), "expect": token, "required": true })
}

/// Who holds a permit; a refusal names slot and owner, a `get` everything.
fn holder(h: &LockHolder, full: bool) -> Value {
    if !full {
        return json!({ "slot": h.slot, "owner": h.owner });
    }
    json!({
        "slot": h.slot,
        "owner": h.owner,
        "token": h.token,
        "since": h.since_ms.map(format_iso),
        "expiresAt": h.expires_ms.map(format_iso),
        "renewedAt": format_iso(h.renewed_ms),
    })
}

fn render(index: usize, op: &LockOp, r: &LockResult) -> Value {
    let (kind, name) = match op {
        LockOp::Acquire { name, .. } => ("acquire", name),
        LockOp::Renew { name, .. } => ("renew", name),
        LockOp::Release { name, .. } => ("release", name),
        LockOp::Get { name } => ("get", name),
    };
    let holders = |hs: &[LockHolder], full| hs.iter().map(|h| holder(h, full)).collect::<Vec<_>>();
    let mut v = match r {
        LockResult::Acquired { slot, token, owner, already } => {
            let mut v = json!({ "acquired": true, "slot": slot, "token": token, "owner": owner, "guard": guard(name, *slot, *token) });
            if *already {
                v["already"] = json!(true);
            }
            v
        }
        LockResult::Held { holders: hs } => {
            json!({ "acquired": false, "reason": "held", "holders": holders(hs, false) })
        }
        LockResult::Renewed { slot, token } => {
            json!({ "renewed": true, "slot": slot, "token": token, "guard": guard(name, *slot, *token) })
        }
        LockResult::Released { slot } => json!({ "released": true, "slot": slot }),
        LockResult::Lost { slot, holders: hs } => {
            let flag = if kind == "renew" { "renewed" } else { "released" };
            json!({ flag: false, "reason": "lost", "slot": slot, "holders": holders(hs, false) })
        }
        LockResult::Holders(hs) => json!({ "held": !hs.is_empty(), "holders": holders(hs, true) }),
    };
    v["index"] = json!(index);
    v["op"] = json!(kind);
    v["name"] = json!(name);
    v
}
