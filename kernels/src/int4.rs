//! Signed 4-bit integers (two's complement, -8..=7), two per byte, element
//! `2i` in the low nibble. The W4A4 GEMM's A is `[M, K/2]` and B is
//! `[E, N, K/2]` in this packing (K contiguous).

/// Smallest INT4 value.
pub const INT4_MIN: i8 = -8;
/// Largest INT4 value (symmetric quantizers use -7..=7).
pub const INT4_MAX: i8 = 7;

/// Packs two values in -8..=7 (`lo` = element `2i`). Out-of-range inputs
/// keep only their low 4 bits; check with [`in_range`] first.
#[inline]
pub fn pack_pair(lo: i8, hi: i8) -> u8 {
    ((lo as u8) & 15) | (((hi as u8) & 15) << 4)
}

/// Sign-extends a nibble (the low 4 bits of `n`).
#[inline]
pub fn from_nibble(n: u8) -> i8 {
    (((n & 15) << 4) as i8) >> 4
}

/// Unpacks a byte into (element `2i`, element `2i + 1`).
#[inline]
pub fn unpack_pair(b: u8) -> (i8, i8) {
    (from_nibble(b), from_nibble(b >> 4))
}

/// Element `i` of a packed row.
#[inline]
pub fn value_at(bytes: &[u8], i: usize) -> i8 {
    from_nibble(bytes[i / 2] >> ((i & 1) * 4))
}

/// True if `v` fits in INT4.
#[inline]
pub fn in_range(v: i32) -> bool {
    (INT4_MIN as i32..=INT4_MAX as i32).contains(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_pairs_round_trip() {
        for lo in INT4_MIN..=INT4_MAX {
            for hi in INT4_MIN..=INT4_MAX {
                let b = pack_pair(lo, hi);
                assert_eq!(unpack_pair(b), (lo, hi));
                assert_eq!(value_at(&[b], 0), lo);
                assert_eq!(value_at(&[b], 1), hi);
            }
        }
    }

    #[test]
    fn nibble_layout() {
        assert_eq!(pack_pair(-1, 0), 0x0F);
        assert_eq!(pack_pair(0, -8), 0x80);
        assert_eq!(pack_pair(7, 1), 0x17);
        assert!(in_range(-8) && in_range(7) && !in_range(8) && !in_range(-9));
    }
}
