//! Reading KV operations: the same shapes on `POST /api/v1/kv`, the path
//! routes and a transaction's `kv` array. Every field is checked here, so
//! the state machine only ever sees operations it can apply; each refusal
//! names a stable reason (`kv_bad_namespace`, `kv_bad_ttl`, ...).

use std::borrow::Cow;
use std::collections::HashMap;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

use serde_json::value::RawValue;

use regina_state::command::KvOp;
use regina_types::limits::{
    KV_KEYS_PER_CALL_MAX, KV_KEYS_PER_TXN_MAX, KV_KEY_BYTES_MAX, KV_NAMESPACE_BYTES_MAX, KV_OPS_PER_CALL_MAX,
    KV_OPS_PER_TXN_MAX, KV_PREFIX_LIMIT_DEFAULT, KV_PREFIX_LIMIT_MAX, KV_SCAN_LIMIT_DEFAULT, KV_SCAN_LIMIT_MAX,
    KV_VALUE_BYTES_MAX,
};

use crate::http::error::KvError;
use crate::http::routes::kv::lifetime::{expiration, lifetime};

/// Where the operations came from; a transaction has tighter limits and
/// takes no `getPrefix`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Call,
    Transaction,
}

/// Which route family's error codes a refusal carries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Kv,
    Locks,
}

impl Surface {
    pub fn bad(self, reason: &'static str, detail: String) -> KvError {
        match self {
            Surface::Kv => KvError::bad(reason, detail),
            Surface::Locks => KvError::locks(reason, detail),
        }
    }

    pub fn bad_body(self) -> &'static str {
        match self {
            Surface::Kv => "kv_bad_body",
            Surface::Locks => "locks_bad_body",
        }
    }
}

/// One JSON object's fields, read one by one so each mistake gets its own
/// reason. `null` reads as absent, except where a value is the point.
/// An operation has a handful of fields, so they are kept as written (names
/// borrowed from the body unless escaped) and found by a scan: a hash map
/// of owned names cost more to build than every lookup in it.
pub struct Fields<'a> {
    list: FieldList<'a>,
    at: String,
    surface: Surface,
}

/// An object's fields in the order written, each value as its JSON text;
/// of a repeated name, the last counts (as a map built from them would keep
/// it).
#[derive(Debug, PartialEq, Eq)]
pub struct FieldList<'a>(Vec<(Cow<'a, str>, &'a str)>);

impl<'a> FieldList<'a> {
    fn get(&self, name: &str) -> Option<&'a str> {
        self.0.iter().rev().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// Fields the plain reader read (`crate::http::plain_step`): names
    /// without escapes, values checked JSON.
    pub fn from_plain(fields: Vec<(&'a str, &'a str)>) -> Self {
        FieldList(fields.into_iter().map(|(name, value)| (Cow::Borrowed(name), value)).collect())
    }
}

impl<'de> Deserialize<'de> for FieldList<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = FieldList<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<FieldList<'de>, M::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Name(name)) = map.next_key()? {
                    let value: &'de RawValue = map.next_value()?;
                    fields.push((name, value.get()));
                }
                Ok(FieldList(fields))
            }
        }
        d.deserialize_map(Object)
    }
}

/// A field's name, borrowed from the body where it has no escape.
#[derive(serde::Deserialize)]
#[serde(transparent)]
struct Name<'a>(#[serde(borrow)] Cow<'a, str>);

impl<'a> Fields<'a> {
    /// The fields of an object given as its JSON text.
    pub fn parse(text: &'a str, at: String, surface: Surface) -> Result<Self, KvError> {
        match serde_json::from_str(text) {
            Ok(list) => Ok(Fields { list, at, surface }),
            Err(_) => Err(surface.bad(surface.bad_body(), format!("{at}: must be a JSON object"))),
        }
    }

    /// Fields of a path route's body, which names no operation itself.
    pub fn from_map(map: HashMap<String, &'a RawValue>, at: String) -> Self {
        let list = FieldList(map.into_iter().map(|(name, value)| (Cow::Owned(name), value.get())).collect());
        Fields { list, at, surface: Surface::Kv }
    }

    /// Where in the request these fields are, for error details.
    pub fn at(&self) -> &str {
        &self.at
    }

