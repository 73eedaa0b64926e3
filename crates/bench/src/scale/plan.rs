//! How many pops a `scale` step may spend, and which partitions its named
//! pops aim at. Each pop consumes a message and every partition holds one,
//! so a step must leave the queue well stocked: a wildcard pop that has to
//! hunt for the last few full partitions would measure that hunt, and a
//! named pop on a drained partition would measure an empty answer.

use std::collections::HashSet;
use std::ops::Range;

/// Named-partition pops measured per step, for comparison with the
/// wildcard pops: enough for a p99, few enough to be quick.
pub const NAMED_POPS: usize = 200;

/// Wildcard pops for a step over `partitions` of which `consumed` have been
/// drained: the `wanted` count, but never more than half of what is left.
pub fn wildcard_pops(partitions: u64, consumed: u64, wanted: usize) -> usize {
    let left = partitions.saturating_sub(consumed);
    (wanted as u64).min(left / 2) as usize
}

/// Named pops for a step: [`NAMED_POPS`], but never more than half of the
/// still full partitions in `range`.
pub fn named_pops(range: &Range<u64>, consumed: &HashSet<u64>) -> usize {
    let full = range.clone().filter(|p| !consumed.contains(p)).count();
    NAMED_POPS.min(full / 2)
}

/// Up to `want` partitions of `range` that are not in `consumed`, spread
/// evenly over the range (so they are not all neighbours of whatever the
/// wildcard pops drained), in ascending order.
pub fn unconsumed(range: Range<u64>, want: usize, consumed: &HashSet<u64>) -> Vec<u64> {
    let len = range.end.saturating_sub(range.start);
    if want == 0 || len == 0 {
        return Vec::new();
    }
    let stride = (len / want as u64).max(1);
    let mut picked: Vec<u64> =
        (range.start..range.end).step_by(stride as usize).filter(|p| !consumed.contains(p)).take(want).collect();
    // Drained partitions on the stride leave gaps; fill them from the rest.
    if picked.len() < want {
        let chosen: HashSet<u64> = picked.iter().copied().collect();
        let more = range.filter(|p| !consumed.contains(p) && !chosen.contains(p));
        picked.extend(more.take(want - picked.len()));
        picked.sort_unstable();
    }
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_pops_leave_half_the_queue() {
        assert_eq!(wildcard_pops(1000, 0, 2000), 500);
        assert_eq!(wildcard_pops(10_000, 700, 2000), 2000);
        assert_eq!(wildcard_pops(1000, 900, 2000), 50);
        assert_eq!(wildcard_pops(1000, 1000, 2000), 0);
        assert_eq!(wildcard_pops(1000, 2000, 10), 0);
        assert_eq!(wildcard_pops(1_000_000, 0, 300), 300);
    }

    #[test]
    fn named_pops_leave_half_of_the_range() {
        let drained: HashSet<u64> = (0..500).collect();
        assert_eq!(named_pops(&(0..1000), &drained), 200);
        assert_eq!(named_pops(&(0..600), &drained), 50);
        assert_eq!(named_pops(&(0..500), &drained), 0);
        assert_eq!(named_pops(&(1000..1001), &drained), 0);
    }

    #[test]
    fn unconsumed_spreads_and_skips_drained() {
        let none = HashSet::new();
        assert_eq!(unconsumed(0..100, 4, &none), [0, 25, 50, 75]);
        assert_eq!(unconsumed(1000..1010, 20, &none), (1000..1010).collect::<Vec<_>>());
        assert!(unconsumed(0..100, 0, &none).is_empty());
        assert!(unconsumed(5..5, 3, &none).is_empty());

        let drained: HashSet<u64> = [0, 25, 26, 99].into_iter().collect();
        let got = unconsumed(0..100, 4, &drained);
        assert_eq!(got, [1, 2, 50, 75], "gaps on the stride are filled from the rest");
        assert!(got.iter().all(|p| !drained.contains(p)));

        // Everything but three drained: only those three come back.
        let drained: HashSet<u64> = (0..100).filter(|p| ![3, 40, 77].contains(p)).collect();
        assert_eq!(unconsumed(0..100, 10, &drained), [3, 40, 77]);
    }
}
