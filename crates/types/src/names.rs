//! Rules for the names clients choose: queues, partitions, consumer groups,
//! namespaces and tasks. Names travel in URL paths and in the log, so they
//! must be non-empty, bounded and free of control characters.

use crate::limits::{LABEL_BYTES_MAX, NAME_BYTES_MAX};

/// Which kind of name is being checked; it names the field in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    Queue,
    Partition,
    ConsumerGroup,
    Namespace,
    Task,
}

impl NameKind {
    pub fn field(self) -> &'static str {
        match self {
            NameKind::Queue => "queue",
            NameKind::Partition => "partition",
            NameKind::ConsumerGroup => "consumerGroup",
            NameKind::Namespace => "namespace",
            NameKind::Task => "task",
        }
    }

    fn max_bytes(self) -> usize {
        match self {
            NameKind::Namespace | NameKind::Task => LABEL_BYTES_MAX,
            _ => NAME_BYTES_MAX,
        }
    }
}

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    Empty(NameKind),
    TooLong(NameKind, usize),
    ControlCharacter(NameKind),
}

impl NameError {
    /// True when the refusal is about size (answered 413, not 400).
    pub fn is_too_long(&self) -> bool {
        matches!(self, NameError::TooLong(..))
    }

    /// The field the refused name came in.
    pub fn field(&self) -> &'static str {
        match self {
            NameError::Empty(k) | NameError::TooLong(k, _) | NameError::ControlCharacter(k) => k.field(),
        }
    }
}

impl std::fmt::Display for NameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameError::Empty(k) => write!(f, "{} must not be empty", k.field()),
            NameError::TooLong(k, n) => write!(f, "{} is {} bytes; the limit is {} bytes", k.field(), n, k.max_bytes()),
            NameError::ControlCharacter(k) => {
                write!(f, "{} must not contain control characters", k.field())
            }
        }
    }
}

impl std::error::Error for NameError {}

/// Checks a name against the rules for its kind.
pub fn validate_name(kind: NameKind, name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty(kind));
    }
    if name.len() > kind.max_bytes() {
        return Err(NameError::TooLong(kind, name.len()));
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::ControlCharacter(kind));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(validate_name(NameKind::Queue, "orders").is_ok());
        assert!(validate_name(NameKind::Queue, "émojis ✓ and spaces").is_ok());
        assert_eq!(validate_name(NameKind::Queue, ""), Err(NameError::Empty(NameKind::Queue)));
        assert!(matches!(
            validate_name(NameKind::Partition, "a\nb"),
            Err(NameError::ControlCharacter(NameKind::Partition))
        ));
        let long = "x".repeat(NAME_BYTES_MAX + 1);
        let err = validate_name(NameKind::ConsumerGroup, &long).unwrap_err();
        assert!(err.is_too_long());
        assert!(err.to_string().contains("consumerGroup"));
    }
}
