//! The pop routes: by queue, by queue and partition, and discovery by
//! namespace/task. A pop that claims is one log entry; a long poll that has
//! nothing to claim waits on the applied-entry signal without writing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};

use regina_state::command::{PopCmd, PopTarget, Subscription};
use regina_state::outcome::PopResult;
use regina_state::{Command, Outcome};
use regina_types::limits::{
    LEASE_SECONDS_MAX, POP_BATCH_DEFAULT, POP_BATCH_MAX, POP_PARTITIONS_MAX, POP_WAIT_MS_DEFAULT, POP_WAIT_MS_MAX,
};
use regina_types::time::parse_iso;
use regina_types::{validate_name, NameKind, QUEUE_MODE_GROUP};

use crate::http::error::{ApiError, ApiResult};
use crate::http::frames;
use crate::http::input::{query_bool, query_get, query_pairs, query_u64};
use crate::http::render::pop_json;
use regina_node::Replica;

/// How often a parked long poll re-checks even without a wake-up, so lease
/// expiries and delayed messages are noticed.
const RECHECK: Duration = Duration::from_millis(100);

pub async fn pop_queue(
    State(node): State<Arc<Replica>>,
    Path(queue): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    validate_name(NameKind::Queue, &queue).map_err(ApiError::from_name)?;
    run(node, PopTarget::Queue { queue, partition: None }, q).await
}

pub async fn pop_partition(
    State(node): State<Arc<Replica>>,
    Path((queue, partition)): Path<(String, String)>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    validate_name(NameKind::Queue, &queue).map_err(ApiError::from_name)?;
    validate_name(NameKind::Partition, &partition).map_err(ApiError::from_name)?;
    run(node, PopTarget::Queue { queue, partition: Some(partition) }, q).await
}

pub async fn pop_discovery(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let label = |key: &str, kind| -> ApiResult<Option<String>> {
        match query_get(&pairs, key) {
            None | Some("") => Ok(None),
            Some(v) => validate_name(kind, v).map(|_| Some(v.to_string())).map_err(ApiError::from_name),
        }
    };
    let namespace = label("namespace", NameKind::Namespace)?;
    let task = label("task", NameKind::Task)?;
    if namespace.is_none() && task.is_none() {
        return Err(ApiError::bad_request("a pop without a queue needs namespace or task"));
    }
    run(node, PopTarget::Discovery { namespace, task }, q).await
}

struct PopRequest {
    cmd: PopCmd,
    wait: bool,
    timeout: Duration,
    /// Answer a non-empty pop as `QPF1` frames.
    frames: bool,
}

fn parse(node: &Replica, target: PopTarget, raw: Option<&str>) -> ApiResult<PopRequest> {
    let pairs = query_pairs(raw)?;
    let group = match query_get(&pairs, "consumerGroup") {
        None | Some("") => QUEUE_MODE_GROUP.to_string(),
        Some(g) => {
            validate_name(NameKind::ConsumerGroup, g).map_err(ApiError::from_name)?;
            g.to_string()
        }
    };
    let autopilot = query_bool(&pairs, "autopilot")?.unwrap_or(false);
    let batch = query_u64(&pairs, "batch", 1, POP_BATCH_MAX as u64)?.map_or(POP_BATCH_DEFAULT, |b| b as u32);
    let partitions = query_u64(&pairs, "partitions", 1, u32::MAX as u64)?
        .map(|p| (p as u32).min(POP_PARTITIONS_MAX))
        // Under autopilot an unset width is the broker's choice: every ready lane.
        .unwrap_or(if autopilot { POP_PARTITIONS_MAX } else { 1 });
    let wait = query_bool(&pairs, "wait")?.unwrap_or(false);
    let timeout_ms = query_u64(&pairs, "timeout", 0, u64::MAX)?.unwrap_or(POP_WAIT_MS_DEFAULT).min(POP_WAIT_MS_MAX);
    let lease_ms = query_u64(&pairs, "leaseSeconds", 0, LEASE_SECONDS_MAX)?.filter(|s| *s > 0).map(|s| s * 1000);
    // `commitOnDelivery` is the current name, `autoAck` the older one the
    // clients still send: either commits at delivery.
    let auto_ack =
        query_bool(&pairs, "autoAck")?.unwrap_or(false) || query_bool(&pairs, "commitOnDelivery")?.unwrap_or(false);
    let conflation = query_bool(&pairs, "conflation")?.unwrap_or(false);
    if conflation && group == QUEUE_MODE_GROUP {
        return Err(ApiError::bad_request("conflation needs a consumerGroup").at_field("consumerGroup"));
    }
    if conflation && auto_ack {
        return Err(ApiError::bad_request("conflation cannot be combined with autoAck").at_field("conflation"));
    }
    let subscription = subscription(&pairs, group == QUEUE_MODE_GROUP, node.stamp())?;
    let cmd = PopCmd {
        target,
        group,
        batch,
        max_partitions: partitions,
        lease_id: String::new(),
        lease_ms,
        auto_ack,
        subscription,
        conflation,
    };
    let frames = query_bool(&pairs, "frames")?.unwrap_or(false);
    Ok(PopRequest { cmd, wait, timeout: Duration::from_millis(timeout_ms), frames })
}

