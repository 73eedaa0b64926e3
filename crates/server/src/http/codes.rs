//! Every code a refusal can carry, with its status: the one table.
//!
//! Error answers name one of these (`ApiError`, `KvError`, the jobs and
//! ephemeral envelopes, the doors' own refusals); a test checks the table
//! against the error table of `docs/limits.md`, both ways, and another that
//! no source file of this crate spells a code outside it. Codes that are
//! verdicts inside a 200 answer (a job's `LEASE_LOST`, a timer's
//! `TIMER_NOT_FAILED`) belong to their routes, not here.

use axum::http::StatusCode;

/// A stable error code, the status it answers with, and when.
#[derive(Debug, PartialEq, Eq)]
pub struct Code {
    pub name: &'static str,
    pub status: StatusCode,
    pub when: &'static str,
}

macro_rules! codes {
    ($($id:ident = $status:ident $name:literal $when:literal;)*) => {
        $(pub const $id: &Code = &Code { name: $name, status: StatusCode::$status, when: $when };)*
        /// Every code, in the order `docs/limits.md` lists them.
        pub const ALL: &[&Code] = &[$($id),*];
    };
}

codes! {
    BAD_BODY = BAD_REQUEST "bad_body" "the body is not valid JSON or has the wrong shape";
    BAD_REQUEST = BAD_REQUEST "bad_request" "a field or parameter is missing, mistyped or out of range";
    KV_BAD_REQUEST = BAD_REQUEST "kv_bad_request" "a KV operation is malformed (KV envelope; `reason` says which rule)";
    LOCKS_BAD_REQUEST = BAD_REQUEST "locks_bad_request" "a lock or semaphore operation is malformed (KV envelope)";
    TIMERS_BAD_REQUEST = BAD_REQUEST "timers_bad_request" "a timer operation is malformed (KV envelope; `reason`)";
    INVALID_ARGUMENT = BAD_REQUEST "INVALID_ARGUMENT" "a jobs call is malformed; `index` and `field` name the operation and field";
    JOB_PAYLOAD_TOO_LARGE = BAD_REQUEST "PAYLOAD_TOO_LARGE" "a jobs call's body or a job's payload is over its limit";
    LEASE_TOO_LONG = BAD_REQUEST "LEASE_TOO_LONG" "a claim or renew asks for a lease above the queue's `lease.maxMs`";
    EPHEMERAL_BAD_REQUEST = BAD_REQUEST "ephemeral_bad_request" "an ephemeral queue call is malformed";
    UNAUTHORIZED = UNAUTHORIZED "unauthorized" "with tokens on: no token, or a bad one; `error` is the clients' message (`Authentication required`, `Token has expired`, `Invalid token signature`, ...), with `WWW-Authenticate: Bearer`";
    CLUSTER_TOKEN_REQUIRED = UNAUTHORIZED "cluster_token_required" "on the Raft address: no cluster token, or the wrong one";
    TIMER_HORIZON_EXCEEDED = FORBIDDEN "timer_horizon_exceeded" "a timer would fire beyond the horizon (`TIMER_HORIZON_MS`; timers envelope)";
    FORBIDDEN = FORBIDDEN "forbidden" "`Insufficient permissions`: the token's roles do not open the route's class, or its tenants do not include the one the header names";
    NO_SUCH_ROUTE = NOT_FOUND "no_such_route" "unknown path (the answer also carries `path`); every `/internal/...` path on the client port";
    NOT_FOUND = NOT_FOUND "not_found" "the message, dead-letter row or partition the path names does not exist";
    QUEUE_NOT_FOUND = NOT_FOUND "queue_not_found" "the queue the path names does not exist";
    GROUP_NOT_FOUND = NOT_FOUND "group_not_found" "the consumer group the path names does not exist";
    MESSAGE_NOT_FOUND = NOT_FOUND "message_not_found" "the message the path names does not exist";
    NO_SUCH_GROUP = NOT_FOUND "no_such_group" "the Raft group the path or `x-regina-group` names does not exist";
    NO_SUCH_QUERY = NOT_FOUND "no_such_query" "the stream query id is unknown";
    NOT_SOURCE_PARTITION = BAD_REQUEST "not_source_partition" "a stream cycle names a partition its query does not read";
    TOO_MANY_STATE_ROWS = PAYLOAD_TOO_LARGE "too_many_state_rows" "a stream cycle would write more state rows than allowed";
    EPHEMERAL_QUEUE_NOT_FOUND = NOT_FOUND "ephemeral_queue_not_found" "the ephemeral queue does not exist";
    METHOD_NOT_ALLOWED = METHOD_NOT_ALLOWED "method_not_allowed" "known path, wrong method";
    MEMBERSHIP_REFUSED = CONFLICT "membership_refused" "openraft refused the membership change (the answer says why)";
    PLACEMENT_DIFFERS = CONFLICT "placement_differs" "a forwarded request was placed in another Raft group than this node places it: nodes run with different `--raft-groups` or `--tenant-groups`";
    UNREADABLE_BODY = CONFLICT "unreadable_body" "a dead-letter retry names a message whose stored body is damaged (it fails its checksum); the row stays";
    CONFIG_HASH_MISMATCH = CONFLICT "config_hash_mismatch" "a stream query is registered again under its name with another definition";
    TOO_LARGE = PAYLOAD_TOO_LARGE "too_large" "a body, payload, batch or list is over a limit above";
    NAME_TOO_LONG = PAYLOAD_TOO_LARGE "name_too_long" "a name is over its limit above";
    PAYLOAD_TOO_LARGE = PAYLOAD_TOO_LARGE "payload_too_large" "a KV value or key is over its limit (KV envelope)";
    UNSUPPORTED_ENCODING = UNSUPPORTED_MEDIA_TYPE "unsupported_encoding" "the body has a `Content-Encoding` the node does not decode";
    RATE_LIMITED = TOO_MANY_REQUESTS "rate_limited" "the caller is over its request rate (`Retry-After`)";
    OVERLOADED = TOO_MANY_REQUESTS "overloaded" "the node refuses more waiting writes or long polls (`Retry-After: 1`); nothing was written";
    QUEUE_FULL = TOO_MANY_REQUESTS "queue_full" "an ephemeral queue holds its most messages";
    INTERNAL = INTERNAL_SERVER_ERROR "internal" "a bug: an answer of an unexpected kind, a sealed payload that does not open with the node's key";
    UNCLASSIFIED_ROUTE = INTERNAL_SERVER_ERROR "unclassified_route" "a route has no role class (a bug: every route has one)";
    KV_ERROR = INTERNAL_SERVER_ERROR "kv_error" "the KV route got an answer of another kind from the state (a bug)";
    LOCKS_ERROR = INTERNAL_SERVER_ERROR "locks_error" "the locks route got an answer of another kind from the state (a bug)";
    NO_LEADER = SERVICE_UNAVAILABLE "no_leader" "the Raft group has no leader yet (retry; `Retry-After: 1`)";
    NO_QUORUM = SERVICE_UNAVAILABLE "no_quorum" "the leader cannot reach a majority; nothing was committed";
    STORAGE_FAILED = SERVICE_UNAVAILABLE "storage_failed" "an fsync or write failed (the log refuses writes and says why), or a body read failed for a reason other than a missing or short file";
    BACKUP_FAILED = SERVICE_UNAVAILABLE "backup_failed" "a backup's snapshot could not be built or read (the answer says why; retry)";
    OUTCOME_UNKNOWN = SERVICE_UNAVAILABLE "outcome_unknown" "the write may or may not have been applied";
    KV_UNAVAILABLE = SERVICE_UNAVAILABLE "kv_unavailable" "a KV write was not, or may not have been, applied (KV envelope; `reason` is the code above it stands for, and its status: 429, 503 or 507)";
    LOCKS_UNAVAILABLE = SERVICE_UNAVAILABLE "locks_unavailable" "the same for the locks route";
    EPHEMERAL_UNAVAILABLE = SERVICE_UNAVAILABLE "ephemeral_unavailable" "the ephemeral store cannot take the call now";
    STORAGE_FULL = INSUFFICIENT_STORAGE "storage_full" "the disk is past its high watermark (`--disk-high-pct`), or a write found no space (ENOSPC) and waits to be retried, and the write would grow storage; nothing was written. Writes resume, without a restart, once use is under `--disk-low-pct` and the waiting write went through (retried every 10 ms to 500 ms: `SPACE_RETRY_FIRST_MS`, `SPACE_RETRY_MAX_MS`)";
}

