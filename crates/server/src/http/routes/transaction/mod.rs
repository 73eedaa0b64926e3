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
use serde_json::{json, Value};

use regina_state::command::{TxnCmd, TxnOp};
use regina_state::outcome::{AckResult, KvReason, PushResult, PushStatus, TxnOutcome, TxnResult};
use regina_state::{Command, Outcome};
use regina_types::limits::PUSH_ITEMS_MAX;
use regina_types::{validate_name, NameKind, QUEUE_MODE_GROUP};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::body_bytes;
use crate::http::json_out as j;
use crate::http::routes::ack::{judge, Judged};
use crate::http::routes::binary;
use crate::http::routes::kv::input::{parse_riders, Scope};
use crate::http::routes::kv::{no_lifetime, result_json, value_of};
use crate::http::routes::push::{all_checked, from_binary, to_item, traced_plain_item};
use regina_node::Replica;

mod body;

pub use body::plain_reader_agrees;
use body::OpBody;

pub async fn transaction(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    // The binary form: the JSON head without its pushes, then the pushes as
    // pre-framed groups. Its pushes come after the head's operations.
    let (head, binary_pushes) = if bytes.starts_with(binary::TXN_MAGIC) {
        let (head, items) = binary::parse_transaction(&bytes).map_err(ApiError::bad_body)?;
        let items = all_checked(items.into_iter().enumerate().map(|(i, b)| from_binary(i, b)))?;
        (head, items)
    } else {
        (&bytes[..], Vec::new())
    };
    let b = body::read(head)?;
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
    let kv = match parse_riders(b.kv, Scope::Transaction) {
        Ok(kv) => kv,
        Err(e) => return Ok(e.in_transaction()),
    };
    let sole_lease = match b.required_leases.as_slice() {
        [one] => Some(one.to_string()),
        _ => None,
    };
    let parsed = b.operations.read()?;
    let mut ops = match step_ops(&parsed, sole_lease)? {
        Ok(built) => built,
        Err(refusal) => return Ok(refusal),
    };
    ops.extend(binary_pushes.into_iter().map(TxnOp::Push));
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
    // What the answer names of each op, taken before the ops move into the
    // command (a clone of them, payloads and all, cost more).
    let labels: Vec<Label> = ops
        .iter()
        .map(|op| match op {
            TxnOp::Push(item) => Label::Push { queue: item.queue.clone(), transaction_id: item.transaction_id.clone() },
            TxnOp::Ack { item, .. } => Label::Ack { transaction_id: item.transaction_id.clone() },
        })
        .collect();
    let txn_id = regina_node::ids::new_id().to_string();
    let txn = TxnCmd { ops, kv: kv.clone(), timers: timer_ops.clone() };
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
            let step = StepParts { labels: &labels, kv: &kv, timers: &timer_ops, jobs: &jobs };
            Ok(j::answer(axum::http::StatusCode::OK, step.answer(&txn_id, &results)?))
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

/// The step's pushes and acks in request order; `Err` is the answer of an
/// ack naming no partition.
fn step_ops(parsed: &[OpBody], sole_lease: Option<String>) -> ApiResult<Result<Vec<TxnOp>, Response>> {
    let mut ops = Vec::new();
    for op in parsed {
        match op {
            OpBody::Push(items) => {
                for it in items {
                    ops.push(TxnOp::Push(to_item(ops.len(), it)?));
                }
            }
            OpBody::PlainPush(items) => {
                for it in items {
                    ops.push(TxnOp::Push(traced_plain_item(ops.len(), it)?));
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
            }
        }
    }
    Ok(Ok(ops))
}

/// What a committed push or ack's result names.
enum Label {
    Push { queue: String, transaction_id: String },
    Ack { transaction_id: String },
}

/// What a committed step's results are rendered against.
struct StepParts<'a> {
    /// One per push or ack, in request order.
    labels: &'a [Label],
    kv: &'a [regina_state::command::KvOp],
    timers: &'a [regina_state::timers::TimerOp],
    jobs: &'a [crate::http::routes::jobs::input::Parsed],
}

impl StepParts<'_> {
    /// The committed answer, written straight to bytes:
    /// `{"transactionId", "success": true, "results": [...]}` with one
    /// result per committed op (pushes and acks, then KV, timer and job
    /// riders, each with its flat `index`).
    fn answer(&self, txn_id: &str, results: &[TxnResult]) -> ApiResult<Vec<u8>> {
        let mut out = Vec::with_capacity(96 + results.len() * 256);
        out.extend_from_slice(b"{\"transactionId\":");
        j::string(&mut out, txn_id);
        out.extend_from_slice(b",\"success\":true,\"results\":[");
        for (i, r) in results.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            self.result(&mut out, i, r).map_err(|e| ApiError::internal(format!("rendering result {i}: {e}")))?;
        }
        out.extend_from_slice(b"]}");
        Ok(out)
    }

    fn result(&self, out: &mut Vec<u8>, i: usize, r: &TxnResult) -> serde_json::Result<()> {
        let (labels, kv, timer_ops, jobs) = (self.labels, self.kv, self.timers, self.jobs);
        match (r, labels.get(i), i.checked_sub(labels.len()).and_then(|k| kv.get(k))) {
            (TxnResult::Job(job), _, _) => {
                let op_index = i - labels.len() - kv.len() - timer_ops.len();
                let mut v = crate::http::routes::jobs::render::result(jobs[op_index].name, job);
                v["index"] = json!(i);
                v["opIndex"] = json!(op_index);
                v["type"] = json!("job");
                v["success"] = json!(true);
                serde_json::to_writer(out, &v)
            }
            (TxnResult::Timer(t), _, _) => {
                let op_index = i - labels.len() - kv.len();
                let mut v = crate::http::routes::timers::render(&timer_ops[op_index], t, None);
                v["index"] = json!(i);
                v["opIndex"] = json!(op_index);
                v["type"] = json!("timer");
                serde_json::to_writer(out, &v)
            }
            (TxnResult::Kv(k), _, Some(op)) => {
                serde_json::to_writer(out, &result_json(i - labels.len(), op, k).in_transaction(i))
            }
            (TxnResult::Push(p), Some(Label::Push { queue, transaction_id }), _) => {
                push_result(out, i, p, transaction_id, queue);
                Ok(())
            }
            (TxnResult::Ack(a), Some(Label::Ack { transaction_id }), _) => {
                ack_result(out, i, a, transaction_id);
                Ok(())
            }
            _ => {
                out.extend_from_slice(b"{\"index\":");
                j::number(out, i as u64);
                out.extend_from_slice(b",\"success\":false,\"error\":\"result does not match its operation\"}");
                Ok(())
            }
        }
    }
}

