//! Column groups: how the routing splits an expert's pairs into the FC
//! kernels' units of work.
//!
//! An expert with `count` pairs gets `count / group` full groups of
//! `group` pairs and, where `count % group != 0`, one last group with the
//! rest. With a *narrow* width (`narrow > 0`, the mixed prefill tiles),
//! a rest of at most half a wide group ([`tail_max`]) goes into narrow
//! groups instead, `narrow` pairs each (the last one with what is left):
//! the GEMM runs them as `narrow`-wide tiles rather than one `group`-wide
//! tile that would be mostly empty. (A narrow tile still decodes all its
//! weight rows, so two of them cost more than one twice as wide: the
//! mixed 128 / 64 kernels have `tail_max = narrow`, one narrow group at
//! most; the 256 / 64 ones up to two.) The routing lists every wide group
//! first (by expert), then every narrow group (by expert); each group's
//! record holds the offset of its columns in the pair and weight tables,
//! which are `group` wide for the wide groups, then `narrow` wide for the
//! narrow ones.
//!
//! The routing kernels scan the per-expert group counts packed in one word
//! ([`pack`]): wide + narrow << [`NARROW_SHIFT`]. A sum of packed counts is
//! the packed sums while both stay in their fields: with narrow groups the
//! wide ones are at least 128 pairs wide, so at most 2^13 of them (at most
//! 2^20 pairs, `MAX_PAIRS` on the host), and the narrow ones at most 2 per
//! expert (2048 with the host's 1024 experts) below 2^(32 - NARROW_SHIFT).
//! Without narrow groups the word is the plain count.

/// Bit where a packed group count's narrow groups start.
pub const NARROW_SHIFT: u32 = 20;
const WIDE_MASK: u32 = (1 << NARROW_SHIFT) - 1;

/// The largest rest (`count % group`) that goes into narrow groups: half a
/// wide group (0 without narrow groups).
pub const fn tail_max(group: u32, narrow: u32) -> u32 {
    if narrow > 0 {
        group / 2
    } else {
        0
    }
}

/// Narrow groups per expert at most: those of a rest of [`tail_max`] pairs.
pub const fn narrow_max(group: u32, narrow: u32) -> u32 {
    if narrow > 0 {
        tail_max(group, narrow).div_ceil(narrow)
    } else {
        0
    }
}

/// Wide and narrow groups of an expert with `count` pairs.
pub const fn split(count: u32, group: u32, narrow: u32) -> (u32, u32) {
    let group = if group == 0 { 1 } else { group };
    let rem = count % group;
    // (`narrow > 0` first: where it is a constant 0 the branch folds away.)
    if narrow > 0 && rem > 0 && rem <= tail_max(group, narrow) {
        (count / group, rem.div_ceil(narrow))
    } else {
        (count.div_ceil(group), 0)
    }
}

/// `wide` and `narrow` group counts in one word (see the module docs).
pub const fn pack(wide: u32, narrow: u32) -> u32 {
    wide | narrow << NARROW_SHIFT
}

/// The (wide, narrow) counts of a [`pack`]ed word, or of a sum of them.
/// Without narrow groups the word is the plain count.
pub const fn unpack(packed: u32, narrow: u32) -> (u32, u32) {
    if narrow > 0 {
        (packed & WIDE_MASK, packed >> NARROW_SHIFT)
    } else {
        (packed, 0)
    }
}

/// Where slot `pos` (0-based among its expert's `count` pairs) of an expert
/// goes, for an expert whose wide groups start at index `wide0`, narrow ones
/// at `narrow0` (both as counted over the experts before it), with
/// `wide_total` wide groups over all experts: (the group's index in the
/// group list, its width, its first column's offset in the tables, the
/// column in the group).
pub const fn place(pos: u32, count: u32, group: u32, narrow: u32, wide0: u32, narrow0: u32, wide_total: u32) -> Place {
    let group = if group == 0 { 1 } else { group };
    let (g, col) = (pos / group, pos % group);
    let (full, rem) = (count / group, count % group);
    if narrow > 0 && g == full && rem <= tail_max(group, narrow) {
        // (rem > 0: slot pos < count lies in the last, partial group.)
        // Narrow group `j` of the rest holds its columns `j * narrow ..`.
        let j = col / narrow;
        let gi = wide_total + narrow0 + j;
        Place { group: gi, width: narrow, table: wide_total * group + (narrow0 + j) * narrow, col: col % narrow }
    } else {
        let gi = wide0 + g;
        Place { group: gi, width: group, table: gi * group, col }
    }
}

