//! Registration: a query by name over a source queue, with the hash of the
//! client's operator chain. The same name with another hash (or another
//! source queue) is refused unless the call asks for `reset`, which clears
//! every state row of the query and takes the new shape. The query keeps its
//! id across registrations, so runners sharing a name share state.

use serde::{Deserialize, Serialize};

use super::{Query, RegisterCmd};
use crate::state::State;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegisterOutcome {
    Registered {
        query_id: String,
        /// The query did not exist before this call.
        fresh: bool,
        /// This call cleared state the query held.
        reset: bool,
    },
    /// Another chain shape is registered under the name; nothing changed.
    Conflict { query_id: String, error: String },
}

impl State {
    pub(crate) fn stream_register(&mut self, cmd: &RegisterCmd) -> RegisterOutcome {
        let now = self.now_ms;
        let store = &mut self.streams;
        let Some(id) = store.names.get(&cmd.name).cloned() else {
            let q = Query {
                id: cmd.new_id.clone(),
                name: cmd.name.clone(),
                source_queue: cmd.source_queue.clone(),
                sink_queue: cmd.sink_queue.clone(),
                config_hash: cmd.config_hash.clone(),
                created_ms: now,
                updated_ms: now,
                partitions: Default::default(),
            };
            store.names.insert(cmd.name.clone(), cmd.new_id.clone());
            store.queries.insert(cmd.new_id.clone(), q);
            return RegisterOutcome::Registered { query_id: cmd.new_id.clone(), fresh: true, reset: false };
        };
        let q = store.queries.get_mut(&id).expect("names index queries");
        let changed = q.config_hash != cmd.config_hash || q.source_queue != cmd.source_queue;
        if changed && !cmd.reset {
            let what = if q.config_hash != cmd.config_hash {
                "config_hash mismatch: the operator chain changed"
            } else {
                "source_queue mismatch: the query reads another queue"
            };
            return RegisterOutcome::Conflict {
                query_id: id,
                error: format!(
                    "{what} for query '{}'. Pass reset:true to wipe its existing state, or use a new query name.",
                    cmd.name
                ),
            };
        }
        if cmd.reset {
            q.partitions.clear();
            q.config_hash = cmd.config_hash.clone();
            q.source_queue = cmd.source_queue.clone();
        }
        if cmd.sink_queue.is_some() {
            q.sink_queue = cmd.sink_queue.clone();
        }
        q.updated_ms = now;
        RegisterOutcome::Registered { query_id: id, fresh: false, reset: cmd.reset }
    }
}
