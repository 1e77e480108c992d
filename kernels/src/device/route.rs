//! `moe_route`: groups the M x top-k (token, k) pairs by expert, on the
//! device, in one block, for any number of pairs; and the same in three
//! launches over many blocks for large batches (`moe_route_count`,
//! `moe_route_scan`, `moe_route_scatter`).
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
//! One block does all three for every pair (`moe_route`: the decode sizes,
//! one launch); up to 16 pairs its first warp alone does them, by shuffles
//! instead of shared memory and barriers (`route_warp`). For large batches
//! one block is the layer's bottleneck (65 536 pairs took ~230 µs), so the
//! multi-block form splits the pairs
//! into blocks of `chunk`: `moe_route_count` writes each block's per-expert
//! counts to `hist`; `moe_route_scan` (one block) turns them into each
//! block's first slot per expert (blocks in order) and does step 2;
//! `moe_route_scatter` does step 3 per block from those first slots. Both
//! forms write the same tables, up to the order of the pairs within an
//! expert.
//!
//! Within an expert the slot order depends on timing. No output does: every
//! pair's h and y are computed from its own column alone (a column of an
//! `mma` does not depend on the others), and the combine sums each token's
//! y in k order; so the layer's output is the same bit for bit on every run
//! (`tests/decode.rs` checks graph replay against eager). Nothing is read or
//! written out of bounds, whatever the ids hold.
//!
//! Shared memory: [`crate::launch::route_smem_bytes`]. Launch: `moe_route`
//! and `moe_route_scan` 1 block of [`crate::launch::ROUTE_THREADS`];
//! `moe_route_count` and `moe_route_scatter` `pairs.div_ceil(chunk)` blocks
//! of [`crate::launch::ROUTE_BLOCK_THREADS`].

use super::arch::*;
use super::trace;
use crate::groups;
use crate::launch::{FC_ROUTE_GROUP, FC_RT_COUNTS, FC_RT_FLAGS, FC_RT_GROUPS, FC_RT_IDS, FC_RT_ROWS, FC_RT_WEIGHTS};
use crate::params::{FcParams, RouteParams};
use crate::trace::TraceKernel;

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
    trace::entry(TraceKernel::Route);
    griddep_wait();
    trace::waited(TraceKernel::Route);
    griddep_launch_dependents();
    // Small batches: the first warp alone, no barriers (a uniform branch).
    if p.pairs <= ROUTE_WARP_MAX_PAIRS {
        if tid() < 32 {
            route_warp(&p);
        }
        trace::exit(TraceKernel::Route);
        return;
    }
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
    // The routing weight of this thread's first pair (`i = t`), loaded now
    // so that its latency passes during steps 1 and 2, not in step 3.
    let w_first = if t < p.pairs { ldg_u32(p.topk_weights + 4 * t as u64) } else { 0 };
    sync();

    // 1. Counts.
    count_pairs(&p, cnt, t, p.pairs, nt);
    sync();

    // 2. First slot, place among the active experts, first column group.
    // (Branch-free on `t < n_experts` around the scan's barrier: see
    // `sts_if`.)
    let mine = t < p.n_experts;
    let c = lds(cnt + 4 * if mine { t } else { 0 });
    let (first, gstart, wide_total) = scan_experts(&p, if mine { c } else { 0 }, scratch);
    sts_if(start + 4 * t, first, mine);
    sts_if(gfirst + 4 * t, gstart, mine);
    sync();

    // 3. Each pair's slot and table entries.
    let tables = GroupTables::global(&p, wide_total);
    let mut i = t;
    while i < p.pairs {
        // The routing weight: loaded before step 1 for the first pair, with
        // the id for the others.
        let w = if i == t { w_first } else { ldg_u32(p.topk_weights + 4 * i as u64) };
        if let Ok(e) = expert_of(&p, i) {
            let first = lds(start + 4 * e);
            let slot = first + atomic_add_shared(cursor + 4 * e, 1);
            stg_u32(p.sorted_pairs + 4 * slot as u64, i);
            tables.write_entry(slot, first, lds(gfirst + 4 * e), e, i, w, first + lds(cnt + 4 * e));
        }
        i += nt;
    }
    trace::exit(TraceKernel::Route);
}

