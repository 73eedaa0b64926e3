//! Vocabulary shared by every Regina crate: the named limits, the rules for
//! names, and the one timestamp format used on the wire.
//!
//! Nothing here does I/O or reads a clock; the state machine depends on it.

pub mod limits;
pub mod names;
pub mod time;

pub use names::{validate_name, NameError, NameKind};

/// The partition a push lands in when it names none.
pub const DEFAULT_PARTITION: &str = "Default";
/// The consumer group of queue mode (a pop that names no group).
pub const QUEUE_MODE_GROUP: &str = "__QUEUE_MODE__";