/// The code of `name`, if the table has one.
pub fn by_name(name: &str) -> Option<&'static Code> {
    ALL.iter().copied().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique() {
        let names: BTreeSet<&str> = ALL.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), ALL.len(), "a code is listed twice");
    }

    /// `(status, code)` of every row of the error table in docs/limits.md.
    fn documented() -> BTreeSet<(u16, String)> {
        let doc = include_str!("../../../../docs/limits.md");
        let table = doc.split("## Error answers").nth(1).expect("docs/limits.md has an Error answers section");
        let mut rows = BTreeSet::new();
        for line in table.lines().skip_while(|l| !l.starts_with("| status")).skip(2) {
            let Some(row) = line.strip_prefix("| ") else { break };
            let cells: Vec<&str> = row.split(" | ").collect();
            let status: u16 = cells[0].trim().parse().expect("a status in the first column");
            let name = cells[1].trim().trim_matches('`').to_string();
            rows.insert((status, name));
        }
        rows
    }

    #[test]
    fn docs_list_exactly_the_table() {
        let table: BTreeSet<(u16, String)> = ALL.iter().map(|c| (c.status.as_u16(), c.name.to_string())).collect();
        let docs = documented();
        let missing: Vec<_> = table.difference(&docs).collect();
        let extra: Vec<_> = docs.difference(&table).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "docs/limits.md lacks {missing:?} and has {extra:?} beyond the table"
        );
    }

    /// Every quoted code a source file of this crate puts in an answer
    /// (`"code": "x"`, `code: "x"`) must be in the table, so that no
    /// refusal can bypass it.
    #[test]
    fn no_code_is_spelled_outside_the_table() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut stray = Vec::new();
        let mut stack = vec![src];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read the source tree") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") || path.ends_with("codes.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).expect("read a source file");
                for pattern in ["\"code\": \"", "code: \""] {
                    for (at, _) in text.match_indices(pattern) {
                        let rest = &text[at + pattern.len()..];
                        let name = &rest[..rest.find('"').unwrap_or(0)];
                        // Placeholders in docs (`"code": "<code>"`) are not codes.
                        let spelled = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                        if spelled && by_name(name).is_none() && !VERDICTS.contains(&name) {
                            stray.push(format!("{}: {name}", path.display()));
                        }
                    }
                }
            }
        }
        assert!(stray.is_empty(), "codes outside the table: {stray:?}");
    }

    /// Verdicts inside 200 answers, not refusals (see the module docs).
    const VERDICTS: &[&str] = &["TIMER_NOT_FAILED", "QUEUE_FULL"];
}