/// Pairs up to which [`moe_route`] routes in its first warp alone
/// ([`route_warp`], one pair per lane). Run 138 (an H100; a form with two
/// pairs per lane, up to 64): -0.5 to -2.3 % at 2-8 pairs (DeepSeek-V3,
/// V4-Flash, Mixtral M = 1, GPT-OSS M = 2), about even at 16, and slower
/// from 32 (+0.2 to +0.8 %) to 64 pairs (+0.8 to +6 %, Qwen3 M = 8), where
/// the block form's many threads win over one warp's passes. Run 139 (this
/// form): -0.6 to -3.1 % at 2-16 pairs (V4-Flash M = 1 -3.1 %, GPT-OSS
/// M = 2 -2.6 %, DeepSeek-V3 M = 1 -1.7 %).
const ROUTE_WARP_MAX_PAIRS: u32 = 16;

/// One pair per lane of a warp (lane `i` holds pair `i`, expert `e`, NONE
/// = `u32::MAX` where the id is -1 or out of range; at most 32 pairs), as
/// [`warp_ranks`] counts them.
#[derive(Clone, Copy)]
struct WarpRanks {
    /// Valid pairs of lower experts: the expert's first slot.
    below: u32,
    /// Pairs of the same expert before this one.
    rank: u32,
    /// Pairs of the same expert.
    count: u32,
    /// Active experts below this pair's.
    pos: u32,
    /// Column groups ([`groups::pack`]ed) of the experts below.
    gbelow: u32,
    /// Active experts in all.
    active: u32,
    /// Column groups ([`groups::pack`]ed) in all.
    gtotal: u32,
}

/// The counts a routing needs, for the `n` pairs held one per lane, by
/// shuffles: first per pair the valid pairs of lower experts, those of its
/// expert before it and all of its expert; then, over the pairs that open
/// their expert (rank 0), the active experts and column groups below it
/// (`group` pairs per group, `narrow` for the narrow tails) and in all.
/// NONE is above every expert and equal to no valid one. All lanes of the
/// warp call it, with the same `n` (at most 32).
#[inline(always)]
fn warp_ranks(e: u32, n: u32, group: u32, narrow: u32) -> WarpRanks {
    const NONE: u32 = u32::MAX;
    let i = tid() % 32;
    let (mut below, mut rank, mut count) = (0u32, 0u32, 0u32);
    let mut j = 0;
    while j < n {
        let ej = shfl_idx(e, j);
        below += (ej < e) as u32;
        count += (ej == e) as u32;
        rank += (ej == e && j < i) as u32;
        j += 1;
    }
    // Nonzero exactly for the pairs that open an expert (one pair makes at
    // least one group).
    let packed = if e != NONE && rank == 0 {
        let (wide, narrow) = groups::split(count, group, narrow);
        groups::pack(wide, narrow)
    } else {
        0
    };
    let (mut pos, mut gbelow, mut active, mut gtotal) = (0u32, 0u32, 0u32, 0u32);
    let mut j = 0;
    while j < n {
        let (ej, pj) = (shfl_idx(e, j), shfl_idx(packed, j));
        let lower = pj != 0 && ej < e;
        active += (pj != 0) as u32;
        gtotal += pj;
        pos += lower as u32;
        gbelow += if lower { pj } else { 0 };
        j += 1;
    }
    WarpRanks { below, rank, count, pos, gbelow, active, gtotal }
}

