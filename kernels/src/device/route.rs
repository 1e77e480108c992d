//! `moe_route`: groups the M x top-k (token, k) pairs by expert, on the
//! device, in one block.
//!
//! Each valid pair `i` (expert id `e` in `0..E`) becomes the key
//! `e << 16 | i`; invalid ones (`-1`, or any id outside `0..E`, which is
//! also counted in `invalid_count`) become `u32::MAX`. A bitonic sort of the
//! keys in shared memory orders the pairs by (expert, pair index), so the
//! slot of every pair is the same on every run: bit-reproducible. From the
//! sorted keys the block writes `sorted_pairs`, and the list of experts that
//! got at least one pair (`active`, ascending expert) with each one's slot
//! range and the index of its first column group (the FC kernels take an
//! expert's pairs `group` at a time), their number and the total groups. Nothing is read or written out of bounds,
//! whatever the ids hold.
//!
//! Shared memory: `sort_len` keys, `3 * E` words of segment bounds and group
//! prefixes, 32 words of scan scratch. Launch: 1 block of 1024 threads.

use super::arch::*;
use crate::params::RouteParams;

const INVALID: u32 = u32::MAX;

/// The routing kernel.
///
/// # Safety
/// `p` must describe device buffers of the sizes its docs give, and the
/// block must have `4 * (sort_len + 3 * n_experts + 32)` bytes of dynamic
/// shared memory.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_route(p: RouteParams) {
    // Programmatic dependent launch: the previous kernel in the stream is
    // complete (its writes visible) after this; then let the next launch.
    griddep_wait();
    griddep_launch_dependents();
    let t = tid();
    let nt = bdim();
    let keys = smem();
    let seg_start = keys + 4 * p.sort_len;
    let seg_count = seg_start + 4 * p.n_experts;
    let gfirst = seg_count + 4 * p.n_experts;
    let scratch = gfirst + 4 * p.n_experts;

    // 1. Keys, and the count of out-of-range ids.
    let mut bad = 0u32;
    let mut i = t;
    while i < p.sort_len {
        let mut key = INVALID;
        if i < p.pairs {
            let e = ldg_u32(p.topk_ids + 4 * i as u64) as i32;
            if e >= 0 && (e as u32) < p.n_experts {
                key = ((e as u32) << 16) | i;
            } else if e != -1 {
                bad += 1;
            }
        }
        sts(keys + 4 * i, key);
        i += nt;
    }
    let mut e = t;
    while e < p.n_experts {
        sts(seg_count + 4 * e, 0);
        e += nt;
    }
    if bad != 0 {
        atomic_add_u32(p.invalid_count, bad);
    }
    sync();

    // 2. Bitonic sort, ascending.
    let half = p.sort_len / 2;
    let mut size = 2;
    while size <= p.sort_len {
        let mut stride = size / 2;
        while stride > 0 {
            let mut j = t;
            while j < half {
                let lo = 2 * stride * (j / stride) + (j % stride);
                let hi = lo + stride;
                let ascending = lo & size == 0;
                let a = lds(keys + 4 * lo);
                let b = lds(keys + 4 * hi);
                if (a > b) == ascending {
                    sts(keys + 4 * lo, b);
                    sts(keys + 4 * hi, a);
                }
                j += nt;
            }
            sync();
            stride /= 2;
        }
        size *= 2;
    }

    // 3. Sorted pair indices and segment starts.
    let mut i = t;
    while i < p.pairs {
        let key = lds(keys + 4 * i);
        if key != INVALID {
            stg_u32(p.sorted_pairs + 4 * i as u64, key & 0xFFFF);
            let e = key >> 16;
            if i == 0 || lds(keys + 4 * (i - 1)) >> 16 != e {
                sts(seg_start + 4 * e, i);
            }
        }
        i += nt;
    }
    sync();
    // Segment lengths, at each segment's last key.
    let mut i = t;
    while i < p.pairs {
        let key = lds(keys + 4 * i);
        if key != INVALID {
            let e = key >> 16;
            let next = if i + 1 < p.sort_len { lds(keys + 4 * (i + 1)) } else { INVALID };
            if next == INVALID || next >> 16 != e {
                sts(seg_count + 4 * e, i + 1 - lds(seg_start + 4 * e));
            }
        }
        i += nt;
    }
    sync();

    // 4. Active experts in ascending order (one expert per thread; E <= 1024),
    //    with the prefix of their column groups.
    let e = t;
    let count = if e < p.n_experts { lds(seg_count + 4 * e) } else { 0 };
    let (pos, total) = block_exclusive_sum((count > 0) as u32, scratch);
    let (gstart, gtotal) = block_exclusive_sum(count.div_ceil(p.group), scratch);
    if e < p.n_experts {
        sts(gfirst + 4 * e, gstart);
    }
    if count > 0 {
        let rec = p.active + 16 * pos as u64;
        stg_u32(rec, e);
        stg_u32(rec + 4, lds(seg_start + 4 * e));
        stg_u32(rec + 8, count);
        stg_u32(rec + 12, gstart);
    }
    if t == 0 {
        stg_u32(p.n_active, total);
        stg_u32(p.n_active + 4, gtotal);
    }
    sync();
    // 5. The column-group tables, one slot per thread.
    let mut i = t;
    while i < p.pairs {
        let key = lds(keys + 4 * i);
        if key != INVALID {
            let e = key >> 16;
            let first = lds(seg_start + 4 * e);
            let end = first + lds(seg_count + 4 * e);
            write_group_entry(&p, i, first, lds(gfirst + 4 * e), e, key & 0xFFFF, end);
        }
        i += nt;
    }
}

/// Writes slot `i`'s entry of the column-group tables: the token row of its
/// pair, and (for a group's first slot) the group record and `u32::MAX` in
/// the group's columns past its last pair (the FC kernels skip those).
#[inline(always)]
pub(super) unsafe fn write_group_entry(
    p: &RouteParams,
    i: u32,
    first: u32,
    gstart: u32,
    e: u32,
    pair: u32,
    end_hint: u32,
) {
    let pos = i - first;
    let (g, col) = (pos / p.group, pos % p.group);
    let gi = gstart + g;
    stg_u32(p.group_rows + 4 * (gi * p.group + col) as u64, pair / p.topk);
    if col == 0 {
        let rec = p.groups + 16 * gi as u64;
        let n = if end_hint - i < p.group { end_hint - i } else { p.group };
        stg_u32(rec, e);
        stg_u32(rec + 4, i);
        stg_u32(rec + 8, n);
        stg_u32(rec + 12, 0);
        let mut c = n;
        while c < p.group {
            stg_u32(p.group_rows + 4 * (gi * p.group + c) as u64, u32::MAX);
            c += 1;
        }
    }
}
