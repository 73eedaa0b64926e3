//! Reading and writing a KV lifetime: `ttlSeconds`, `forever: true`,
//! `expiresAt`, `afterCreationMs` or `afterUpdateMs`, at most one per write,
//! and the same fields as a namespace's default `expiration` object.
//!
//! Relative lifetimes are passed on as amounts; the state machine turns
//! them into a deadline from the entry's time. Only an absolute `expiresAt`
//! is an instant here, and it is only parsed, never compared with a clock:
//! an instant already past is a write that expires at once.

use serde_json::{json, Value};

use regina_state::command::Lifetime;
use regina_types::limits::{KV_EXPIRES_AT_MS_MAX, KV_LIFETIME_MS_MAX, KV_TTL_SECONDS_MAX};
use regina_types::time::{format_iso, parse_iso};

use crate::http::error::KvError;
use crate::http::routes::kv::input::{Fields, Surface};

/// Every field that names a lifetime.
const LIFETIME_FIELDS: [&str; 5] = ["ttlSeconds", "forever", "expiresAt", "afterCreationMs", "afterUpdateMs"];

/// The one lifetime a write names, or `None` when it names none (it then
/// takes its namespace's default; the state refuses it without one).
pub fn lifetime(f: &Fields) -> Result<Option<Lifetime>, KvError> {
    let mut given: Vec<(&str, Lifetime)> = Vec::new();
    if let Some(t) = f.int("ttlSeconds", "kv_bad_ttl", false)? {
        if t <= 0 || t as u64 > KV_TTL_SECONDS_MAX {
            return Err(f.fail("kv_bad_ttl", format!("ttlSeconds must be from 1 to {KV_TTL_SECONDS_MAX}, not {t}")));
        }
        given.push(("ttlSeconds", Lifetime::Seconds(t as u64)));
    }
    if f.bool("forever", "kv_expiry_not_specified")? == Some(true) {
        given.push(("forever", Lifetime::Forever));
    }
    if let Some(raw) = f.raw("expiresAt") {
        given.push(("expiresAt", Lifetime::At(expires_at(f, raw)?)));
    }
    for (name, kind) in
        [("afterCreationMs", Lifetime::AfterCreation as fn(u64) -> Lifetime), ("afterUpdateMs", Lifetime::AfterUpdate)]
    {
        if let Some(ms) = f.int(name, "kv_bad_lifetime_ms", false)? {
            if ms <= 0 || ms as u64 > KV_LIFETIME_MS_MAX {
                let why = format!("{name} must be from 1 to {KV_LIFETIME_MS_MAX} (ms), not {ms}");
                return Err(f.fail("kv_bad_lifetime_ms", why));
            }
            given.push((name, kind(ms as u64)));
        }
    }
    match given.as_slice() {
        [] => Ok(None),
        [(_, l)] => Ok(Some(*l)),
        [(a, _), (b, _), ..] => Err(f.fail(
            "kv_expiry_conflict",
            format!("{a} and {b} both name a lifetime; a write names at most one of {}", LIFETIME_FIELDS.join(", ")),
        )),
    }
}

/// `expiresAt`: an ISO-8601 string or an integer of ms since the epoch,
/// after the epoch and no later than year 9999.
fn expires_at(f: &Fields, raw: &str) -> Result<u64, KvError> {
    let bad = |what: String| f.fail("kv_bad_expires_at", what);
    let ms = match serde_json::from_str::<Value>(raw) {
        Ok(Value::String(s)) => {
            parse_iso(&s).ok_or_else(|| bad(format!("expiresAt {s:?} is not an ISO-8601 instant")))? as i64
        }
        Ok(Value::Number(n)) => {
            n.as_i64().ok_or_else(|| bad(format!("expiresAt must be whole ms since the epoch, not {raw}")))?
        }
        _ => return Err(bad(format!("expiresAt must be an ISO-8601 string or ms since the epoch, not {raw}"))),
    };
    if ms <= 0 || ms as u64 > KV_EXPIRES_AT_MS_MAX {
        let last = format_iso(KV_EXPIRES_AT_MS_MAX);
        return Err(bad(format!("expiresAt must be after the epoch and no later than {last}, not {raw}")));
    }
    Ok(ms as u64)
}

/// A configure's `expiration`: `null` clears the default; an object names
/// exactly one relative lifetime or `forever: true`. An absolute
/// `expiresAt` is refused: as a default it would make every later write
/// expire at once after that instant. Every mistake answers
/// `kv_bad_expiration`.
pub fn expiration(f: &Fields, raw: &str) -> Result<Option<Lifetime>, KvError> {
    if raw == "null" {
        return Ok(None);
    }
    let at = format!("{}.expiration", f.at());
    let inner = Fields::parse(raw, at, Surface::Kv).map_err(as_bad_expiration)?;
    if let Some(other) = inner.names().find(|n| !LIFETIME_FIELDS.contains(n)) {
        return Err(inner.fail("kv_bad_expiration", format!("{other} is not a lifetime field")));
    }
    match lifetime(&inner).map_err(as_bad_expiration)? {
        None => Err(inner.fail("kv_bad_expiration", format!("name one of {}", LIFETIME_FIELDS.join(", ")))),
        Some(Lifetime::At(_)) => Err(inner.fail(
            "kv_bad_expiration",
            "a namespace default is relative (ttlSeconds, afterCreationMs, afterUpdateMs) or forever, not expiresAt",
        )),
        Some(l) => Ok(Some(l)),
    }
}

fn as_bad_expiration(e: KvError) -> KvError {
    KvError { reason: "kv_bad_expiration", ..e }
}

/// A lifetime as the wire names it, for the answer to a configure.
pub fn lifetime_json(l: &Lifetime) -> Value {
    match *l {
        Lifetime::Forever => json!({ "forever": true }),
        Lifetime::Seconds(s) => json!({ "ttlSeconds": s }),
        Lifetime::At(ms) => json!({ "expiresAt": format_iso(ms) }),
        Lifetime::AfterCreation(ms) => json!({ "afterCreationMs": ms }),
        Lifetime::AfterUpdate(ms) => json!({ "afterUpdateMs": ms }),
    }
}
