//! `POST /api/v1/transaction` (JSON): acks, pushes and KV riders of one
//! step committed as one log entry. A judged bundle always answers 200:
//! `success: true` with a result per operation (pushed items and acks
//! first, then the `kv` array, one flat index space), or `success: false`
//! with the reason and nothing written.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::{to_raw_value, RawValue};
use serde_json::{json, Value};

use regina_state::command::{TxnCmd, TxnOp};
use regina_state::outcome::{KvReason, PushStatus, TxnOutcome, TxnResult};
use regina_state::{Command, Outcome};
use regina_types::limits::PUSH_ITEMS_MAX;
use regina_types::{validate_name, NameKind, QUEUE_MODE_GROUP};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{body_bytes, json_body};
use crate::http::render::uuid_string;
use crate::http::routes::ack::{judge, AckBody, Judged};
use crate::http::routes::binary;
use crate::http::routes::kv::input::{parse_ops, Scope};
use crate::http::routes::kv::{no_lifetime, result_json, value_of};
use crate::http::routes::push::{from_binary, to_item, ItemBody};
use regina_node::Replica;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TxnBody<'a> {
    /// May be absent in a step of riders only.
    #[serde(borrow, default)]
    operations: Vec<&'a RawValue>,
    #[serde(default)]
    required_leases: Vec<String>,
    #[serde(default, borrow)]
    kv: Vec<&'a RawValue>,
    #[serde(default)]
    timers: Vec<Value>,
    /// Job riders (enqueue, complete, fail, release, retry, cancel); every
    /// one is required.
    #[serde(default)]
    jobs: Vec<Value>,
}

/// One operation. Read in two steps (its `type`, then its body) because
/// serde's tagged enums cannot keep payloads as borrowed raw JSON.
enum OpBody<'a> {
    Push { items: Vec<ItemBody<'a>> },
    Ack(AckBody<'a>),
}

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
        "push" => Ok(OpBody::Push { items: serde_json::from_str::<PushOp>(raw.get()).map_err(bad)?.items }),
        "ack" => Ok(OpBody::Ack(serde_json::from_str(raw.get()).map_err(bad)?)),
        other => Err(ApiError::bad_request(format!("operations[{i}]: type {other:?} is not push or ack"))
            .at_field(format!("operations[{i}].type"))),
    }
}

pub async fn transaction(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    // The binary form: the JSON head without its pushes, then the pushes as
    // pre-framed groups. Its pushes come after the head's operations.
    let (head, binary_pushes) = if bytes.starts_with(binary::TXN_MAGIC) {
        let (head, items) = binary::parse_transaction(&bytes).map_err(ApiError::bad_body)?;
        let items = items.into_iter().enumerate().map(|(i, b)| from_binary(i, b)).collect::<ApiResult<Vec<_>>>()?;
        (head, items)
    } else {
        (&bytes[..], Vec::new())
    };
    let b: TxnBody = json_body(head, false)?;
    let timer_ops = match crate::http::routes::timers::parse_ops(&node, &b.timers) {
        Ok(t) => t,
        Err(r) => return Ok(r),
    };
    let jobs =
        match crate::http::routes::jobs::input::parse_ops(&b.jobs, crate::http::routes::jobs::input::Surface::Step)
            .and_then(|jobs| crate::http::routes::jobs::check_schemas(&node, &jobs).map(|()| jobs))
        {
            Ok(jobs) => jobs,
            Err(e) => return Ok(e.into_response()),
        };
    if b.operations.is_empty() && b.kv.is_empty() && timer_ops.is_empty() && binary_pushes.is_empty() && jobs.is_empty()
    {
        return Err(ApiError::bad_request("a transaction needs at least one operation").at_field("operations"));
    }
    let kv = match parse_ops(&b.kv, Scope::Transaction) {
        Ok(kv) => kv,
        Err(e) => return Ok(e.in_transaction()),
    };
    let sole_lease = match b.required_leases.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    let parsed = b.operations.iter().enumerate().map(|(i, raw)| parse_op(i, raw)).collect::<ApiResult<Vec<_>>>()?;
    let (mut ops, mut labels) = match step_ops(&parsed, sole_lease)? {
        Ok(built) => built,
        Err(refusal) => return Ok(refusal),
    };
    for item in binary_pushes {
        labels.push(item.queue.clone());
        ops.push(TxnOp::Push(item));
    }
    if ops.len() > PUSH_ITEMS_MAX {
        return Err(ApiError::too_large(format!("{} operations; the limit is {PUSH_ITEMS_MAX}", ops.len()))
            .at_field("operations"));
    }
    crate::http::routes::push::seal_items(
        &node,
        ops.iter_mut().filter_map(|op| match op {
            TxnOp::Push(item) => Some(item),
            TxnOp::Ack { .. } => None,
        }),
    );
    let txn_id = regina_node::ids::new_id().to_string();
    let txn = TxnCmd { ops: ops.clone(), kv: kv.clone(), timers: timer_ops.clone() };
    // A step without job riders keeps the older entry form.
    let command = match jobs.is_empty() {
        true => Command::Transaction(txn),
        false => Command::Step { txn, jobs: jobs.iter().map(|p| p.op.clone()).collect() },
    };
    let outcome = node.propose(command).await?;
    let Outcome::Txn(t) = outcome else {
        return Err(ApiError::internal(format!("transaction answered {outcome:?}")));
    };
    match t {
        TxnOutcome::Committed(results) => {
            let step = StepParts { ops: &ops, labels: &labels, kv: &kv, timers: &timer_ops, jobs: &jobs };
            let rendered = step.render(&results)?;
            Ok(axum::Json(Committed { transaction_id: &txn_id, success: true, results: rendered }).into_response())
        }
        refusal => Ok(refusal_answer(refusal, &txn_id, &kv)),
    }
}