/// One slot's group, as [`place`] finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// Index in the group list (the routing's `groups` records).
    pub group: u32,
    /// The group's width (columns of its tables).
    pub width: u32,
    /// Offset of the group's first column in the pair and weight tables.
    pub table: u32,
    /// Column of the slot in its group.
    pub col: u32,
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn narrow_groups_take_small_remainders_only() {
        assert_eq!(split(0, 128, 64), (0, 0));
        assert_eq!(split(1, 128, 64), (0, 1));
        assert_eq!(split(64, 128, 64), (0, 1));
        assert_eq!(split(65, 128, 64), (1, 0));
        assert_eq!(split(128, 128, 64), (1, 0));
        assert_eq!(split(129, 128, 64), (1, 1));
        assert_eq!(split(300, 128, 64), (2, 1));
        assert_eq!(split(448, 128, 64), (3, 1));
        assert_eq!(split(449, 128, 64), (4, 0));
        // Without narrow groups: the plain ceiling.
        assert_eq!(split(129, 128, 0), (2, 0));
        assert_eq!(split(7, 8, 0), (1, 0));
        // 256-wide groups with 64-wide narrow ones: a rest of up to 128
        // pairs in one or two narrow groups.
        assert_eq!(split(1, 256, 64), (0, 1));
        assert_eq!(split(64, 256, 64), (0, 1));
        assert_eq!(split(65, 256, 64), (0, 2));
        assert_eq!(split(128, 256, 64), (0, 2));
        assert_eq!(split(129, 256, 64), (1, 0));
        assert_eq!(split(256, 256, 64), (1, 0));
        assert_eq!(split(270, 256, 64), (1, 1));
        assert_eq!(split(600, 256, 64), (2, 2));
        assert_eq!(split(700, 256, 64), (3, 0));
        assert_eq!((narrow_max(256, 64), narrow_max(128, 64), narrow_max(8, 0)), (2, 1, 0));
    }

    /// The fields of a sum of packed counts stay apart at the limits the
    /// host allows: 2^20 pairs in groups of at least 128, 1024 experts with
    /// [`narrow_max`] narrow groups each.
    #[test]
    fn packed_fields_hold_the_host_limits() {
        let (wide, narrow) = ((1u32 << 20) / 128, 1024 * narrow_max(256, 64));
        assert_eq!(unpack(pack(wide, narrow), 64), (wide, narrow));
        assert!(narrow < 1 << (32 - NARROW_SHIFT) && wide <= WIDE_MASK);
    }

    #[test]
    fn packed_counts_sum_as_pairs() {
        let counts = [0u32, 1, 64, 65, 128, 129, 300, 191, 192, 4000];
        let (mut w, mut n, mut packed) = (0, 0, 0);
        for c in counts {
            let (a, b) = split(c, 128, 64);
            w += a;
            n += b;
            packed += pack(a, b);
        }
        assert_eq!(unpack(packed, 64), (w, n));
        assert_eq!(unpack(pack(123, 0), 0), (123, 0));
    }

    /// Every slot of every expert lands in exactly one (group, column); the
    /// wide groups come first, each table range is its group's own, and no
    /// group is empty or past its width.
    #[test]
    fn places_cover_every_slot_once() {
        for (group, narrow) in [(128u32, 0u32), (128, 64), (256, 64), (256, 128)] {
            let counts = [5u32, 0, 64, 65, 128, 129, 300, 1, 192, 256, 257, 320, 385, 600];
            let split_of: Vec<(u32, u32)> = counts.iter().map(|&c| split(c, group, narrow)).collect();
            let wide_total: u32 = split_of.iter().map(|s| s.0).sum();
            let narrow_total: u32 = split_of.iter().map(|s| s.1).sum();
            let groups = (wide_total + narrow_total) as usize;
            let table_len = (wide_total * group + narrow_total * narrow) as usize;
            let mut cols = std::vec![0u32; groups];
            let mut widths = std::vec![0u32; groups];
            let mut seen = std::vec![false; table_len];
            let (mut w0, mut n0) = (0, 0);
            for (&c, &(w, n)) in counts.iter().zip(&split_of) {
                for pos in 0..c {
                    let p = place(pos, c, group, narrow, w0, n0, wide_total);
                    assert!(p.col < p.width);
                    assert_eq!(p.group >= wide_total, p.width == narrow && narrow > 0);
                    let at = (p.table + p.col) as usize;
                    assert!(!seen[at], "slot {pos} of {c}");
                    seen[at] = true;
                    cols[p.group as usize] += 1;
                    widths[p.group as usize] = p.width;
                }
                w0 += w;
                n0 += n;
            }
            for (g, (&c, &w)) in cols.iter().zip(&widths).enumerate() {
                assert!(c > 0 && c <= w, "group {g}: {c} of {w}");
            }
        }
    }
}
