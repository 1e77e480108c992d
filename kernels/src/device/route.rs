//! `moe_route`: groups the M x top-k (token, k) pairs by expert, on the
//! device, in one block, for any number of pairs.
//!
//! 1. Per-expert counts of the valid pairs (expert id in `0..E`; any other
//!    id but -1 is also counted in `invalid_count`), by shared-memory
//!    atomics.
//! 2. One block-wide scan over the experts (one per thread, E <= 1024) of
//!    three values at once: the counts (each expert's first slot), whether
//!    the expert is active (its place in `active`), and its column groups
//!    (`group` pairs each: the FC kernels' unit).
//! 3. Each pair takes the next free slot of its expert (a shared atomic)
//!    and writes its entry of `sorted_pairs` and of the column-group tables.
//!
//! Within an expert the slot order depends on timing. No output does: every
//! pair's h and y are computed from its own column alone (a column of an
//! `mma` does not depend on the others), and the combine sums each token's
//! y in k order; so the layer's output is the same bit for bit on every run
//! (`tests/decode.rs` checks graph replay against eager). Nothing is read or
//! written out of bounds, whatever the ids hold.
//!
//! Shared memory: [`crate::launch::route_smem_bytes`]. Launch: 1 block of
//! 1024 threads.

use super::arch::*;
use crate::params::RouteParams;

/// The routing kernel.
///
/// # Safety
/// `p` must describe device buffers of the sizes its docs give, and the
/// block must have `route_smem_bytes(n_experts)` of dynamic shared memory
/// and at least `n_experts` threads.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_route(p: RouteParams) {
    // Programmatic dependent launch: the previous kernel in the stream is
    // complete (its writes visible) after this; then let the next launch.
    griddep_wait();
    griddep_launch_dependents();
    let t = tid();
    let nt = bdim();
    let cnt = smem();
    let start = cnt + 4 * p.n_experts;
    let cursor = start + 4 * p.n_experts;
    let gfirst = cursor + 4 * p.n_experts;
    let scratch = gfirst + 4 * p.n_experts;
    let mut e = t;
    while e < p.n_experts {
        sts(cnt + 4 * e, 0);
        sts(cursor + 4 * e, 0);
        e += nt;
    }
    sync();

    // 1. Counts.
    let mut bad = 0u32;
    let mut i = t;
    while i < p.pairs {
        let e = ldg_u32(p.topk_ids + 4 * i as u64) as i32;
        if e >= 0 && (e as u32) < p.n_experts {
            atomic_add_shared(cnt + 4 * e as u32, 1);
        } else if e != -1 {
            bad += 1;
        }
        i += nt;
    }
    if bad != 0 {
        atomic_add_u32(p.invalid_count, bad);
    }
    sync();

    // 2. First slot, place among the active experts, first column group.
    let e = t;
    let count = if e < p.n_experts { lds(cnt + 4 * e) } else { 0 };
    let ([first, pos, gstart], [_, total, gtotal]) =
        block_exclusive_sum3([count, (count > 0) as u32, count.div_ceil(p.group)], scratch);
    if e < p.n_experts {
        sts(start + 4 * e, first);
        sts(gfirst + 4 * e, gstart);
    }
    if count > 0 {
        let rec = p.active + 16 * pos as u64;
        stg_u32(rec, e);
        stg_u32(rec + 4, first);
        stg_u32(rec + 8, count);
        stg_u32(rec + 12, gstart);
    }
    if t == 0 {
        stg_u32(p.n_active, total);
        stg_u32(p.n_active + 4, gtotal);
    }
    sync();

    // 3. Each pair's slot and table entries.
    let mut i = t;
    while i < p.pairs {
        let e = ldg_u32(p.topk_ids + 4 * i as u64) as i32;
        if e >= 0 && (e as u32) < p.n_experts {
            let e = e as u32;
            let first = lds(start + 4 * e);
            let slot = first + atomic_add_shared(cursor + 4 * e, 1);
            stg_u32(p.sorted_pairs + 4 * slot as u64, i);
            write_group_entry(&p, slot, first, lds(gfirst + 4 * e), e, i, first + lds(cnt + 4 * e));
        }
        i += nt;
    }
}

/// Writes slot `i`'s entry of the column-group tables: its pair and routing
/// weight, and (for a group's first slot) the group record and the empty
/// columns past its last pair (pair `u32::MAX`, weight 0; the FC kernels
/// skip them).
#[inline(always)]
unsafe fn write_group_entry(p: &RouteParams, i: u32, first: u32, gstart: u32, e: u32, pair: u32, end: u32) {
    let pos = i - first;
    let (g, col) = (pos / p.group, pos % p.group);
    let gi = gstart + g;
    let at = (gi * p.group + col) as u64;
    stg_u32(p.group_rows + 4 * at, pair);
    stg_u32(p.group_w + 4 * at, ldg_u32(p.topk_weights + 4 * pair as u64));
    if col == 0 {
        let rec = p.groups + 16 * gi as u64;
        let n = if end - i < p.group { end - i } else { p.group };
        stg_u32(rec, e);
        stg_u32(rec + 4, i);
        stg_u32(rec + 8, n);
        stg_u32(rec + 12, 0);
        let mut c = n;
        while c < p.group {
            let at = (gi * p.group + c) as u64;
            stg_u32(p.group_rows + 4 * at, u32::MAX);
            stg_u32(p.group_w + 4 * at, 0);
            c += 1;
        }
    }
}
