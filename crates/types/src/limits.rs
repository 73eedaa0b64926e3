//! Every limit Regina enforces at its edge, with its unit in its name.
//! `docs/limits.md` is generated from the same list by hand and must agree.

/// Largest HTTP request body accepted, in bytes.
pub const REQUEST_BODY_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Most items in one push request.
pub const PUSH_ITEMS_MAX: usize = 10_000;
/// Largest single message payload (its JSON text), in bytes.
pub const PAYLOAD_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Longest queue, partition or consumer-group name, in bytes.
pub const NAME_BYTES_MAX: usize = 255;
/// Longest namespace or task label, in bytes.
pub const LABEL_BYTES_MAX: usize = 255;
/// Longest `transactionId`, in bytes.
pub const TRANSACTION_ID_BYTES_MAX: usize = 65_535;
/// Longest error text carried by a nack (longer texts are cut, not refused).
pub const ACK_ERROR_BYTES_MAX: usize = 4_096;
/// Most acknowledgements in one batch ack.
pub const ACK_BATCH_MAX: usize = 10_000;
/// Most messages one pop may return.
pub const POP_BATCH_MAX: u32 = 10_000;
/// Batch used when a pop names none.
pub const POP_BATCH_DEFAULT: u32 = 200;
/// Most partitions one wildcard pop may claim.
pub const POP_PARTITIONS_MAX: u32 = 64;
/// Longest a long poll may wait, in milliseconds.
pub const POP_WAIT_MS_MAX: u64 = 60_000;
/// Long-poll budget when a pop names none, in milliseconds.
pub const POP_WAIT_MS_DEFAULT: u64 = 30_000;
/// Longest lease a pop or a queue may ask for, in seconds (one day).
pub const LEASE_SECONDS_MAX: u64 = 86_400;
/// Lease of a queue created by a push (not by configure), in seconds.
pub const LEASE_SECONDS_DEFAULT_PUSHED: u64 = 60;
/// Lease of a queue created by configure when none is given, in seconds.
pub const LEASE_SECONDS_DEFAULT_CONFIGURED: u64 = 300;
/// Retry limit when none is configured.
pub const RETRY_LIMIT_DEFAULT: u32 = 3;
/// Largest retry limit accepted.
pub const RETRY_LIMIT_MAX: u32 = 1_000_000;
/// Dedup window when none is configured, in seconds.
pub const DEDUP_WINDOW_SECONDS_DEFAULT: u64 = 3_600;
/// Largest duration option (retention, delay, window) accepted, in seconds (10 years).
pub const DURATION_SECONDS_MAX: u64 = 10 * 365 * 86_400;
/// How long after a nack a partition waits before redelivery, in milliseconds.
pub const RETRY_DELAY_MS: u64 = 0;
/// Most operations in one timers call.
pub const TIMER_OPS_MAX: usize = 256;
/// Largest decoded timer payload, in bytes.
pub const TIMER_PAYLOAD_BYTES_MAX: usize = 1024 * 1024;
/// Furthest ahead a timer may be scheduled, in milliseconds (90 days).
pub const TIMER_HORIZON_MS: u64 = 90 * 86_400_000;
/// Longest timer key, in bytes.
pub const TIMER_KEY_BYTES_MAX: usize = 512;
/// Most timer rows one list read returns (`limit` 1..1,000).
pub const TIMER_LIST_ROWS_MAX: usize = 1_000;
/// Rows a timer list read returns when it names no `limit`.
pub const TIMER_LIST_ROWS_DEFAULT: usize = 100;
/// Fire attempts a timer gets before it stays `failed` (`timerMaxAttempts`).
pub const TIMER_MAX_ATTEMPTS_DEFAULT: u32 = 3;
/// Largest `timerMaxAttempts` accepted.
pub const TIMER_MAX_ATTEMPTS_MAX: u32 = 100;
/// First wait after a refused fire, in milliseconds (`timerRetryDelayMs`);
/// it doubles after each further refusal.
pub const TIMER_RETRY_DELAY_MS_DEFAULT: u64 = 1_000;
/// Longest wait between fire attempts, in milliseconds (`timerMaxRetryDelayMs`).
pub const TIMER_MAX_RETRY_DELAY_MS_DEFAULT: u64 = 60_000;
/// Largest `timerRetryDelayMs` or `timerMaxRetryDelayMs` accepted, in milliseconds (one day).
pub const TIMER_RETRY_DELAY_MS_MAX: u64 = 86_400_000;