/// Lane `i`'s pair of at most 32: its id's expert (NONE for -1 or an id
/// out of range; the latter added to `invalid_count` when `count_invalid`)
/// and its routing weight's bits, both loads in flight at once.
#[inline(always)]
unsafe fn lane_pair(
    ids: u64,
    weights: u64,
    n: u32,
    n_experts: u32,
    invalid_count: u64,
    count_invalid: bool,
) -> (u32, u32) {
    let i = tid() % 32;
    if i >= n {
        return (u32::MAX, 0);
    }
    let (id, w) = (ldg_u32(ids + 4 * i as u64), ldg_u32(weights + 4 * i as u64));
    match expert(id as i32, n_experts) {
        Ok(x) => (x, w),
        Err(invalid) => {
            if invalid && count_invalid {
                atomic_add_u32(invalid_count, 1);
            }
            (u32::MAX, w)
        }
    }
}

/// [`moe_route`] for at most [`ROUTE_WARP_MAX_PAIRS`] pairs, by the
/// block's first warp alone: lane `i` holds pair `i`. What the block form
/// takes from shared-memory counts and a block-wide scan over all experts
/// (barriers over 1024 threads: 2.8 µs from its wait to its end at
/// DeepSeek-V3 M = 1 in run 136's timeline, 1.6 µs this way in run 140) is
/// here [`warp_ranks`]. The same tables as the block form, with each
/// expert's slots in pair order (the block form's order there depends on
/// timing; no output depends on it). All lanes of the warp call it.
#[inline(always)]
unsafe fn route_warp(p: &RouteParams) {
    const { assert!(ROUTE_WARP_MAX_PAIRS <= 32) };
    let (i, n) = (tid() % 32, p.pairs);
    let (e, w) = lane_pair(p.topk_ids, p.topk_weights, n, p.n_experts, p.invalid_count, true);
    let r = warp_ranks(e, n, p.group, p.narrow);
    let (wide_total, narrow_total) = groups::unpack(r.gtotal, p.narrow);
    if e != u32::MAX {
        if r.rank == 0 {
            let rec = p.active + 16 * r.pos as u64;
            stg_u32(rec, e);
            stg_u32(rec + 4, r.below);
            stg_u32(rec + 8, r.count);
            stg_u32(rec + 12, groups::unpack(r.gbelow, p.narrow).0);
        }
        let slot = r.below + r.rank;
        stg_u32(p.sorted_pairs + 4 * slot as u64, i);
        GroupTables::global(p, wide_total).write_entry(slot, r.below, r.gbelow, e, i, w, r.below + r.count);
    }
    if i == 0 {
        stg_u32(p.n_active, r.active);
        stg_u32(p.n_active + 4, wide_total);
        stg_u32(p.n_active + 8, narrow_total);
    }
}

/// Step 2 for expert `tid()` (all threads of the block call it, `bdim() >=
/// n_experts`; `count` = the expert's pairs, 0 past the last expert): its
/// first slot and its first wide and narrow column groups ([`groups::pack`]ed),
/// its record in `active`, and (thread 0) `n_active`; also returns the wide
/// groups of all experts. Contains the scan's barrier (its scratch is free
/// after the next one).
#[inline(always)]
unsafe fn scan_experts(p: &RouteParams, count: u32, scratch: u32) -> (u32, u32, u32) {
    let e = tid();
    let (wide, narrow) = groups::split(count, p.group, p.narrow);
    let ([first, pos, gstart], [_, total, gtotal]) = block_exclusive_sum3(
        [count, (count > 0) as u32, groups::pack(wide, narrow)],
        scratch,
        p.n_experts.div_ceil(32),
    );
    let (wide_total, narrow_total) = groups::unpack(gtotal, p.narrow);
    if count > 0 {
        let rec = p.active + 16 * pos as u64;
        stg_u32(rec, e);
        stg_u32(rec + 4, first);
        stg_u32(rec + 8, count);
        stg_u32(rec + 12, groups::unpack(gstart, p.narrow).0);
    }
    if e == 0 {
        stg_u32(p.n_active, total);
        stg_u32(p.n_active + 4, wide_total);
        stg_u32(p.n_active + 8, narrow_total);
    }
    (first, gstart, wide_total)
}

