//! Where an NVFP4 block scale lives, in the three layouts met in the wild.
//!
//! For a weight with `rows` rows and `cols = K / 16` scale columns:
//! - **linear**: `[rows, cols]`, one byte each (ModelOpt checkpoints).
//! - **u32-packed**: `[rows, ceil(cols / 4)]` little-endian u32s, byte `j`
//!   of word `w` is column `4w + j` (seed 003); padding bytes are zero.
//! - **128x4 swizzled** (FlashInfer / CUTLASS, seed 004): rows padded to a
//!   multiple of 128 and columns to a multiple of 4, padding entries zero,
//!   and entry `(r, c)` at [`swizzle_offset`].

/// Rows of the swizzled layout: `rows` rounded up to 128.
#[inline]
pub const fn swizzled_rows(rows: usize) -> usize {
    rows.div_ceil(128) * 128
}

/// Scale columns of the swizzled layout: `cols` rounded up to 4.
#[inline]
pub const fn swizzled_cols(cols: usize) -> usize {
    cols.div_ceil(4) * 4
}

/// Bytes of one swizzled scale matrix (one expert).
#[inline]
pub const fn swizzled_len(rows: usize, cols: usize) -> usize {
    swizzled_rows(rows) * swizzled_cols(cols)
}

/// Offset of scale `(r, c)` in the 128x4 swizzle of a matrix with `cols`
/// scale columns:
/// `((r/128) * ceil(cols/4) + c/4) * 512 + (r%32)*16 + ((r%128)/32)*4 + c%4`.
#[inline]
pub const fn swizzle_offset(r: usize, c: usize, cols: usize) -> usize {
    ((r / 128) * cols.div_ceil(4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4
}

/// The `(r, c)` stored at `off` of the swizzle (the inverse of
/// [`swizzle_offset`]); padding entries map to rows/columns past the real ones.
#[inline]
pub const fn unswizzle(off: usize, cols: usize) -> (usize, usize) {
    let tile = off / 512;
    let within = off % 512;
    let col_tiles = cols.div_ceil(4);
    let (row_tile, col_tile) = (tile / col_tiles, tile % col_tiles);
    let r = row_tile * 128 + ((within % 16) / 4) * 32 + within / 16;
    let c = col_tile * 4 + within % 4;
    (r, c)
}

/// Words per row of the u32-packed layout.
#[inline]
pub const fn packed_words(cols: usize) -> usize {
    cols.div_ceil(4)
}

/// Scale `c` of a u32-packed row.
#[inline]
pub fn packed_get(row: &[u32], c: usize) -> u8 {
    (row[c / 4] >> ((c % 4) * 8)) as u8
}

/// Packs four scales into a word, byte `j` = column `4w + j`.
#[inline]
pub fn pack_u32(bytes: [u8; 4]) -> u32 {
    u32::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec;

    fn formula(r: usize, c: usize, cols: usize) -> usize {
        // Written out independently of swizzle_offset, as DESIGN.md §3 gives it.
        let col_tiles = cols.div_ceil(4);
        ((r / 128) * col_tiles + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4
    }

    #[test]
    fn swizzle_is_a_bijection_onto_the_padded_matrix() {
        // Awkward sizes: rows not a multiple of 128, columns not of 4.
        for &(rows, cols) in &[(1, 1), (7, 3), (129, 5), (300, 180), (256, 4), (2880, 180)] {
            let len = swizzled_len(rows, cols);
            let mut seen = vec![false; len];
            for r in 0..swizzled_rows(rows) {
                for c in 0..swizzled_cols(cols) {
                    let off = swizzle_offset(r, c, cols);
                    assert_eq!(off, formula(r, c, cols));
                    assert!(off < len, "({r},{c}) -> {off} >= {len}");
                    assert!(!seen[off], "({r},{c}) collides at {off}");
                    seen[off] = true;
                    assert_eq!(unswizzle(off, cols), (r, c));
                }
            }
            assert!(seen.iter().all(|&s| s), "{rows}x{cols}: not onto");
        }
    }

    #[test]
    fn first_entries_match_the_formula_by_hand() {
        // Row 0: columns 0..3 are bytes 0..3; row 1 starts at 16; row 32 at 4.
        assert_eq!(swizzle_offset(0, 3, 8), 3);
        assert_eq!(swizzle_offset(1, 0, 8), 16);
        assert_eq!(swizzle_offset(32, 0, 8), 4);
        assert_eq!(swizzle_offset(0, 4, 8), 512);
        assert_eq!(swizzle_offset(128, 0, 8), 1024);
        assert_eq!(swizzle_offset(127, 7, 8), 512 + 31 * 16 + 3 * 4 + 3);
    }

    #[test]
    fn packed_scales_are_little_endian() {
        let w = pack_u32([1, 2, 3, 4]);
        assert_eq!(w, 0x0403_0201);
        assert_eq!(packed_get(&[w, 0x99], 2), 3);
        assert_eq!(packed_get(&[w, 0x99], 4), 0x99);
        assert_eq!(packed_words(5), 2);
    }
}