/// Largest KV value (its compact JSON text), in bytes.
pub const KV_VALUE_BYTES_MAX: usize = 64 * 1024;
/// Longest KV key, in bytes (keys are free text, 1 byte at least, no NUL).
pub const KV_KEY_BYTES_MAX: usize = 512;
/// Longest KV namespace, in bytes (`^[a-z0-9][a-z0-9._-]{0,63}$`).
pub const KV_NAMESPACE_BYTES_MAX: usize = 64;
/// Most operations in one KV call.
pub const KV_OPS_PER_CALL_MAX: usize = 256;
/// Most KV operations riding one transaction.
pub const KV_OPS_PER_TXN_MAX: usize = 64;
/// Most keys one KV call may name (a `getPrefix` counts its limit).
pub const KV_KEYS_PER_CALL_MAX: usize = 1_024;
/// Most keys the KV riders of one transaction may name.
pub const KV_KEYS_PER_TXN_MAX: usize = 256;
/// Rows a `getPrefix` returns when it names no limit.
pub const KV_PREFIX_LIMIT_DEFAULT: u32 = 100;
/// Most rows one `getPrefix` returns (larger limits are clamped).
pub const KV_PREFIX_LIMIT_MAX: u32 = 1_000;
/// Value bytes the reads of one KV call return before they answer `truncated`.
pub const KV_READ_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Longest KV or lock lifetime, in seconds (10 years).
pub const KV_TTL_SECONDS_MAX: u64 = 10 * 365 * 86_400;
/// Largest `afterCreationMs` / `afterUpdateMs` (ms): the same ten years as
/// `ttlSeconds`.
pub const KV_LIFETIME_MS_MAX: u64 = KV_TTL_SECONDS_MAX * 1000;
/// Latest `expiresAt` (ms since the epoch): 9999-12-31T23:59:59.999Z, the
/// last instant the wire's four-digit year can write.
pub const KV_EXPIRES_AT_MS_MAX: u64 = 253_402_300_799_999;
/// Rows when a `scan` names no `limit`.
pub const KV_SCAN_LIMIT_DEFAULT: u32 = 100;
/// Most rows per `scan` page (larger limits are refused).
pub const KV_SCAN_LIMIT_MAX: u32 = 1_000;
/// Rows one sweep entry frees at most, so a sweep never makes one entry
/// slow; the next sweep (a second later) takes the rest.
pub const KV_SWEEP_ROWS_MAX: usize = 10_000;
/// Expired rows (not yet swept) one `getPrefix` or `scan` page steps over
/// before it answers `truncated` with `nextAfter` past them, so a page's cost
/// stays bounded however many rows just expired.
pub const KV_READ_EXPIRED_SKIP_MAX: usize = 10_000;
/// Longest lock or semaphore name, in bytes (no control characters, no `#`).
pub const LOCK_NAME_BYTES_MAX: usize = 256;
/// Longest lock owner, in bytes.
pub const LOCK_OWNER_BYTES_MAX: usize = 256;
/// Permits of a lock acquired without `limit`.
pub const LOCK_LIMIT_DEFAULT: u32 = 1;
/// Most permits a semaphore may have.
pub const LOCK_LIMIT_MAX: u32 = 1_024;
/// Most operations in one locks call.
pub const LOCK_OPS_PER_CALL_MAX: usize = 64;
/// Most slots one locks call may touch (an acquire counts its limit).
pub const LOCK_SLOTS_PER_CALL_MAX: usize = 4_096;

// Job queues.