/// The answer to a step the state machine refused: which op, and why.
fn refusal_answer(t: TxnOutcome, txn_id: &str, kv: &[regina_state::command::KvOp]) -> Response {
    match t {
        TxnOutcome::Refused { job: Some(refused_job), failed_index, .. } => {
            let mut v =
                crate::http::routes::jobs::render::refused(&refused_job, failed_index, "the transaction rolled back");
            v["transactionId"] = json!(txn_id);
            axum::Json(v).into_response()
        }
        TxnOutcome::Refused { kv: Some(lost), .. } if lost.reason == KvReason::NoLifetime => {
            no_lifetime(&format!("kv[{}]", lost.index), &kv[lost.index]).in_transaction()
        }
        TxnOutcome::Refused { reason, failed_index, error, kv: lost, job: None } => {
            let mut r = refused(failed_index, &reason, &error);
            if let Some(obj) = r.1.as_object_mut() {
                obj.insert("transactionId".into(), json!(txn_id));
                // What the client needs to tell its own lock renewal from a
                // lost lock: the row's current version and value.
                if let Some(lost) = lost {
                    obj.insert("kvReason".into(), json!(lost.reason.as_str()));
                    obj.insert("version".into(), json!(lost.current.as_ref().map_or(0, |c| c.version)));
                    obj.insert("value".into(), lost.current.as_ref().map_or(Value::Null, value_of));
                }
            }
            r.into_response()
        }
        TxnOutcome::Committed(_) => unreachable!("only refusals are answered here"),
    }
}

/// The step's pushes and acks in request order, each with the label its
/// result carries; `Err` is the answer of an ack naming no partition.
#[allow(clippy::type_complexity)] // the built ops, or the refusal to answer
fn step_ops(parsed: &[OpBody], sole_lease: Option<String>) -> ApiResult<Result<(Vec<TxnOp>, Vec<String>), Response>> {
    let mut ops = Vec::new();
    let mut labels = Vec::new();
    for op in parsed {
        match op {
            OpBody::Push { items } => {
                for it in items {
                    ops.push(TxnOp::Push(to_item(ops.len(), it)?));
                    labels.push(it.queue.to_string());
                }
            }
            OpBody::Ack(a) => {
                let group = match a.consumer_group.as_deref() {
                    None | Some("") => QUEUE_MODE_GROUP.to_string(),
                    Some(g) => {
                        validate_name(NameKind::ConsumerGroup, g).map_err(ApiError::from_name)?;
                        g.to_string()
                    }
                };
                let mut item = match judge(ops.len(), a)? {
                    Judged::Item(item) => item,
                    Judged::Refused => {
                        let why = "QTXN partitionId names no partition; the transaction rolled back";
                        return Ok(Err(refused(ops.len(), "rejected_ack", why).into_response()));
                    }
                };
                // A lease-less ack is fenced by the bundle's lease when it names exactly one.
                if item.lease_id.is_none() {
                    item.lease_id = sole_lease.clone();
                }
                ops.push(TxnOp::Ack { group, item });
                labels.push(a.transaction_id.to_string());
            }
        }
    }
    Ok(Ok((ops, labels)))
}

