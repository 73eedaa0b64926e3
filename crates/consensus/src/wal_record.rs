//! The records this crate writes to the WAL, tagged with their Raft group.
//!
//! bincode writes an enum's variant index (a `u32`) and no names, so the
//! variants below are the format: never reorder them, only add at the end.
//! Group 0 writes the two untagged variants a single-group log has always
//! written, so a log written before groups existed is group 0's log, and
//! group 0 of a multi-group log reads back with the same bytes.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::types::RaftEntry;

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
}
