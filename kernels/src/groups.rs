//! Column groups: how the routing splits an expert's pairs into the FC
//! kernels' units of work.
//!
//! An expert with `count` pairs gets `count / group` full groups of
//! `group` pairs and, where `count % group != 0`, one last group with the
//! rest. With a *narrow* width (`narrow > 0`, the mixed prefill tiles),
//! a last group of at most `narrow` pairs is a narrow group instead: the
//! GEMM runs it as a `narrow`-wide tile rather than a `group`-wide one that
//! would be mostly empty. The routing lists every wide group first (by
//! expert), then every narrow group (by expert); each group's record holds
//! the offset of its columns in the pair and weight tables, which are
//! `group` wide for the wide groups, then `narrow` wide for the narrow ones.
//!
//! The routing kernels scan the per-expert group counts packed in one word
//! ([`pack`]): wide + narrow << [`NARROW_SHIFT`]. A sum of packed counts is
//! the packed sums while the wide groups stay below 2^22, which holds for
//! every call (at most 2^20 pairs, `MAX_PAIRS` on the host).

/// Bit where a packed group count's narrow groups start.
pub const NARROW_SHIFT: u32 = 22;
const WIDE_MASK: u32 = (1 << NARROW_SHIFT) - 1;

/// Wide and narrow groups of an expert with `count` pairs.
pub const fn split(count: u32, group: u32, narrow: u32) -> (u32, u32) {
    let group = if group == 0 { 1 } else { group };
    let rem = count % group;
    if narrow > 0 && rem > 0 && rem <= narrow {
        (count / group, 1)
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
    if narrow > 0 && g == full && rem <= narrow {
        // (rem > 0: slot pos < count lies in the last, partial group.)
        let gi = wide_total + narrow0;
        Place { group: gi, width: narrow, table: wide_total * group + narrow0 * narrow, col }
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
        for narrow in [0u32, 64] {
            let counts = [5u32, 0, 64, 65, 128, 129, 300, 1, 192, 256];
            let split_of: Vec<(u32, u32)> = counts.iter().map(|&c| split(c, 128, narrow)).collect();
            let wide_total: u32 = split_of.iter().map(|s| s.0).sum();
            let narrow_total: u32 = split_of.iter().map(|s| s.1).sum();
            let groups = (wide_total + narrow_total) as usize;
            let table_len = (wide_total * 128 + narrow_total * narrow) as usize;
            let mut cols = std::vec![0u32; groups];
            let mut widths = std::vec![0u32; groups];
            let mut seen = std::vec![false; table_len];
            let (mut w0, mut n0) = (0, 0);
            for (&c, &(w, n)) in counts.iter().zip(&split_of) {
                for pos in 0..c {
                    let p = place(pos, c, 128, narrow, w0, n0, wide_total);
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