/// Lease a claim takes when it names none and its queue names none, in milliseconds.
pub const JOB_LEASE_MS_DEFAULT: u64 = 30_000;
/// Longest lease a claim may take when its queue names no `lease.maxMs`, in milliseconds.
pub const JOB_LEASE_MAX_MS_DEFAULT: u64 = 300_000;
/// Largest `lease.maxMs` (and `defaultMs`) a queue may name, in milliseconds (one day).
pub const JOB_LEASE_MS_MAX: u64 = 86_400_000;
/// Attempts a job gets when its queue names no `retry.maxAttempts`.
pub const JOB_MAX_ATTEMPTS_DEFAULT: u32 = 5;
/// Largest `retry.maxAttempts`.
pub const JOB_MAX_ATTEMPTS_MAX: u32 = 1_000_000;
/// First retry delay when the queue names none, in milliseconds.
pub const JOB_RETRY_INITIAL_DELAY_MS_DEFAULT: u64 = 1_000;
/// Longest retry delay when the queue names none, in milliseconds.
pub const JOB_RETRY_MAX_DELAY_MS_DEFAULT: u64 = 60_000;
/// Longest delay (`delayMs`, retry delays, `at` ahead of now, retention), in milliseconds (10 years).
pub const JOB_DELAY_MS_MAX: u64 = 10 * 365 * 86_400_000;
/// Most operations in one jobs call (and job riders in one transaction).
pub const JOB_OPS_MAX: usize = 256;
/// Longest job id, in bytes (free text, 1 byte at least, no control characters).
pub const JOB_ID_BYTES_MAX: usize = 512;
/// Longest job scope, in bytes (may be empty: the default scope).
pub const JOB_SCOPE_BYTES_MAX: usize = 256;
/// Longest worker `owner` and claim `requestId`, in bytes.
pub const JOB_OWNER_BYTES_MAX: usize = 256;
/// Largest job payload, result or error (compact JSON text), in bytes.
pub const JOB_PAYLOAD_BYTES_MAX: usize = 1024 * 1024;
/// Largest `payloadSchema` or `resultSchema` (compact JSON text), in bytes.
pub const JOB_SCHEMA_BYTES_MAX: usize = 64 * 1024;
/// Rows a `scan` returns when it names no limit.
pub const JOB_SCAN_LIMIT_DEFAULT: u32 = 100;
/// Most rows one `scan` returns (larger limits are clamped).
pub const JOB_SCAN_LIMIT_MAX: u32 = 1_000;
/// Longest a claim long poll (`waitMs`) may wait, in milliseconds.
pub const JOB_WAIT_MS_MAX: u64 = 60_000;
/// How long a claim's `requestId` is remembered, so a resent claim gets its
/// original answer, in milliseconds.
pub const JOB_REQUEST_ID_WINDOW_MS: u64 = 600_000;
/// Finished jobs one sweep entry drops (and expired leases it settles) at most.
pub const JOB_SWEEP_ROWS_MAX: usize = 10_000;

// Ephemeral (in-memory) queues: node-local, outside the log, lost on restart.