    /// The names of the fields given, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.0.iter().map(|(name, _)| name.as_ref())
    }

    pub fn fail(&self, reason: &'static str, what: impl std::fmt::Display) -> KvError {
        self.surface.bad(reason, format!("{}: {what}", self.at))
    }

    /// The field as written, `null` included.
    pub fn present(&self, name: &str) -> Option<&'a str> {
        self.list.get(name)
    }

    pub fn raw(&self, name: &str) -> Option<&'a str> {
        self.present(name).filter(|r| *r != "null")
    }

    pub fn str(&self, name: &str, reason: &'static str) -> Result<Option<String>, KvError> {
        self.raw(name)
            .map(|r| serde_json::from_str(r).map_err(|_| self.fail(reason, format!("{name} must be a string"))))
            .transpose()
    }

    pub fn bool(&self, name: &str, reason: &'static str) -> Result<Option<bool>, KvError> {
        self.raw(name)
            .map(|r| serde_json::from_str(r).map_err(|_| self.fail(reason, format!("{name} must be true or false"))))
            .transpose()
    }

    /// A JSON integer; `integral_floats` also takes `5.0`.
    pub fn int(&self, name: &str, reason: &'static str, integral_floats: bool) -> Result<Option<i64>, KvError> {
        let Some(r) = self.raw(name) else { return Ok(None) };
        let n: Option<serde_json::Number> = serde_json::from_str(r).ok();
        let v = n.and_then(|n| {
            n.as_i64().or_else(|| {
                n.as_f64().filter(|f| integral_floats && f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64)
            })
        });
        v.map(Some).ok_or_else(|| self.fail(reason, format!("{name} must be an integer, not {r}")))
    }

    /// Refuses tenant fields: the tenant is never an input.
    pub fn no_tenant(&self, reason: &'static str) -> Result<(), KvError> {
        match ["tenant", "tenantId", "_tenant"].iter().find(|f| self.list.get(f).is_some()) {
            Some(f) => Err(self.fail(reason, format!("{f} is not an input"))),
            None => Ok(()),
        }
    }
}

/// The operations of a call: `{"operations": [...]}` or a bare array.
pub fn operations(bytes: &[u8], surface: Surface) -> Result<Vec<&str>, KvError> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        operations: Vec<&'a RawValue>,
    }
    let bad = |detail: String| surface.bad(surface.bad_body(), detail);
    let text = std::str::from_utf8(bytes).map_err(|_| bad("the body is not UTF-8".into()))?;
    let parsed = if text.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<&RawValue>>(text)
    } else {
        serde_json::from_str::<Envelope>(text).map(|e| e.operations)
    };
    parsed
        .map(|ops| ops.iter().map(|r| r.get()).collect())
        .map_err(|e| bad(format!("the body must be {{\"operations\": [...]}}: {e}")))
}

pub fn validate_ns(f: &Fields, ns: &str) -> Result<(), KvError> {
    let b = ns.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= KV_NAMESPACE_BYTES_MAX
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(f.fail("kv_bad_namespace", format!("namespace {ns:?} must match ^[a-z0-9][a-z0-9._-]{{0,63}}$")))
    }
}

pub fn validate_key(f: &Fields, key: &str) -> Result<(), KvError> {
    if key.is_empty() || key.contains('\0') {
        return Err(f.fail("kv_bad_key", "a key is 1 byte at least and holds no NUL"));
    }
    if key.len() > KV_KEY_BYTES_MAX {
        let detail = format!("{}: a key of {} bytes; the limit is {KV_KEY_BYTES_MAX}", f.at, key.len());
        return Err(KvError::too_large("kv_key_too_large", detail));
    }
    Ok(())
}

/// JSON text without the whitespace between tokens. The text was already
/// parsed, so strings are well formed and escapes are balanced.
pub fn compact(json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &c in json.as_bytes() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = c == b'"';
            out.push(c);
        }
    }
    out
}

/// Reads every operation of a call and checks the call's limits. Each
/// operation is given as its JSON text.
pub fn parse_ops(raw: &[&str], scope: Scope) -> Result<Vec<KvOp>, KvError> {
    parse_riders(raw.iter().map(|text| Rider::Text(text)).collect(), scope)
}

