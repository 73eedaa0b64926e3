//! Queue options: what each one means, its default, and how a configure
//! request changes them (merge by default, replace on request).

use serde::{Deserialize, Serialize};

use regina_types::limits::{
    DEDUP_WINDOW_SECONDS_DEFAULT, LEASE_SECONDS_DEFAULT_CONFIGURED, RETRY_LIMIT_DEFAULT, TIMER_MAX_ATTEMPTS_DEFAULT,
    TIMER_MAX_RETRY_DELAY_MS_DEFAULT, TIMER_RETRY_DELAY_MS_DEFAULT,
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueOptions {
    /// Lease of a pop, seconds.
    pub lease_time: u64,
    /// Redeliveries after the first before the DLQ.
    pub retry_limit: u32,
    pub priority: i64,
    /// Messages stay invisible this many seconds after their push.
    pub delayed_processing: u64,
    pub window_buffer: u64,
    /// Most messages kept; 0 = no limit. Stored and echoed.
    pub max_size: u64,
    /// Messages older than this are dropped (with `retention_enabled`); 0 = keep.
    pub retention_seconds: u64,
    /// Messages every group has consumed are dropped after this (with
    /// `retention_enabled`); 0 = keep.
    pub completed_retention_seconds: u64,
    pub retention_enabled: bool,
    pub encryption_enabled: bool,
    pub dlq_after_max_retries: bool,
    /// Transaction ids are remembered this long per partition; 0 = only
    /// within one request.
    pub dedup_window_seconds: u64,
    /// Dead-lettering is off only when this and `dlq_after_max_retries` are
    /// both false (the clients' documented OR).
    pub dead_letter_queue: bool,
    /// Stored and reported; like upstream, not enforced on the hot path
    /// (a nack makes the partition claimable at once).
    pub retry_delay_ms: u64,
    /// Stored and reported; retention is what drops old messages.
    pub ttl: u64,
    /// Caps a long poll on this queue, seconds; 0 = the request's timeout.
    pub max_wait_time_seconds: u64,
    /// Stored and reported, in ms, clamped to the pop wait limit.
    pub min_pop_wait_time_ms: u64,
    /// Fire attempts of a timer of this queue before it stays `failed`.
    pub timer_max_attempts: u32,
    /// Wait after a timer's first refused fire, ms; doubles after each one.
    pub timer_retry_delay_ms: u64,
    /// Longest wait between a timer's fire attempts, ms.
    pub timer_max_retry_delay_ms: u64,
}

impl QueueOptions {
    /// The ages (seconds; 0 = none) past which a sweep drops messages, and
    /// past which it drops consumed ones. As in Queen, both retentions act
    /// only with `retentionEnabled`.
    pub fn retention(&self) -> (u64, u64) {
        match self.retention_enabled {
            true => (self.retention_seconds, self.completed_retention_seconds),
            false => (0, 0),
        }
    }

    /// Whether exhausted messages go to the dead-letter list.
    pub fn dead_letters(&self) -> bool {
        self.dlq_after_max_retries || self.dead_letter_queue
    }

    /// Defaults of a queue created by configure.
    pub fn configured_defaults() -> Self {
        QueueOptions {
            lease_time: LEASE_SECONDS_DEFAULT_CONFIGURED,
            retry_limit: RETRY_LIMIT_DEFAULT,
            priority: 0,
            delayed_processing: 0,
            window_buffer: 0,
            max_size: 0,
            retention_seconds: 0,
            completed_retention_seconds: 0,
            retention_enabled: false,
            encryption_enabled: false,
            dlq_after_max_retries: true,
            dedup_window_seconds: DEDUP_WINDOW_SECONDS_DEFAULT,
            dead_letter_queue: true,
            retry_delay_ms: 0,
            ttl: 0,
            max_wait_time_seconds: 0,
            min_pop_wait_time_ms: 0,
            timer_max_attempts: TIMER_MAX_ATTEMPTS_DEFAULT,
            timer_retry_delay_ms: TIMER_RETRY_DELAY_MS_DEFAULT,
            timer_max_retry_delay_ms: TIMER_MAX_RETRY_DELAY_MS_DEFAULT,
        }
    }

    /// Defaults of a queue created by its first push.
    pub fn pushed_defaults() -> Self {
        QueueOptions { lease_time: regina_types::limits::LEASE_SECONDS_DEFAULT_PUSHED, ..Self::configured_defaults() }
    }

    pub fn apply(&mut self, patch: &OptionsPatch) {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = patch.$f { self.$f = v; } )* };
        }
        set!(
            lease_time,
            retry_limit,
            priority,
            delayed_processing,
            window_buffer,
            max_size,
            retention_seconds,
            completed_retention_seconds,
            retention_enabled,
            encryption_enabled,
            dlq_after_max_retries,
            dedup_window_seconds,
            dead_letter_queue,
            retry_delay_ms,
            ttl,
            max_wait_time_seconds,
            min_pop_wait_time_ms
        );
    }

    pub fn apply_timer_policy(&mut self, patch: &TimerPolicyPatch) {
        if let Some(v) = patch.max_attempts {
            self.timer_max_attempts = v;
        }
        if let Some(v) = patch.retry_delay_ms {
            self.timer_retry_delay_ms = v;
        }
        if let Some(v) = patch.max_retry_delay_ms {
            self.timer_max_retry_delay_ms = v;
        }
    }

    /// How long a timer of this queue waits after its `attempts`-th refused
    /// fire: the retry delay doubled per earlier refusal, capped.
    pub fn timer_retry_wait_ms(&self, attempts: u32) -> u64 {
        let factor = 1u64.checked_shl(attempts.saturating_sub(1)).unwrap_or(u64::MAX);
        self.timer_retry_delay_ms.saturating_mul(factor).min(self.timer_max_retry_delay_ms)
    }
}

/// The options a configure request names; `None` leaves an option as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OptionsPatch {
    pub lease_time: Option<u64>,
    pub retry_limit: Option<u32>,
    pub priority: Option<i64>,
    pub delayed_processing: Option<u64>,
    pub window_buffer: Option<u64>,
    pub max_size: Option<u64>,
    pub retention_seconds: Option<u64>,
    pub completed_retention_seconds: Option<u64>,
    pub retention_enabled: Option<bool>,
    pub encryption_enabled: Option<bool>,
    pub dlq_after_max_retries: Option<bool>,
    pub dedup_window_seconds: Option<u64>,
    pub dead_letter_queue: Option<bool>,
    pub retry_delay_ms: Option<u64>,
    pub ttl: Option<u64>,
    pub max_wait_time_seconds: Option<u64>,
    pub min_pop_wait_time_ms: Option<u64>,
}

/// The timer retry options a configure request names. A command of its own
/// ([`crate::Command::ConfigureTimerPolicy`]) carries it, so that
/// [`OptionsPatch`], which old log entries hold, keeps its layout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerPolicyPatch {
    pub max_attempts: Option<u32>,
    pub retry_delay_ms: Option<u64>,
    pub max_retry_delay_ms: Option<u64>,
}

impl TimerPolicyPatch {
    pub fn is_empty(&self) -> bool {
        self == &TimerPolicyPatch::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_retry_waits_double_up_to_the_cap() {
        let o = QueueOptions::configured_defaults();
        let waits: Vec<u64> = (1..=8).map(|a| o.timer_retry_wait_ms(a)).collect();
        assert_eq!(waits, vec![1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
        assert_eq!(o.timer_retry_wait_ms(200), 60_000, "a large attempt count saturates instead of overflowing");
    }
}
