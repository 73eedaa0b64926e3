//! Processing traces that consumers record against messages ("started",
//! "charged card", ...), kept in a bounded ring: the newest
//! [`TRACES_KEPT`] events. They are log entries like everything else, so
//! every replica holds the same ring.

use std::collections::{HashSet, VecDeque};

use regina_types::limits::TRACES_KEPT;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// Minted by the leader.
    pub id: [u8; 16],
    pub partition_id: u64,
    pub transaction_id: String,
    pub group: String,
    pub names: Vec<String>,
    pub event_type: String,
    /// JSON text.
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
    pub created_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traces {
    events: VecDeque<TraceEvent>,
}

/// One name's summary in the names listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameSummary {
    pub name: String,
    pub trace_count: usize,
    pub message_count: usize,
    pub last_seen_ms: u64,
}

impl Traces {
    pub fn record(&mut self, e: TraceEvent) {
        self.events.push_back(e);
        while self.events.len() > TRACES_KEPT {
            self.events.pop_front();
        }
    }

    pub fn for_message<'a>(
        &'a self,
        partition_id: u64,
        transaction_id: &'a str,
    ) -> impl Iterator<Item = &'a TraceEvent> {
        self.events.iter().filter(move |e| e.partition_id == partition_id && e.transaction_id == transaction_id)
    }

    pub fn by_name<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a TraceEvent> {
        self.events.iter().filter(move |e| e.names.iter().any(|n| n == name))
    }

    /// Every name with its counts, most recently seen first.
    pub fn names(&self) -> Vec<NameSummary> {
        let mut out: Vec<NameSummary> = Vec::new();
        let mut messages: HashSet<(&str, u64, &str)> = HashSet::new();
        for e in &self.events {
            for n in &e.names {
                let new_message = messages.insert((n.as_str(), e.partition_id, e.transaction_id.as_str()));
                match out.iter_mut().find(|s| s.name == *n) {
                    Some(s) => {
                        s.trace_count += 1;
                        s.message_count += new_message as usize;
                        s.last_seen_ms = s.last_seen_ms.max(e.created_ms);
                    }
                    None => out.push(NameSummary {
                        name: n.clone(),
                        trace_count: 1,
                        message_count: 1,
                        last_seen_ms: e.created_ms,
                    }),
                }
            }
        }
        out.sort_by(|a, b| b.last_seen_ms.cmp(&a.last_seen_ms).then(a.name.cmp(&b.name)));
        out
    }
}
