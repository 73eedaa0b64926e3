//! openraft glue. Regina is a Raft group from its first day: a single node
//! is a group of one voter, so every write takes the same path whether or
//! not there are peers.
//!
//! - [`types`]: the openraft type configuration.
//! - [`answers`]: outcomes handed from the apply straight to the requests
//!   that wait on the node that proposed them.
//! - [`log_store`]: openraft's log storage over Regina's group-committed
//!   WAL; `append` answers openraft only after the covering fdatasync.
//! - [`state_machine`]: openraft's state machine over the pure
//!   `regina_state::State`, writing message bodies and snapshots.
//! - [`network`]: the peer transport, Raft RPCs over HTTP; snapshots carry
//!   the message-body segments their state points at.
//!
//! Nothing here knows what a queue is; it moves opaque entries.

pub mod answers;
pub mod background_drop;
pub mod backup;
pub mod committed_file;
pub mod log_index;
pub mod log_store;
pub mod meta_file;
pub mod network;
pub mod read_ahead;
pub mod shared_wal;
pub mod state_machine;
pub mod types;
pub mod wal_record;

pub use log_store::LogStore;
pub use state_machine::{SharedState, StateMachineStore};
pub use types::{NodeId, Raft, TypeConfig};