/// Step 1 for this thread's pairs `first, first + step, ..` below `end`:
/// per-expert counts at `cnt` (shared, zeroed) by shared atomics;
/// out-of-range ids (not -1) added to `invalid_count`.
#[inline(always)]
unsafe fn count_pairs(p: &RouteParams, cnt: u32, first: u32, end: u32, step: u32) {
    let mut bad = 0u32;
    let mut i = first;
    while i < end {
        match expert_of(p, i) {
            Ok(e) => {
                atomic_add_shared(cnt + 4 * e, 1);
            }
            Err(invalid) => bad += invalid as u32,
        }
        i += step;
    }
    if bad != 0 {
        atomic_add_u32(p.invalid_count, bad);
    }
}

/// The expert of id `id`: `Ok(e)` for an id in `0..n_experts`, else
/// `Err(true)` for an out-of-range id (counted) or `Err(false)` for -1.
#[inline(always)]
pub(super) fn expert(id: i32, n_experts: u32) -> Result<u32, bool> {
    if id >= 0 && (id as u32) < n_experts {
        Ok(id as u32)
    } else {
        Err(id != -1)
    }
}

/// Pair `i`'s [`expert`].
#[inline(always)]
unsafe fn expert_of(p: &RouteParams, i: u32) -> Result<u32, bool> {
    expert(ldg_u32(p.topk_ids + 4 * i as u64) as i32, p.n_experts)
}

/// Blocks of the multi-block routing: `pairs.div_ceil(chunk)`.
#[inline(always)]
fn route_blocks(p: &RouteParams) -> u32 {
    p.pairs.div_ceil(p.chunk.max(1))
}

/// This block's pairs in the multi-block routing: `b * chunk .. end`.
#[inline(always)]
fn block_pairs(p: &RouteParams) -> (u32, u32) {
    let b0 = bid() * p.chunk;
    let end = if p.pairs - b0 < p.chunk { p.pairs } else { b0 + p.chunk };
    (b0, end)
}

/// Multi-block routing, step 1: block `b`'s per-expert counts of pairs
/// `b * chunk ..` to `hist[b * n_experts + e]`; out-of-range ids (not -1)
/// added to `invalid_count`.
///
/// # Safety
/// `p` as [`RouteParams`] documents, `chunk > 0`, `hist` holding
/// `pairs.div_ceil(chunk) * n_experts + 3 * n_experts` words; grid
/// `pairs.div_ceil(chunk)` blocks, `route_smem_bytes(n_experts)` bytes of
/// dynamic shared memory.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_route_count(p: RouteParams) {
    trace::entry(TraceKernel::RouteCount);
    griddep_wait();
    trace::waited(TraceKernel::RouteCount);
    griddep_launch_dependents();
    let (t, nt) = (tid(), bdim());
    let cnt = smem();
    let mut e = t;
    while e < p.n_experts {
        sts(cnt + 4 * e, 0);
        e += nt;
    }
    sync();
    let (b0, end) = block_pairs(&p);
    count_pairs(&p, cnt, b0 + t, end, nt);
    sync();
    let row = p.hist + 4 * (bid() * p.n_experts) as u64;
    let mut e = t;
    while e < p.n_experts {
        stg_u32(row + 4 * e as u64, lds(cnt + 4 * e));
        e += nt;
    }
    trace::exit(TraceKernel::RouteCount);
}