/// How a group meeting a queue for the first time is seeded. Queue mode
/// always reads from the oldest kept message; a named group defaults to `new`.
fn subscription(pairs: &[(String, String)], queue_mode: bool, now: u64) -> ApiResult<Subscription> {
    if queue_mode {
        return Ok(Subscription::All);
    }
    if let Some(from) = query_get(pairs, "subscriptionFrom").filter(|s| !s.is_empty()) {
        if from.eq_ignore_ascii_case("now") {
            return Ok(Subscription::New);
        }
        let ms = parse_iso(from).ok_or_else(|| {
            ApiError::bad_request(format!("subscriptionFrom {from:?} is not `now` or an ISO-8601 time"))
                .at_field("subscriptionFrom")
        })?;
        return Ok(Subscription::From(ms.min(now)));
    }
    match query_get(pairs, "subscriptionMode").map(|m| m.to_ascii_lowercase()) {
        None => Ok(Subscription::New),
        Some(m) => match m.as_str() {
            "" | "all" | "from_beginning" | "earliest" => Ok(Subscription::All),
            "new" | "new-only" | "new_only" | "latest" => Ok(Subscription::New),
            other => Err(ApiError::bad_request(format!(
                "subscriptionMode {other:?} is not one of all, from_beginning, new, new-only"
            ))
            .at_field("subscriptionMode")),
        },
    }
}

/// Pops parked in a long poll on this node, all groups and tenants together.
static LONG_POLLS: AtomicUsize = AtomicUsize::new(0);

/// A parked long poll, counted while it lives.
struct Parked;

impl Parked {
    /// Counts one more, unless `max` already wait.
    fn enter(max: usize) -> ApiResult<Parked> {
        let before = LONG_POLLS.fetch_add(1, Ordering::AcqRel);
        if before >= max {
            LONG_POLLS.fetch_sub(1, Ordering::AcqRel);
            return Err(ApiError::overloaded(format!(
                "{before} pops already wait on this node (at most {max}); retry shortly or pop with wait=false"
            )));
        }
        Ok(Parked)
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        LONG_POLLS.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn run(node: Arc<Replica>, target: PopTarget, raw: Option<String>) -> ApiResult<Response> {
    let mut req = parse(&node, target, raw.as_deref())?;
    if let PopTarget::Queue { queue, .. } = &req.cmd.target {
        // A queue's maxWaitTimeSeconds caps how long a long poll may hold.
        let cap = node.tenant_state().queue(queue).map_or(0, |q| q.options.max_wait_time_seconds);
        if cap > 0 {
            req.timeout = req.timeout.min(Duration::from_secs(cap));
        }
    }
    let deadline = Instant::now() + req.timeout;
    let mut parked = None;
    loop {
        let notified = node.applied_signal().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let act = {
            let m = node.tenant_state();
            m.pop_would_act(&req.cmd.target, &req.cmd.group, node.stamp())
        };
        if act {
            req.cmd.lease_id = regina_node::ids::new_id().to_string();
            let outcome = node.propose(Command::Pop(req.cmd.clone())).await?;
            let Outcome::Pop(result) = outcome else {
                return Err(ApiError::internal(format!("pop answered {outcome:?}")));
            };
            if !result.claims.is_empty() {
                return respond(&node, &result, &req);
            }
        }
        let now = Instant::now();
        if !req.wait || now >= deadline {
            return respond(&node, &PopResult::default(), &req);
        }
        if parked.is_none() {
            parked = Some(Parked::enter(node.max_long_polls())?);
        }
        let nap = RECHECK.min(deadline - now);
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep(nap) => {}
            _ = node.stopped() => return respond(&node, &PopResult::default(), &req),
        }
    }
}

fn respond(node: &Replica, result: &PopResult, req: &PopRequest) -> ApiResult<Response> {
    let cmd = &req.cmd;
    if req.frames && !result.claims.is_empty() {
        let body = frames::encode(node, result, &cmd.group)?;
        return Ok(([(axum::http::header::CONTENT_TYPE, frames::CONTENT_TYPE)], body).into_response());
    }
    let hint = match &cmd.target {
        PopTarget::Queue { queue, .. } => queue.as_str(),
        PopTarget::Discovery { .. } => "",
    };
    let mut body = pop_json(node, result, &cmd.group, hint)?;
    if cmd.conflation {
        // The stored policy answers; an empty pop reads it from the state.
        let conflates = result.conflation.unwrap_or_else(|| stored_conflation(node, cmd));
        if conflates {
            body.conflation = Some(true);
        } else {
            body.conflation_conflict = Some(true);
        }
    }
    Ok(crate::http::json_out::answer(axum::http::StatusCode::OK, body.to_bytes()))
}

/// Whether the group of a pop is stored as conflating on its queue.
fn stored_conflation(node: &Replica, cmd: &PopCmd) -> bool {
    let PopTarget::Queue { queue, .. } = &cmd.target else { return true };
    let m = node.tenant_state();
    let Some(q) = m.queue(queue) else { return true };
    q.group_index.get(&cmd.group).is_none_or(|g| q.groups[*g as usize].conflate)
}
