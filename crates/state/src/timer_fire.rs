//! Firing due timers. Every due timer becomes a push through the ordinary
//! push path (dedup included). A push that stores the message, or finds it
//! stored already (a duplicate), fires the timer and forgets it. A push the
//! queue refuses (it holds `maxSize` messages) does not lose the fire: the
//! timer stays and is tried again after its queue's retry delay, doubled
//! per refusal up to `timerMaxRetryDelayMs`; after `timerMaxAttempts`
//! refusals it stays `failed`. Everything is judged at the entry's time.

use crate::body::BodyWrite;
use crate::command::{PushCmd, PushItem};
use crate::options::QueueOptions;
use crate::outcome::PushStatus;
use crate::state::State;
use crate::timers::TimerError;

impl State {
    pub(crate) fn fire_timers(&mut self, writes: &mut Vec<BodyWrite>) {
        let now = self.now_ms;
        let due = self.timers.due_at(now);
        if due.is_empty() {
            return;
        }
        // The rows are copies already: they move into the pushes whole.
        let (keys, items): (Vec<_>, Vec<_>) = due
            .into_iter()
            .map(|(key, row)| {
                let item = PushItem {
                    queue: key.0.clone(),
                    partition: row.partition,
                    transaction_id: row.txn,
                    trace_id: None,
                    message_id: row.message_id,
                    payload: row.payload,
                };
                (key, item)
            })
            .unzip();
        let results = self.push(&PushCmd { items }, writes);
        for (key, result) in keys.iter().zip(results) {
            if result.status != PushStatus::Full {
                self.timers.remove(key);
                continue;
            }
            // The push created the queue if it was missing, so it exists.
            let options = self.queue(&key.0).map_or_else(QueueOptions::pushed_defaults, |q| q.options.clone());
            let error = TimerError::QueueFull { max_size: options.max_size };
            self.timers.refused(key, error, now, options.timer_max_attempts, |a| options.timer_retry_wait_ms(a));
        }
    }
}
