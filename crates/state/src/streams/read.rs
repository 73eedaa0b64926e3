//! Reads of a query's state: the rows of one partition (by keys, by
//! prefix, ripe by `windowEnd`), and the partitions holding rows, in
//! partition id order. Reads take no entry; the HTTP layer serves them on
//! the leader after a read index.

use std::ops::Bound;

use super::{Query, Row};

/// Which rows of a partition a read wants.
#[derive(Debug, Clone, Default)]
pub struct RowFilter<'a> {
    /// Empty: every row.
    pub keys: &'a [String],
    pub key_prefix: Option<&'a str>,
    /// Only rows whose `value.windowEnd` is at or before this (ms).
    pub ripe_at_or_before: Option<i64>,
}

impl RowFilter<'_> {
    fn keeps(&self, key: &str, row: &Row) -> bool {
        self.key_prefix.is_none_or(|p| key.starts_with(p))
            && self.ripe_at_or_before.is_none_or(|cut| row.window_end.is_some_and(|w| w <= cut))
    }
}

/// A partition holding state, for `state/partitions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldPartition {
    pub partition_id: u64,
    pub updated_ms: u64,
}

impl Query {
    /// The rows of `partition_id` that `filter` keeps, in key order.
    pub fn rows<'a>(&'a self, partition_id: u64, filter: &RowFilter) -> Vec<(&'a str, &'a Row)> {
        let Some(p) = self.partitions.get(&partition_id) else { return Vec::new() };
        if !filter.keys.is_empty() {
            let mut keys: Vec<&String> = filter.keys.iter().collect();
            keys.sort();
            keys.dedup();
            return keys
                .into_iter()
                .filter_map(|k| p.rows.get_key_value(k))
                .filter(|(k, r)| filter.keeps(k, r))
                .map(|(k, r)| (k.as_str(), r))
                .collect();
        }
        let range = match filter.key_prefix {
            Some(prefix) => p.rows.range::<str, _>((Bound::Included(prefix), Bound::Unbounded)),
            None => p.rows.range::<str, _>((Bound::Unbounded, Bound::Unbounded)),
        };
        range
            .take_while(|(k, _)| filter.key_prefix.is_none_or(|pre| k.starts_with(pre)))
            .filter(|(k, r)| filter.keeps(k, r))
            .map(|(k, r)| (k.as_str(), r))
            .collect()
    }

    /// Up to `limit` partitions holding rows after `after`, whose last
    /// write is at or before `untouched_since` (when given), and whether
    /// more follow.
    pub fn held_partitions(
        &self,
        after: Option<u64>,
        untouched_since: Option<u64>,
        limit: usize,
    ) -> (Vec<HeldPartition>, bool) {
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut found = Vec::new();
        for (id, p) in self.partitions.range((start, Bound::Unbounded)) {
            if p.rows.is_empty() || untouched_since.is_some_and(|t| p.updated_ms > t) {
                continue;
            }
            if found.len() == limit {
                return (found, true);
            }
            found.push(HeldPartition { partition_id: *id, updated_ms: p.updated_ms });
        }
        (found, false)
    }
}