/// A committed push's result.
fn push_result(out: &mut Vec<u8>, i: usize, p: &PushResult, transaction_id: &str, queue: &str) {
    out.extend_from_slice(b"{\"index\":");
    j::number(out, i as u64);
    out.extend_from_slice(b",\"type\":\"push\",\"success\":true,\"transactionId\":");
    j::string(out, transaction_id);
    out.extend_from_slice(b",\"messageId\":");
    j::or_null(out, p.message_id.as_ref(), j::uuid);
    out.extend_from_slice(b",\"queueName\":");
    j::string(out, queue);
    out.extend_from_slice(b",\"partitionId\":");
    j::number_text(out, p.partition_id);
    out.extend_from_slice(b",\"offset\":");
    j::number(out, p.offset);
    out.extend_from_slice(b",\"duplicate\":");
    j::boolean(out, p.status == PushStatus::Duplicate);
    out.push(b'}');
}

/// A committed ack's result (`transactionId` is the acked message's).
fn ack_result(out: &mut Vec<u8>, i: usize, a: &AckResult, transaction_id: &str) {
    out.extend_from_slice(b"{\"index\":");
    j::number(out, i as u64);
    out.extend_from_slice(b",\"type\":\"ack\",\"success\":");
    j::boolean(out, a.success);
    out.extend_from_slice(b",\"transactionId\":");
    j::string(out, transaction_id);
    out.extend_from_slice(b",\"error\":");
    j::or_null(out, a.error.as_deref(), j::string);
    out.extend_from_slice(b",\"dlq\":");
    j::boolean(out, a.dlq);
    out.extend_from_slice(b",\"leaseReleased\":");
    j::boolean(out, a.lease_released);
    out.push(b'}');
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

#[cfg(test)]
mod tests {
    use regina_state::command::KvOp;
    use regina_state::outcome::KvResult;
    use serde_json::json;

    use super::*;

    fn push(txn: &str) -> Label {
        Label::Push { queue: "out".into(), transaction_id: txn.into() }
    }

    /// The committed answer, every field of every result, as the clients read it.
    #[test]
    fn a_committed_step_answers_every_result_in_full() {
        let labels = [push("t-new"), push("t-dup"), Label::Ack { transaction_id: "m\"1".into() }];
        let kv = [KvOp::Get { ns: "n".into(), key: "k".into() }];
        let row = regina_state::outcome::KvRowView {
            key: "k".into(),
            value: Some(br#"{"a":1}"#.to_vec()),
            version: 2,
            expires_ms: None,
            updated_ms: 1_000,
            created_ms: 500,
        };
        let results = [
            TxnResult::Push(PushResult {
                status: PushStatus::Queued,
                partition_id: 12,
                offset: 4,
                pos: 0,
                len: 2,
                message_id: Some([0xab; 16]),
            }),
            TxnResult::Push(PushResult {
                status: PushStatus::Duplicate,
                partition_id: 12,
                offset: 1,
                pos: 0,
                len: 2,
                message_id: None,
            }),
            TxnResult::Ack(AckResult {
                success: false,
                error: Some("lease \"x\" expired".into()),
                lease_released: true,
                dlq: false,
                noop: false,
            }),
            TxnResult::Kv(KvResult::Got(Some(row))),
        ];
        let step = StepParts { labels: &labels, kv: &kv, timers: &[], jobs: &[] };
        let answer: serde_json::Value = serde_json::from_slice(&step.answer("txn-1", &results).unwrap()).unwrap();
        let TxnResult::Kv(got) = &results[3] else { unreachable!() };
        let kv_result = serde_json::to_value(result_json(0, &kv[0], got).in_transaction(3)).unwrap();
        let id = uuid::Uuid::from_bytes([0xab; 16]).to_string();
        assert_eq!(
            answer,
            json!({
                "transactionId": "txn-1",
                "success": true,
                "results": [
                    { "index": 0, "type": "push", "success": true, "transactionId": "t-new", "messageId": id,
                      "queueName": "out", "partitionId": "12", "offset": 4, "duplicate": false },
                    { "index": 1, "type": "push", "success": true, "transactionId": "t-dup", "messageId": null,
                      "queueName": "out", "partitionId": "12", "offset": 1, "duplicate": true },
                    { "index": 2, "type": "ack", "success": false, "transactionId": "m\"1",
                      "error": "lease \"x\" expired", "dlq": false, "leaseReleased": true },
                    kv_result,
                ],
            })
        );
        assert_eq!(answer["results"][3]["value"], json!({ "a": 1 }), "{answer}");
        assert_eq!(answer["results"][3]["index"], json!(3), "{answer}");
    }
}