/// Multi-block routing, step 2: per expert (one per thread), the running
/// sum over the blocks in order replaces each count in `hist` with that
/// block's first slot of the expert, counted from the expert's first slot;
/// then the scan of `moe_route` (first slots, `active`, `n_active`), and
/// per expert (first slot, first column group, count) after the blocks'
/// rows.
///
/// # Safety
/// As [`moe_route_count`], after it; 1 block of at least `n_experts`
/// threads (at most 1024), `route_smem_bytes(n_experts)` bytes of dynamic
/// shared memory.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_route_scan(p: RouteParams) {
    trace::entry(TraceKernel::RouteScan);
    griddep_wait();
    trace::waited(TraceKernel::RouteScan);
    griddep_launch_dependents();
    let t = tid();
    let blocks = route_blocks(&p);
    // Branch-free on `t < n_experts` before the scan's barrier (see
    // `sts_if`): threads past the experts read expert 0's column and write
    // nothing.
    let mine = t < p.n_experts;
    let col = if mine { t } else { 0 };
    let mut count = 0u32;
    let mut b = 0;
    // Sixteen blocks' loads in flight at a time.
    while b < blocks {
        let mut v = [0u32; 16];
        unroll16!(16, |j| {
            let bj = b + j as u32;
            if bj < blocks {
                v[j] = ldg_u32_coherent(p.hist + 4 * (bj * p.n_experts + col) as u64);
            }
        });
        unroll16!(16, |j| {
            let bj = b + j as u32;
            if bj < blocks {
                stg_u32_if(p.hist + 4 * (bj * p.n_experts + col) as u64, count, mine);
                count += v[j];
            }
        });
        b += 16;
    }
    let count = if mine { count } else { 0 };
    let (first, gstart, _) = scan_experts(&p, count, smem());
    let ex = p.hist + 4 * (blocks * p.n_experts + 3 * col) as u64;
    stg_u32_if(ex, first, mine);
    stg_u32_if(ex + 4, gstart, mine);
    stg_u32_if(ex + 8, count, mine);
    trace::exit(TraceKernel::RouteScan);
}

/// Multi-block routing, step 3: block `b`'s pairs take the next free slot
/// of their expert from the block's first slots (`moe_route_scan`'s
/// `hist`, after the expert's first slot) and write their table entries as
/// `moe_route` does.
///
/// # Safety
/// As [`moe_route_count`], after [`moe_route_scan`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_route_scatter(p: RouteParams) {
    trace::entry(TraceKernel::RouteScatter);
    griddep_wait();
    trace::waited(TraceKernel::RouteScatter);
    griddep_launch_dependents();
    let (t, nt) = (tid(), bdim());
    let blocks = route_blocks(&p);
    let cursor = smem();
    let ex_s = cursor + 4 * p.n_experts;
    let row = p.hist + 4 * (bid() * p.n_experts) as u64;
    let ex = p.hist + 4 * (blocks * p.n_experts) as u64;
    let mut e = t;
    while e < p.n_experts {
        sts(cursor + 4 * e, ldg_u32_coherent(row + 4 * e as u64));
        e += nt;
    }
    let mut w = t;
    while w < 3 * p.n_experts {
        sts(ex_s + 4 * w, ldg_u32_coherent(ex + 4 * w as u64));
        w += nt;
    }
    sync();
    // The wide groups of all experts (`moe_route_scan`'s `n_active[1]`).
    let tables = GroupTables::global(&p, ldg_u32_coherent(p.n_active + 4));
    let (b0, end) = block_pairs(&p);
    let mut i = b0 + t;
    while i < end {
        let w = ldg_u32(p.topk_weights + 4 * i as u64);
        if let Ok(e) = expert_of(&p, i) {
            let (first, gstart, count) = (lds(ex_s + 12 * e), lds(ex_s + 12 * e + 4), lds(ex_s + 12 * e + 8));
            let slot = first + atomic_add_shared(cursor + 4 * e, 1);
            stg_u32(p.sorted_pairs + 4 * slot as u64, i);
            tables.write_entry(slot, first, gstart, e, i, w, first + count);
        }
        i += nt;
    }
    trace::exit(TraceKernel::RouteScatter);
}