/// Payload bytes all ephemeral queues of one node may hold together.
pub const EPHEMERAL_NODE_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Payload bytes one ephemeral queue may hold; also the largest `maxBytes`.
pub const EPHEMERAL_QUEUE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Messages one ephemeral queue may hold; also the largest `maxLength`.
pub const EPHEMERAL_QUEUE_MESSAGES_MAX: usize = 10_000;
/// Ephemeral queues one node may hold at once.
pub const EPHEMERAL_QUEUES_MAX: usize = 10_000;
/// Partitions one ephemeral queue may have.
pub const EPHEMERAL_PARTITIONS_PER_QUEUE_MAX: usize = 1_024;
/// Consumer groups (the groupless queue mode counts as one) per ephemeral queue.
pub const EPHEMERAL_GROUPS_PER_QUEUE_MAX: usize = 256;
/// Lease of an ephemeral delivery when the queue names none, in seconds.
pub const EPHEMERAL_LEASE_SECONDS_DEFAULT: u64 = 30;
/// Longest ephemeral lease, in seconds (one day).
pub const EPHEMERAL_LEASE_SECONDS_MAX: u64 = 86_400;
/// Deliveries of an ephemeral message to one group before a failure drops it.
pub const EPHEMERAL_RETRY_LIMIT_DEFAULT: u32 = 5;
/// Largest ephemeral `retryLimit` accepted.
pub const EPHEMERAL_RETRY_LIMIT_MAX: u32 = 1_000;
/// Longest ephemeral `ttlSeconds` accepted (seven days).
pub const EPHEMERAL_TTL_SECONDS_MAX: u64 = 7 * 86_400;
/// Idle time after which an empty implicit queue, or a group without leases,
/// is forgotten, in milliseconds.
pub const EPHEMERAL_IDLE_MS: u64 = 300_000;
/// Most messages in one ephemeral push, acks in one ack, and messages in one pop.
pub const EPHEMERAL_ITEMS_MAX: usize = 10_000;
/// Messages an ephemeral pop returns when it names no `batch`.
pub const EPHEMERAL_POP_BATCH_DEFAULT: usize = 1;
/// Longest an ephemeral long poll may wait, in milliseconds (larger values are clamped).
pub const EPHEMERAL_POP_WAIT_MS_MAX: u64 = 300_000;
/// Ephemeral long-poll budget when `wait=true` names no `timeout`, in milliseconds.
pub const EPHEMERAL_POP_WAIT_MS_DEFAULT: u64 = 30_000;
/// Longest `windowBuffer.ms`, in milliseconds.
pub const EPHEMERAL_WINDOW_MS_MAX: u64 = 300_000;
/// Longest ephemeral queue, partition or group name, in bytes.
pub const EPHEMERAL_NAME_BYTES_MAX: usize = 512;
/// `Retry-After` of a full ephemeral queue (429) or node (503), in seconds.
pub const EPHEMERAL_RETRY_AFTER_SECONDS: u64 = 1;
/// Least time between two housekeeping passes over every ephemeral queue
/// (lease lapses, TTL, idle collection), in milliseconds.
pub const EPHEMERAL_SWEEP_INTERVAL_MS: u64 = 1_000;

// Traces.

/// Trace events kept; older ones are dropped as newer ones come.
pub const TRACES_KEPT: usize = 10_000;
/// Bytes of trace data (JSON text) per event.
pub const TRACE_DATA_BYTES_MAX: usize = 16 * 1024;
/// Trace names per event.
pub const TRACE_NAMES_MAX: usize = 16;

// Tenants, groups and the cluster.

/// Longest tenant name (`x-queen-tenant`), in bytes.
pub const TENANT_NAME_BYTES_MAX: usize = 128;
/// Raft groups one node runs at most (the shared WAL tags records with them).
pub const RAFT_GROUPS_MAX: u16 = 64;
/// Largest Raft message between nodes: 64 entries of up to 8 MiB, or one
/// body segment of a snapshot.
pub const RAFT_BODY_BYTES_MAX: usize = 640 << 20;
/// How long a proposal waits for its entry to be applied before it answers
/// that the outcome is unknown, in milliseconds.
pub const PROPOSAL_ANSWER_MS_MAX: u64 = 30_000;
// Streams (query state kept for the clients' stream SDKs).

/// Longest stream query name, in bytes (no control characters).
pub const STREAM_QUERY_NAME_BYTES_MAX: usize = 255;
/// Longest `config_hash` of a stream query, in bytes.
pub const STREAM_CONFIG_HASH_BYTES_MAX: usize = 256;
/// Longest state key of a stream query, in bytes (1 byte at least).
pub const STREAM_STATE_KEY_BYTES_MAX: usize = 1_024;
/// Largest state value of a stream query (its compact JSON text), in bytes.
pub const STREAM_STATE_VALUE_BYTES_MAX: usize = 256 * 1024;
/// Most state rows one query keeps for one source partition.
pub const STREAM_STATE_ROWS_PER_PARTITION_MAX: usize = 10_000;
/// Most operations in one cycle: state upserts and deletes plus sink pushes.
pub const STREAM_CYCLE_OPS_MAX: usize = 10_000;
/// Most keys one state read may name.
pub const STREAM_STATE_GET_KEYS_MAX: usize = 10_000;
/// Most partitions one claim may name.
pub const STREAM_CLAIM_PARTITIONS_MAX: usize = 1_000;
/// Lease of a claim that names none, in seconds.
pub const STREAM_CLAIM_LEASE_SECONDS_DEFAULT: u64 = 30;
/// Longest lease a claim may ask for, in seconds.
pub const STREAM_CLAIM_LEASE_SECONDS_MAX: u64 = 600;
/// Partitions one page of `state/partitions` lists when it names no `limit`,
/// and at most (larger limits are clamped).
pub const STREAM_PARTITIONS_PAGE_MAX: usize = 1_000;

