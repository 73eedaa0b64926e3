//! The records this crate writes to the WAL, tagged with their Raft group.
//!
//! bincode writes an enum's variant index (a `u32`) and no names, so the
//! variants below are the format: never reorder them, only add at the end.
//! Group 0 writes the two untagged variants a single-group log has always
//! written, so a log written before groups existed is group 0's log, and
//! group 0 of a multi-group log reads back with the same bytes.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::types::{LogId, RaftEntry};

/// One WAL record. `Cow` lets appends encode an entry they only borrow
/// (entries reach megabytes) while recovery decodes owned ones.
#[derive(Serialize, Deserialize)]
enum WalRecord<'a> {
    /// Variant 0: an entry of group 0.
    Entry(Cow<'a, RaftEntry>),
    /// Variant 1: group 0's entries at and after `since` were dropped (a
    /// conflicting tail).
    Truncate { since: u64 },
    /// Variant 2: an entry of group `group` (never 0).
    GroupEntry { group: u16, entry: Cow<'a, RaftEntry> },
    /// Variant 3: group `group`'s entries at and after `since` were dropped.
    GroupTruncate { group: u16, since: u64 },
}

/// A decoded record, whichever variant carried it.
// Lives only between decoding and use; boxing would cost an allocation per
// record read.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
pub enum Record {
    Entry(RaftEntry),
    Truncate { since: u64 },
}

pub fn encode_entry(group: u16, entry: &RaftEntry) -> Vec<u8> {
    let entry = Cow::Borrowed(entry);
    encode(&if group == 0 { WalRecord::Entry(entry) } else { WalRecord::GroupEntry { group, entry } })
}

pub fn encode_truncate(group: u16, since: u64) -> Vec<u8> {
    encode(&if group == 0 { WalRecord::Truncate { since } } else { WalRecord::GroupTruncate { group, since } })
}

fn encode(record: &WalRecord) -> Vec<u8> {
    bincode::serialize(record).expect("WAL records always encode")
}

/// The group a record belongs to, and what it says.
pub fn decode(bytes: &[u8]) -> Result<(u16, Record), bincode::Error> {
    Ok(match bincode::deserialize::<WalRecord>(bytes)? {
        WalRecord::Entry(e) => (0, Record::Entry(e.into_owned())),
        WalRecord::Truncate { since } => (0, Record::Truncate { since }),
        WalRecord::GroupEntry { group, entry } => (group, Record::Entry(entry.into_owned())),
        WalRecord::GroupTruncate { group, since } => (group, Record::Truncate { since }),
    })
}

/// What opening the WAL needs of a record: its group, and an entry's log
/// id or a truncation's first index. An entry's log id leads its encoding,
/// so the rest (the command, up to megabytes) is not decoded: at 10,000,000
/// partitions decoding every entry in full took 7 s of a restart, only to
/// be decoded again when it is replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordHead {
    Entry(LogId),
    Truncate { since: u64 },
}

/// The leading fields of [`WalRecord`], variant for variant; bincode reads
/// them and leaves the payload's bytes unread.
#[derive(Deserialize)]
enum WalRecordHead {
    Entry(EntryHead),
    Truncate { since: u64 },
    GroupEntry { group: u16, entry: EntryHead },
    GroupTruncate { group: u16, since: u64 },
}

/// A [`RaftEntry`]'s first field.
#[derive(Deserialize)]
struct EntryHead {
    log_id: LogId,
}

/// The group a record belongs to, and its head ([`RecordHead`]).
pub fn decode_head(bytes: &[u8]) -> Result<(u16, RecordHead), bincode::Error> {
    Ok(match bincode::deserialize::<WalRecordHead>(bytes)? {
        WalRecordHead::Entry(e) => (0, RecordHead::Entry(e.log_id)),
        WalRecordHead::Truncate { since } => (0, RecordHead::Truncate { since }),
        WalRecordHead::GroupEntry { group, entry } => (group, RecordHead::Entry(entry.log_id)),
        WalRecordHead::GroupTruncate { group, since } => (group, RecordHead::Truncate { since }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::LogId;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> RaftEntry {
        RaftEntry { log_id: LogId::new(CommittedLeaderId::new(3, 1), index), payload: EntryPayload::Blank }
    }

    /// The enum single-group logs were written with, before groups existed.
    #[allow(clippy::large_enum_variant)]
    #[derive(Serialize)]
    enum SingleGroupRecord {
        Entry(RaftEntry),
        Truncate { since: u64 },
    }

    #[test]
    fn group_0_writes_the_single_group_format() {
        let old = bincode::serialize(&SingleGroupRecord::Entry(entry(7))).unwrap();
        assert_eq!(encode_entry(0, &entry(7)), old);
        let old = bincode::serialize(&SingleGroupRecord::Truncate { since: 9 }).unwrap();
        assert_eq!(encode_truncate(0, 9), old);
    }

    #[test]
    fn variant_indexes_are_the_format() {
        let variant = |b: &[u8]| u32::from_le_bytes(b[..4].try_into().unwrap());
        assert_eq!(variant(&encode_entry(0, &entry(1))), 0);
        assert_eq!(variant(&encode_truncate(0, 1)), 1);
        let tagged = encode_entry(5, &entry(1));
        assert_eq!(variant(&tagged), 2);
        assert_eq!(u16::from_le_bytes(tagged[4..6].try_into().unwrap()), 5, "the group follows the variant");
        let tagged = encode_truncate(5, 1);
        assert_eq!(variant(&tagged), 3);
        assert_eq!(u16::from_le_bytes(tagged[4..6].try_into().unwrap()), 5);
    }

    #[test]
    fn records_round_trip_with_their_group() {
        for group in [0, 1, 63, u16::MAX] {
            assert_eq!(decode(&encode_entry(group, &entry(4))).unwrap(), (group, Record::Entry(entry(4))));
            assert_eq!(decode(&encode_truncate(group, 12)).unwrap(), (group, Record::Truncate { since: 12 }));
        }
    }

    /// The head read alone agrees with the whole record, whatever the
    /// entry carries.
    #[test]
    fn a_records_head_is_what_the_whole_record_says() {
        use regina_state::{Command, Entry};
        let with_command = RaftEntry {
            log_id: LogId::new(CommittedLeaderId::new(7, 2), 41),
            payload: EntryPayload::Normal(Entry { now_ms: 5, command: Command::Noop }.into()),
        };
        for group in [0, 1, 63, u16::MAX] {
            for e in [entry(4), with_command.clone()] {
                let bytes = encode_entry(group, &e);
                assert_eq!(decode_head(&bytes).unwrap(), (group, RecordHead::Entry(e.log_id)));
            }
            assert_eq!(decode_head(&encode_truncate(group, 12)).unwrap(), (group, RecordHead::Truncate { since: 12 }));
        }
        assert!(decode_head(&[9, 0, 0, 0]).is_err(), "an unknown variant");
        assert!(decode_head(&encode_entry(0, &entry(4))[..10]).is_err(), "a cut log id");
    }
}