/// Where the column-group tables go: global memory (the routing kernels)
/// or, with `SHARED`, the `_rt` FC kernels' own shared memory (shared
/// addresses, widened); `group` pairs per column group, or `narrow` for the
/// narrow groups ([`crate::groups`]) after the `wide_total` wide ones.
#[derive(Clone, Copy)]
struct GroupTables<const SHARED: bool> {
    groups: u64,
    rows: u64,
    w: u64,
    group: u32,
    narrow: u32,
    wide_total: u32,
}

impl GroupTables<false> {
    /// The routing kernels' tables, with `wide_total` wide groups in all.
    fn global(p: &RouteParams, wide_total: u32) -> Self {
        GroupTables { groups: p.groups, rows: p.group_rows, w: p.group_w, group: p.group, narrow: p.narrow, wide_total }
    }
}

impl<const SHARED: bool> GroupTables<SHARED> {
    #[inline(always)]
    unsafe fn put(addr: u64, v: u32) {
        if SHARED {
            sts(addr as u32, v)
        } else {
            stg_u32(addr, v)
        }
    }

    /// Writes slot `i`'s entry (the slots of expert `e` are `first..end`,
    /// its first wide and narrow groups [`groups::pack`]ed in `gstart`): its
    /// pair and routing weight (`w`, the bits of `topk_weights[pair]`, which
    /// the caller loads together with the pair's id so that the two loads'
    /// latencies overlap), and (for a group's first slot) the group
    /// record and the empty columns past its last pair (pair `u32::MAX`,
    /// weight 0; the FC kernels skip them).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn write_entry(&self, i: u32, first: u32, gstart: u32, e: u32, pair: u32, w: u32, end: u32) {
        let (wide0, narrow0) = groups::unpack(gstart, self.narrow);
        let g = groups::place(i - first, end - first, self.group, self.narrow, wide0, narrow0, self.wide_total);
        let at = (g.table + g.col) as u64;
        Self::put(self.rows + 4 * at, pair);
        Self::put(self.w + 4 * at, w);
        if g.col == 0 {
            let rec = self.groups + 16 * g.group as u64;
            let n = if end - i < g.width { end - i } else { g.width };
            Self::put(rec, e);
            Self::put(rec + 4, i);
            Self::put(rec + 8, n);
            Self::put(rec + 12, g.table);
            let mut c = n;
            while c < g.width {
                let at = (g.table + c) as u64;
                Self::put(self.rows + 4 * at, u32::MAX);
                Self::put(self.w + 4 * at, 0);
                c += 1;
            }
        }
    }
}

