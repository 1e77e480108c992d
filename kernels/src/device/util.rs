//! `moe4_fill`: fills a buffer with hashed pseudo-random words, `(hash &
//! and_mask) | or_mask`, on the device (benchmarks build multi-GB random
//! layers this way instead of uploading them).

use super::arch::*;

/// Fills `n` u32 words.
///
/// # Safety
/// `out` holds `n` words.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe4_fill(out: u64, n: u64, seed: u32, and_mask: u32, or_mask: u32) {
    let mut i = (bid() * bdim() + tid()) as u64;
    let stride = (gdim() * bdim()) as u64;
    while i < n {
        let mut h = (i as u32) ^ ((i >> 32) as u32).wrapping_mul(0x9E37_79B9) ^ seed;
        h ^= h >> 16;
        h = h.wrapping_mul(0x7FEB_352D);
        h ^= h >> 15;
        h = h.wrapping_mul(0x846C_A68B);
        h ^= h >> 16;
        stg_u32(out + 4 * i, (h & and_mask) | or_mask);
        i += stride;
    }
}