/// A KV operation as given: its JSON text, or its fields as the plain
/// reader read them.
pub enum Rider<'a> {
    Text(&'a str),
    Read(FieldList<'a>),
}

/// [`parse_ops`] of operations given either way.
pub fn parse_riders(riders: Vec<Rider<'_>>, scope: Scope) -> Result<Vec<KvOp>, KvError> {
    let (ops_max, keys_max, field) = match scope {
        Scope::Call => (KV_OPS_PER_CALL_MAX, KV_KEYS_PER_CALL_MAX, "operations"),
        Scope::Transaction => (KV_OPS_PER_TXN_MAX, KV_KEYS_PER_TXN_MAX, "kv"),
    };
    if riders.len() > ops_max {
        return Err(KvError::bad("kv_too_many_ops", format!("{} operations; the limit is {ops_max}", riders.len())));
    }
    let mut ops = Vec::with_capacity(riders.len());
    for (i, rider) in riders.into_iter().enumerate() {
        let at = format!("{field}[{i}]");
        let f = match rider {
            Rider::Text(text) => Fields::parse(text, at, Surface::Kv)?,
            Rider::Read(list) => Fields { list, at, surface: Surface::Kv },
        };
        ops.push(parse_op(&f, scope)?);
    }
    let keys: usize = ops.iter().map(keys_named).sum();
    if keys > keys_max {
        return Err(KvError::bad("kv_too_many_keys", format!("the call names {keys} keys; the limit is {keys_max}")));
    }
    Ok(ops)
}

fn keys_named(op: &KvOp) -> usize {
    match op {
        KvOp::GetMany { keys, .. } => keys.len(),
        KvOp::GetPrefix { limit, .. } | KvOp::Scan { limit, .. } => *limit as usize,
        _ => 1,
    }
}

/// One operation from its fields.
pub fn parse_op(f: &Fields, scope: Scope) -> Result<KvOp, KvError> {
    f.no_tenant("kv_tenant_not_an_input")?;
    let kind = f.str("op", "kv_unknown_op")?.unwrap_or_default();
    let ns = f.str("ns", "kv_bad_namespace")?.unwrap_or_default();
    validate_ns(f, &ns)?;
    let required = f.bool("required", "kv_bad_request")?.unwrap_or(false);
    match kind.as_str() {
        "get" | "getMany" | "getPrefix" | "scan" => parse_read(f, &kind, ns, scope),
        "configure" | "put" | "putIfAbsent" | "touch" | "delete" | "check" | "incr" => {
            parse_write(f, &kind, ns, required)
        }
        "" => Err(f.fail("kv_unknown_op", "op is required")),
        other => Err(f.fail("kv_unknown_op", format!("unknown op {other:?}"))),
    }
}

/// The op's `key`, checked.
fn key_of(f: &Fields) -> Result<String, KvError> {
    let k = f.str("key", "kv_bad_key")?.unwrap_or_default();
    validate_key(f, &k)?;
    Ok(k)
}

/// A read: get, getMany, getPrefix or scan (the last two not in a step).
fn parse_read(f: &Fields, kind: &str, ns: String, scope: Scope) -> Result<KvOp, KvError> {
    let key = || key_of(f);
    match kind {
        "get" => Ok(KvOp::Get { ns, key: key()? }),
        "getMany" => {
            let keys: Vec<String> = f
                .raw("keys")
                .and_then(|r| serde_json::from_str(r).ok())
                .ok_or_else(|| f.fail("kv_bad_request", "getMany needs keys, an array of strings"))?;
            for k in &keys {
                validate_key(f, k)?;
            }
            Ok(KvOp::GetMany { ns, keys })
        }
        "getPrefix" => {
            if scope == Scope::Transaction {
                return Err(f.fail(
                    "kv_get_prefix_not_allowed_in_transaction",
                    "getPrefix is not allowed inside a transaction",
                ));
            }
            let prefix = f.str("prefix", "kv_prefix_required")?.unwrap_or_default();
            if prefix.is_empty() {
                return Err(f.fail("kv_prefix_required", "getPrefix needs a non-empty prefix"));
            }
            let limit = f.int("limit", "kv_bad_request", true)?.map_or(KV_PREFIX_LIMIT_DEFAULT as i64, |l| l);
            Ok(KvOp::GetPrefix {
                ns,
                prefix,
                after: f.str("after", "kv_bad_request")?,
                limit: limit.clamp(1, KV_PREFIX_LIMIT_MAX as i64) as u32,
                keys_only: f.bool("keysOnly", "kv_bad_request")?.unwrap_or(false),
            })
        }
        "scan" => {
            if scope == Scope::Transaction {
                return Err(f.fail("kv_scan_not_allowed_in_transaction", "scan is not allowed inside a transaction"));
            }
            let limit = f.int("limit", "kv_bad_limit", true)?.unwrap_or(KV_SCAN_LIMIT_DEFAULT as i64);
            if limit < 1 || limit > KV_SCAN_LIMIT_MAX as i64 {
                return Err(f.fail("kv_bad_limit", format!("limit must be from 1 to {KV_SCAN_LIMIT_MAX}, not {limit}")));
            }
            Ok(KvOp::Scan {
                ns,
                after: f.str("after", "kv_bad_request")?,
                limit: limit as u32,
                keys_only: f.bool("keysOnly", "kv_bad_request")?.unwrap_or(false),
            })
        }
        other => unreachable!("{other} is not a read"),
    }
}

/// A write or a check: configure, put, putIfAbsent, touch, delete, check, incr.
fn parse_write(f: &Fields, kind: &str, ns: String, required: bool) -> Result<KvOp, KvError> {
    let key = || key_of(f);
    match kind {
        "configure" => {
            let raw = f.present("expiration").ok_or_else(|| {
                f.fail("kv_bad_expiration", "configure needs expiration: an object naming one lifetime, or null")
            })?;
            Ok(KvOp::Configure { ns, expiration: expiration(f, raw)? })
        }
        "put" | "putIfAbsent" => {
            let lifetime = lifetime(f)?;
            let mut expect = expect(f)?;
            if kind == "putIfAbsent" {
                if expect.is_some_and(|e| e != 0) {
                    return Err(f.fail("kv_bad_expect", "putIfAbsent is expect 0 and takes no other"));
                }
                expect = Some(0);
            }
            let raw = f.present("value").ok_or_else(|| f.fail("kv_bad_request", "a put needs a value"))?;
            let value = compact(raw);
            if value.len() > KV_VALUE_BYTES_MAX {
                let detail = format!("{}: a value of {} bytes; the limit is {KV_VALUE_BYTES_MAX}", f.at, value.len());
                return Err(KvError::too_large("kv_value_too_large", detail));
            }
            Ok(KvOp::PutWith { ns, key: key()?, value, lifetime, expect, required })
        }
        "touch" => {
            let lifetime = lifetime(f)?;
            let expect = match expect(f)? {
                Some(0) => return Err(f.fail("kv_bad_expect", "a touch needs a live row; expect 0 never holds")),
                e => e,
            };
            Ok(KvOp::Touch { ns, key: key()?, lifetime, expect, required })
        }
        "delete" => Ok(KvOp::Delete { expect: expect(f)?, ns, key: key()?, required }),
        "check" => {
            let expect = expect(f)?.ok_or_else(|| f.fail("kv_bad_expect", "a check needs expect"))?;
            Ok(KvOp::Check { ns, key: key()?, expect, required })
        }
        "incr" => {
            let lifetime = lifetime(f)?;
            if f.raw("expect").is_some() {
                return Err(f.fail("kv_bad_request", "incr takes no expect"));
            }
            let delta = f
                .int("delta", "kv_bad_request", true)?
                .ok_or_else(|| f.fail("kv_bad_request", "incr needs a numeric delta"))?;
            let min = f.int("min", "kv_bad_request", true)?;
            let max = f.int("max", "kv_bad_request", true)?;
            Ok(KvOp::IncrWith { ns, key: key()?, delta, min, max, lifetime, required })
        }
        other => unreachable!("{other} is not a write"),
    }
}

fn expect(f: &Fields) -> Result<Option<u64>, KvError> {
    match f.int("expect", "kv_bad_expect", false)? {
        Some(e) if e < 0 => Err(f.fail("kv_bad_expect", "expect must be 0 or more")),
        e => Ok(e.map(|e| e as u64)),
    }
}

#[cfg(test)]
mod field_tests {
    use serde_json::value::RawValue;

    use super::{Fields, Surface};

    fn fields(text: &str) -> Option<Vec<(String, String)>> {
        let raw: &RawValue = serde_json::from_str(text).unwrap();
        let f = Fields::parse(raw.get(), "kv[0]".into(), Surface::Kv).ok()?;
        let mut names: Vec<String> = f.names().map(str::to_string).collect();
        names.dedup();
        Some(names.iter().map(|n| (n.clone(), f.present(n).map_or("-".into(), |v| v.to_string()))).collect())
    }

    #[test]
    fn fields_are_read_as_a_map_would_keep_them() {
        assert_eq!(
            fields(r#"{"op":"put","key":"k"}"#).unwrap(),
            [("op".into(), r#""put""#.into()), ("key".into(), r#""k""#.into())]
        );
        // An escaped name is the name it spells.
        assert_eq!(fields(r#"{"k\u0065y":1}"#).unwrap(), [("key".into(), "1".into())]);
        // Of a repeated name, the last counts.
        assert_eq!(fields(r#"{"key":1,"key":2}"#).unwrap(), [("key".into(), "2".into())]);
        assert_eq!(fields(r#"{"value":null}"#).unwrap(), [("value".into(), "null".into())]);
        for not_object in ["[]", "1", r#""op""#, "null"] {
            assert_eq!(fields(not_object), None, "{not_object}");
        }
    }
}
