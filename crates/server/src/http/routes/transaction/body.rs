//! A step's JSON body (or the JSON head of its binary form), read by the
//! plain reader (`crate::http::plain_step`) in one pass when it has the
//! shape clients send, else by serde: the envelope with each operation and
//! KV rider kept raw, then each operation's type and body.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::json_body;
use crate::http::plain_push::PlainItem;
use crate::http::plain_step::{self, PlainOp, PlainStep};
use crate::http::routes::ack::AckBody;
use crate::http::routes::kv::input::{FieldList, Rider};
use crate::http::routes::push::{item_agrees, ItemBody};

/// What the route reads of a step's body.
pub(super) struct StepBody<'a> {
    pub operations: Operations<'a>,
    pub required_leases: Vec<Cow<'a, str>>,
    pub kv: Vec<Rider<'a>>,
    pub timers: Vec<Value>,
    /// Job riders (enqueue, complete, fail, release, retry, cancel); every
    /// one is required.
    pub jobs: Vec<Value>,
}

/// The operations, read whole by the plain reader or still raw from serde's
/// envelope. Raw ones are read when the route gets to them, so a step's
/// refusals keep their order (riders are judged before operations).
pub(super) enum Operations<'a> {
    Plain(Vec<PlainOp<'a>>),
    Raw(Vec<&'a RawValue>),
}

/// One operation.
pub(super) enum OpBody<'a> {
    Push(Vec<ItemBody<'a>>),
    PlainPush(Vec<PlainItem<'a>>),
    Ack(AckBody<'a>),
}

impl<'a> Operations<'a> {
    pub fn is_empty(&self) -> bool {
        match self {
            Operations::Plain(ops) => ops.is_empty(),
            Operations::Raw(ops) => ops.is_empty(),
        }
    }

    pub fn read(self) -> ApiResult<Vec<OpBody<'a>>> {
        match self {
            Operations::Plain(ops) => Ok(ops
                .into_iter()
                .map(|op| match op {
                    PlainOp::Push(items) => OpBody::PlainPush(items),
                    PlainOp::Ack(ack) => OpBody::Ack(ack.into()),
                })
                .collect()),
            Operations::Raw(ops) => ops.iter().enumerate().map(|(i, raw)| parse_op(i, raw)).collect(),
        }
    }
}

/// The body, by the plain reader if it reads it, else by serde.
pub(super) fn read(head: &[u8]) -> ApiResult<StepBody<'_>> {
    if let Some(body) = plain_step::step(head).and_then(from_plain) {
        return Ok(body);
    }
    let b: TxnBody = json_body(head, false)?;
    Ok(StepBody {
        operations: Operations::Raw(b.operations),
        required_leases: b.required_leases,
        kv: b.kv.iter().map(|r| Rider::Text(r.get())).collect(),
        timers: b.timers,
        jobs: b.jobs,
    })
}

/// A plain reading as the route uses it; `None` when a rider array does
/// not read as serde's `Value`s (a number out of range), and serde must
/// judge the body.
fn from_plain(s: PlainStep<'_>) -> Option<StepBody<'_>> {
    let values = |text: Option<&str>| text.map_or(Some(Vec::new()), |t| serde_json::from_str(t).ok());
    Some(StepBody {
        timers: values(s.timers)?,
        jobs: values(s.jobs)?,
        operations: Operations::Plain(s.operations),
        required_leases: s.required_leases.into_iter().map(Cow::Borrowed).collect(),
        kv: s.kv.into_iter().map(|fields| Rider::Read(FieldList::from_plain(fields))).collect(),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TxnBody<'a> {
    /// May be absent in a step of riders only.
    #[serde(borrow, default)]
    operations: Vec<&'a RawValue>,
    #[serde(borrow, default)]
    required_leases: Vec<Cow<'a, str>>,
    #[serde(default, borrow)]
    kv: Vec<&'a RawValue>,
    #[serde(default)]
    timers: Vec<Value>,
    #[serde(default)]
    jobs: Vec<Value>,
}

/// An operation's type; serde's tagged enums cannot keep payloads as
/// borrowed raw JSON, so the type is read first, then the body.
#[derive(Deserialize)]
struct OpType<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
}

#[derive(Deserialize)]
struct PushOp<'a> {
    #[serde(borrow)]
    items: Vec<ItemBody<'a>>,
}

fn parse_op<'a>(i: usize, raw: &'a RawValue) -> ApiResult<OpBody<'a>> {
    let bad = |e: serde_json::Error| ApiError::bad_body(format!("operations[{i}]: {e}"));
    let t: OpType = serde_json::from_str(raw.get()).map_err(bad)?;
    match t.kind {
        "push" => Ok(OpBody::Push(serde_json::from_str::<PushOp>(raw.get()).map_err(bad)?.items)),
        "ack" => Ok(OpBody::Ack(serde_json::from_str(raw.get()).map_err(bad)?)),
        other => Err(ApiError::bad_request(format!("operations[{i}]: type {other:?} is not push or ack"))
            .at_field(format!("operations[{i}].type"))),
    }
}

/// Whether a body the route reads by the plain reader reads the same by
/// serde: every operation, lease, rider and rider array (the `json_step`
/// fuzz target and a property test).
pub fn plain_reader_agrees(bytes: &[u8]) -> bool {
    let Some(plain) = plain_step::step(bytes).and_then(from_plain) else { return true };
    let Ok(full) = serde_json::from_slice::<TxnBody>(bytes) else { return false };
    let (Operations::Plain(ops), Ok(parsed)) = (plain.operations, Operations::Raw(full.operations).read()) else {
        return false;
    };
    let same_op = |p: &PlainOp, f: &OpBody| match (p, f) {
        (PlainOp::Push(p), OpBody::Push(f)) => p.len() == f.len() && f.iter().zip(p).all(|(f, p)| item_agrees(f, p)),
        (PlainOp::Ack(p), OpBody::Ack(f)) => AckBody::from(*p) == *f,
        _ => false,
    };
    ops.len() == parsed.len()
        && ops.iter().zip(&parsed).all(|(p, f)| same_op(p, f))
        && plain.required_leases == full.required_leases
        && plain.kv.len() == full.kv.len()
        && plain.kv.iter().zip(&full.kv).all(|(p, f)| match p {
            Rider::Read(list) => serde_json::from_str::<FieldList>(f.get()).ok().as_ref() == Some(list),
            Rider::Text(_) => false,
        })
        && plain.timers == full.timers
        && plain.jobs == full.jobs
}
