//! Benchmark kernels: `moe4_fill` fills a buffer with hashed pseudo-random
//! words, `(hash & and_mask) | or_mask`, on the device (benchmarks build
//! multi-GB random layers this way instead of uploading them);
//! `moe4_read_floor` is the decode benchmark's floor, the least any layer
//! kernel does.

use super::arch::*;
use crate::params::ReadFloorParams;

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

/// The decode benchmark's floor: what one kernel per layer call costs that
/// only reads the bytes the call's weights take, as a layer must: after
/// the previous kernel in the stream (programmatic dependent launch, as the
/// layer's kernels wait), one dependent load (a layer reads the routing
/// before it knows which experts' weights to read: here a word of `dep`,
/// which holds 0, offsets the reads), then `n16` 16-byte streaming loads
/// from `src` over the whole grid, four in flight per thread. Writes `out`
/// only if the loaded words fold to a value the benchmark's zero buffer
/// never gives (so the loads cannot be optimized away).
///
/// # Safety
/// `p.src` holds `p.n16` 16-byte words, `p.dep` one word (0), `p.out` one
/// word.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe4_read_floor(p: ReadFloorParams) {
    griddep_wait();
    griddep_launch_dependents();
    let d = ldg_u32_coherent(p.dep);
    let (src, n16, out) = (p.src + 16 * d as u64, p.n16, p.out);
    let stride = (gdim() * bdim()) as u64;
    let mut i = (bid() * bdim() + tid()) as u64;
    let mut acc = [0u32; 4];
    while i + 3 * stride < n16 {
        unroll!(4, |u| {
            let v = ldg_stream_v4(src + 16 * (i + u as u64 * stride));
            acc[u] ^= v[0] ^ v[1] ^ v[2] ^ v[3];
        });
        i += 4 * stride;
    }
    while i < n16 {
        let v = ldg_stream_v4(src + 16 * i);
        acc[0] ^= v[0] ^ v[1] ^ v[2] ^ v[3];
        i += stride;
    }
    let x = acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
    if x == 0x9E37_79B9 {
        stg_u32(out, x);
    }
}