// Leadership balancing.

/// How long a node leads a group before it may hand it over: longer than
/// openraft's leader lease (1 s), so the old leader grants the target's
/// vote, in milliseconds.
pub const LEAD_SETTLE_MS: u64 = 1_500;
/// How long a request waits at the route layer while its group is handed
/// over, in milliseconds.
pub const HANDOFF_WAIT_MS_MAX: u64 = 6_000;
/// Entries a move's target may lag before the move starts (it then waits
/// for the rest).
pub const CATCH_UP_LAG_ENTRIES_MAX: u64 = 256;
/// Tenant names a group's view lists (all are counted).
pub const TENANTS_LISTED_MAX: usize = 100;
/// Shortest cluster token accepted, in bytes.
pub const CLUSTER_TOKEN_BYTES_MIN: usize = 16;
/// Longest token subject (`sub`) accepted and stamped as `producerSub`, in
/// bytes; a token with a longer one is refused (401).
pub const AUTH_SUBJECT_BYTES_MAX: usize = 1_024;
/// Requests that may wait for a Raft group's proposer at once (default of
/// `--max-queued-proposals`); past it a write is refused with 429 `overloaded`.
pub const PROPOSER_QUEUE_REQUESTS_MAX: usize = 65_536;
/// Rough bytes of the commands waiting for a Raft group's proposer at most;
/// past it a write is refused with 429 `overloaded`.
pub const PROPOSER_QUEUE_BYTES_MAX: usize = 1 << 30;
/// Pops that may long-poll at once on a node (default of `--max-long-polls`);
/// past it a pop that would wait is refused with 429 `overloaded`.
pub const LONG_POLLS_MAX: usize = 10_000;
/// Callers whose request rate a node tracks at once (with `--rate-limit`);
/// a new caller past it is refused with 429 `rate_limited`.
pub const RATE_LIMIT_CALLERS_MAX: usize = 100_000;

/// Percent of the data directory's filesystem in use past which a node
/// refuses writes that grow storage with 507 `storage_full` (default of
/// `--disk-high-pct`, Queen's `QUEEN_RAFT_DISK_HIGH_PCT`).
pub const DISK_HIGH_PCT_DEFAULT: u8 = 85;
/// Percent in use under which such writes are taken again (default of
/// `--disk-low-pct`, Queen's `QUEEN_RAFT_DISK_LOW_PCT`).
pub const DISK_LOW_PCT_DEFAULT: u8 = 80;
/// How often a node measures its disk use, in milliseconds.
pub const DISK_CHECK_MS: u64 = 250;

// The dashboard (served at `/`).

/// How often each Raft group's dashboard history takes a sample, in
/// milliseconds.
pub const DASHBOARD_HISTORY_INTERVAL_MS: u64 = 10_000;
/// Samples the dashboard history keeps (the oldest goes first): one hour
/// at one sample every ten seconds.
pub const DASHBOARD_HISTORY_POINTS_MAX: usize = 360;
/// Consumer groups a history sample records the lag of (the most behind
/// first).
pub const DASHBOARD_HISTORY_GROUPS_MAX: usize = 32;
/// Rows `GET /api/v1/resources/kv/list` returns when not told, and the
/// most it returns.
pub const DASHBOARD_KV_LIST_DEFAULT: u64 = 100;
pub const DASHBOARD_KV_LIST_MAX: u64 = 1_000;
/// Locks, KV namespaces, timer queues and job queues the dashboard's
/// listing routes return at most.
pub const DASHBOARD_LISTING_MAX: usize = 1_000;