/// Shared-memory routing of the `_rt` decode FC kernels (small batches:
/// [`FcParams::route_pairs`] pairs, at most
/// [`crate::launch::FC_ROUTE_MAX_PAIRS`], at most
/// the block's threads): the tables of [`moe_route`] for column groups of
/// [`FC_ROUTE_GROUP`] pairs, built by every block in its own shared memory
/// (the `FC_RT_*` offsets from `smem()`), with no atomics: pair `i`
/// (thread `i`) counts, over all pairs, those of a lower expert, those of
/// its expert before it (its rank) and all of its expert; then, over the
/// pairs of lower experts, those that open a group (rank a multiple of
/// the group size); each scan reads four ids (or flags) per shared load.
/// Every pair's routing weight is loaded with its id, so the routing
/// waits on one global latency, not two. Slots are by (expert, pair
/// index): the same on every run. With `count_invalid`, out-of-range ids
/// (not -1) are added to `invalid_count`. Up to 32 pairs the first warp
/// alone builds the same tables by [`warp_ranks`] (no scans through shared
/// memory, one barrier instead of three). Contains barriers (the divergence-safe form: LLVM
/// duplicates them into the `t < n` branches): every thread of the block
/// calls it.
#[inline(always)]
pub(super) unsafe fn route_in_block(p: &FcParams, count_invalid: bool) {
    const NONE: u32 = u32::MAX;
    const G: u32 = FC_ROUTE_GROUP;
    let (t, n, base) = (tid(), p.route_pairs, smem());
    let tables = GroupTables::<true> {
        groups: (base + FC_RT_GROUPS) as u64,
        rows: (base + FC_RT_ROWS) as u64,
        w: (base + FC_RT_WEIGHTS) as u64,
        group: G,
        narrow: 0,
        wide_total: 0,
    };
    // Up to 32 pairs the first warp builds the tables alone ([`warp_ranks`],
    // one pair per lane), and one barrier publishes them.
    if n <= 32 {
        if t < 32 {
            let (e, w) = lane_pair(p.topk_ids, p.topk_weights, n, p.n_experts, p.invalid_count, count_invalid);
            let r = warp_ranks(e, n, G, 0);
            if e != NONE {
                tables.write_entry(r.below + r.rank, r.below, r.gbelow, e, t, w, r.below + r.count);
            }
            if t == 0 {
                sts(base + FC_RT_COUNTS, r.active);
                sts(base + FC_RT_COUNTS + 4, r.gtotal);
            }
        }
        sync_divergent();
        return;
    }
    let (ids, flags) = (base + FC_RT_IDS, base + FC_RT_FLAGS);
    // The scans below read four entries per shared load: the entries from
    // `n` up to a multiple of 4 are padding (no expert, no flags).
    let n4 = n.next_multiple_of(4);
    // The expert of pair t, NONE for -1 or an id out of range; its routing
    // weight loaded together with the id (both latencies at once).
    let mut e = NONE;
    let mut w = 0;
    if t < n {
        w = ldg_u32(p.topk_weights + 4 * t as u64);
        match expert(ldg_u32(p.topk_ids + 4 * t as u64) as i32, p.n_experts) {
            Ok(x) => e = x,
            Err(invalid) => {
                if invalid && count_invalid {
                    atomic_add_u32(p.invalid_count, 1);
                }
            }
        }
    }
    if t < n4 {
        sts(ids + 4 * t, e);
    }
    sync_divergent();
    let (mut below, mut rank, mut count) = (0u32, 0u32, 0u32);
    let mine = t < n && e != NONE;
    if mine {
        let mut j = 0;
        while j < n4 {
            let q = lds_v4(ids + 4 * j);
            unroll!(4, |u| {
                let ej = q[u];
                below += (ej < e) as u32;
                count += (ej == e) as u32;
                rank += (ej == e && j + (u as u32) < t) as u32;
            });
            j += 4;
        }
    }
    if t < n4 {
        // Bit 0: opens a column group; bit 1: opens its expert.
        let f = if mine { (rank % G == 0) as u32 | ((rank == 0) as u32) << 1 } else { 0 };
        sts(flags + 4 * t, f);
    }
    sync_divergent();
    if mine {
        let mut gbelow = 0u32;
        let mut j = 0;
        while j < n4 {
            let (q, f) = (lds_v4(ids + 4 * j), lds_v4(flags + 4 * j));
            unroll!(4, |u| gbelow += (q[u] < e) as u32 & f[u]);
            j += 4;
        }
        // Expert e's slots start at `below`, its groups at `gbelow`.
        tables.write_entry(below + rank, below, gbelow, e, t, w, below + count);
    }
    if t == 0 {
        let (mut active, mut groups) = (0u32, 0u32);
        let mut j = 0;
        while j < n4 {
            let f = lds_v4(flags + 4 * j);
            unroll!(4, |u| {
                groups += f[u] & 1;
                active += f[u] >> 1;
            });
            j += 4;
        }
        sts(base + FC_RT_COUNTS, active);
        sts(base + FC_RT_COUNTS + 4, groups);
    }
    sync_divergent();
}