/// What a committed step's results are rendered against.
struct StepParts<'a> {
    ops: &'a [TxnOp],
    labels: &'a [String],
    kv: &'a [regina_state::command::KvOp],
    timers: &'a [regina_state::timers::TimerOp],
    jobs: &'a [crate::http::routes::jobs::input::Parsed],
}

impl StepParts<'_> {
    /// One rendered result per committed op: pushes and acks, then KV,
    /// timer and job riders, each with its flat `index`.
    fn render(&self, results: &[TxnResult]) -> ApiResult<Vec<Box<RawValue>>> {
        let (ops, kv, timer_ops, jobs, labels) = (self.ops, self.kv, self.timers, self.jobs, self.labels);
        let mut rendered = Vec::with_capacity(results.len());
        for (i, r) in results.iter().enumerate() {
            let item = match (r, ops.get(i), i.checked_sub(ops.len()).and_then(|k| kv.get(k))) {
                (TxnResult::Job(j), _, _) => {
                    let op_index = i - ops.len() - kv.len() - timer_ops.len();
                    let mut v = crate::http::routes::jobs::render::result(jobs[op_index].name, j);
                    v["index"] = json!(i);
                    v["opIndex"] = json!(op_index);
                    v["type"] = json!("job");
                    v["success"] = json!(true);
                    to_raw_value(&v)
                }
                (TxnResult::Timer(t), _, _) => {
                    let op_index = i - ops.len() - kv.len();
                    let mut v = crate::http::routes::timers::render(&timer_ops[op_index], t, None);
                    v["index"] = json!(i);
                    v["opIndex"] = json!(op_index);
                    v["type"] = json!("timer");
                    to_raw_value(&v)
                }
                (TxnResult::Kv(k), _, Some(op)) => {
                    let op_index = i - ops.len();
                    to_raw_value(&result_json(op_index, op, k).in_transaction(i))
                }
                (r, Some(op), _) => to_raw_value(&render(i, r, op, &labels[i])),
                _ => to_raw_value(
                    &json!({ "index": i, "success": false, "error": "result does not match its operation" }),
                ),
            };
            rendered.push(item.map_err(|e| ApiError::internal(format!("rendering result {i}: {e}")))?);
        }
        Ok(rendered)
    }
}

/// Rendered results keep each KV value's stored JSON text as it is.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Committed<'a> {
    transaction_id: &'a str,
    success: bool,
    results: Vec<Box<RawValue>>,
}

fn refused(failed_index: usize, reason: &str, error: &str) -> (axum::http::StatusCode, axum::Json<Value>) {
    (
        axum::http::StatusCode::OK,
        axum::Json(json!({
            "success": false,
            "ok": false,
            "reason": reason,
            "failedIndex": failed_index,
            "error": error,
            "results": [],
        })),
    )
}

fn render(i: usize, r: &TxnResult, op: &TxnOp, label: &str) -> Value {
    match (r, op) {
        (TxnResult::Push(p), TxnOp::Push(item)) => json!({
            "index": i,
            "type": "push",
            "success": true,
            "transactionId": item.transaction_id,
            "messageId": p.message_id.as_ref().map(uuid_string),
            "queueName": label,
            "partitionId": p.partition_id.to_string(),
            "offset": p.offset,
            "duplicate": p.status == PushStatus::Duplicate,
        }),
        (TxnResult::Ack(a), _) => json!({
            "index": i,
            "type": "ack",
            "success": a.success,
            "transactionId": label,
            "error": a.error,
            "dlq": a.dlq,
            "leaseReleased": a.lease_released,
        }),
        _ => json!({ "index": i, "success": false, "error": "result does not match its operation" }),
    }
}
