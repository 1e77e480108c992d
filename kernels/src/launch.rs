//! Launch geometry the kernels assume and the host uses: one definition.

/// Threads of the routing block (`moe_route`, `moe_route_scan`).
pub const ROUTE_THREADS: u32 = 1024;
/// Threads per block of `moe_route_count` and `moe_route_scatter`.
pub const ROUTE_BLOCK_THREADS: u32 = 256;
/// Most blocks of the multi-block routing.
pub const ROUTE_MAX_BLOCKS: u32 = 128;

/// Blocks and pairs per block of the multi-block routing of `pairs > 0`
/// pairs: about 1024 pairs per block, at most [`ROUTE_MAX_BLOCKS`] blocks.
pub const fn route_split(pairs: u32) -> (u32, u32) {
    let want = pairs.div_ceil(1024);
    let blocks = if want < ROUTE_MAX_BLOCKS { want } else { ROUTE_MAX_BLOCKS };
    let chunk = pairs.div_ceil(blocks);
    (pairs.div_ceil(chunk), chunk)
}

/// Words of the multi-block routing's scratch (`RouteParams::hist`) for
/// `experts` experts: a row per block and 3 words per expert.
pub const fn route_hist_words(experts: u32) -> u32 {
    (ROUTE_MAX_BLOCKS + 3) * experts
}
/// Outputs per thread of `moe_combine_*`: one 16-byte piece of a y row, 8
/// values with 16-bit y (`y16`), 4 with f32. The host sizes its grid by it.
pub const fn combine_outputs_per_thread(y16: bool) -> u32 {
    if y16 {
        8
    } else {
        4
    }
}

/// Warps per block of the decode FC kernels by default: the warps split a
/// task's K up to this many ways.
pub const FC_WARPS: u32 = 4;
/// Warps per block of the decode FC kernels for small batches (`_w8`, one
/// column tile).
pub const FC_WARPS_WIDE: u32 = 8;
/// Warps per block of the 6-warp FC1 kernels (`moe4_exp = "w6"` builds):
/// K splits of 3 and 6 ([`fc_split_div`]).
pub const FC_WARPS_SIX: u32 = 6;
/// Threads per W4A4 GEMM block (8 warps).
pub const GEMM_THREADS: u32 = 256;
/// Output columns per W4A4 GEMM tile.
pub const GEMM_BN: u32 = 128;
/// K per W4A4 GEMM pipeline stage.
pub const GEMM_BK: u32 = 256;
/// W4A4 GEMM pipeline stages.
pub const GEMM_STAGES: u32 = 4;
/// Most experts the W4A4 schedule holds in shared memory.
pub const GEMM_MAX_EXPERTS: u32 = 1024;

/// Shared memory of the W4A4 GEMMs' schedule: per-expert tile prefix,
/// segment starts and ends, then 32 words.
pub const fn gemm_sched_bytes() -> u32 {
    3 * 4 * (GEMM_MAX_EXPERTS + 1) + 4 * 32
}

/// Dynamic shared memory of a W4A4 GEMM with `bm`-row tiles: the stages,
/// then the schedule.
pub const fn gemm_smem_bytes(bm: u32) -> u32 {
    GEMM_STAGES * (bm + GEMM_BN) * (GEMM_BK / 2) + gemm_sched_bytes()
}

/// Rows per tile of the `wgmma` W4A4 GEMM (sm_90a).
pub const GEMM_WG_BM: u32 = 128;
/// Bytes of one s8 weight tile of the `wgmma` W4A4 GEMM (128 rows x 256 k).
pub const GEMM_WG_S8_BYTES: u32 = GEMM_BN * GEMM_BK;

/// Staging ring stages of the `wgmma` W4A4 GEMM with `bm`-row tiles: what
/// fits next to its two s8 tiles (4, or 3 for the 256-row tiles of the
/// `moe4_exp = "w4a4bm256"` build).
pub const fn gemm_wg_stages(bm: u32) -> u32 {
    if bm > GEMM_WG_BM {
        3
    } else {
        GEMM_STAGES
    }
}

/// Bytes of the staging ring of the `wgmma` W4A4 GEMM with `bm`-row tiles.
pub const fn gemm_wg_ring_bytes(bm: u32) -> u32 {
    gemm_wg_stages(bm) * (bm + GEMM_BN) * (GEMM_BK / 2)
}

/// Shared memory the `wgmma` W4A4 GEMM with `bm`-row tiles lays out: 1 KiB
/// to align, two s8 weight tiles, the staging ring, then the schedule.
pub const fn gemm_wg_smem_for(bm: u32) -> u32 {
    1024 + 2 * GEMM_WG_S8_BYTES + gemm_wg_ring_bytes(bm) + gemm_sched_bytes()
}

/// Dynamic shared memory the host gives the `wgmma` W4A4 GEMM: the larger
/// of its two tile configurations (128 and 256 rows), so either build runs
/// with it.
pub const fn gemm_wg_smem_bytes() -> u32 {
    let (a, b) = (gemm_wg_smem_for(GEMM_WG_BM), gemm_wg_smem_for(2 * GEMM_WG_BM));
    if a > b {
        a
    } else {
        b
    }
}

/// Bytes of one decode pipeline slot of one warp, `nt` column tiles, `mt`
/// 16-row tiles per task (2: 32 rows, 4: 64 rows): a chunk's codes (1 KiB
/// per 32 rows), its scales (128 B per 32 rows) and its activations (`nt`
/// KiB), each lane's pieces where that lane reads them back.
pub const fn fc_slot_bytes(nt: u32, mt: u32) -> u32 {
    mt / 2 * (1024 + 128) + 1024 * nt
}

/// Pipeline depth (slots per warp) of the decode FC kernels with `nt`
/// column tiles: 5-6 blocks of 4 warps (NT = 1; 4 slots; shared memory
/// allows 6, FC2's registers 5), 4 blocks (NT = 2, bound by registers) or 3
/// (NT = 4) stay resident per SM. The 8-warp kernels for small batches (`_w8`,
/// NT = 1) take 3 slots: 3 blocks per SM.
pub const fn fc_stages(nt: u32, warps: u32) -> u32 {
    if nt == 1 && warps == 4 {
        4
    } else {
        3
    }
}

/// Dynamic shared memory of an FC kernel with `nt` column tiles, `warps`
/// warps, `stages` slots per warp and `mt` 16-row tiles per task: each
/// warp's ring of slots, then the reduction area (the partial tiles of all
/// warps but one).
pub const fn fc_smem_bytes(nt: u32, warps: u32, stages: u32, mt: u32) -> u32 {
    warps * stages * fc_slot_bytes(nt, mt) + fc_red_bytes(nt, warps, mt)
}

/// [`fc_smem_bytes`] of the shipped FC kernels, whose rings are
/// [`fc_stages`] deep (add the in-block routing's bytes for the `_rt`
/// kernels): what the host launches them with.
pub const fn fc_kernel_smem_bytes(nt: u32, warps: u32, mt: u32) -> u32 {
    fc_smem_bytes(nt, warps, fc_stages(nt, warps), mt)
}

/// How a decode FC grid of `blocks` blocks of `warps` warps walks `tasks`
/// tasks of `nchunks` chunks: first `whole` rounds in which each warp takes
/// a whole task (the tasks below `split_from`: warp `w` of block `b` in
/// round `r` takes task `(r x blocks + b) x warps + w`), then rounds in
/// which groups of `ks` warps of a block share each remaining task's K
/// (group `q` of block `b` in round `r` takes task `split_from + (r x blocks
/// + b) x warps / ks + q`, its warp `kp` the chunks `kp, kp + ks, ..`;
/// partial tiles summed in shared memory); `cost` is the longest queue that
/// gives, in chunk-times of one warp (a split costs about one chunk-time
/// per round for the reduction). See [`fc_split`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FcSplit {
    /// Rounds of whole tasks, one per warp.
    pub whole: u32,
    /// Tasks taken whole: `whole x blocks x warps`.
    pub split_from: u32,
    /// Warps sharing each task after them (1, 2, 4 .. `warps`).
    pub ks: u32,
    /// The longest queue, in chunk-times.
    pub cost: u32,
}

/// The [`FcSplit`] with the shortest longest queue: no whole rounds (every
/// round split `ks` ways), or all but the last one or two rounds whole and
/// only those split, so that the last, partly filled round does not leave
/// most warps idle while a few finish whole tasks. Ties keep fewer whole
/// rounds. The kernels run it on the device (from the routing's task
/// count); the host, on its estimate, to pick the kernel.
pub const fn fc_split(tasks: u32, nchunks: u32, warps: u32, blocks: u32) -> FcSplit {
    let per_round = blocks * warps;
    let full = tasks / per_round;
    let mut best = FcSplit { whole: 0, split_from: 0, ks: 1, cost: u32::MAX };
    // The candidates 0, full - 1, full do not decrease; with fewer than two
    // full rounds some repeat the one before (with fewer tasks than warps,
    // all three are 0). Each is walked once: the kernels run this first
    // thing, a good part of a warp's work in small batches.
    let mut last = u32::MAX;
    let mut i = 0;
    while i < 3 {
        let whole = match i {
            0 => 0,
            1 => full.saturating_sub(1),
            _ => full,
        };
        i += 1;
        if whole == last {
            continue;
        }
        last = whole;
        let split_from = whole * per_round;
        // Tasks per block in the split rounds: one division per walk (the
        // kernels run this first thing; ceil(ceil(a / b) / c) = ceil(a / bc)).
        let per_block = (tasks - split_from).div_ceil(blocks);
        let mut ks = 1;
        while ks <= warps {
            let rounds = per_block.div_ceil(warps / ks);
            let split = rounds.saturating_mul(nchunks.div_ceil(ks) + (ks > 1) as u32);
            let cost = whole.saturating_mul(nchunks).saturating_add(split);
            if cost < best.cost {
                best = FcSplit { whole, split_from, ks, cost };
            }
            ks *= 2;
        }
    }
    best
}

/// Most slices [`fc_slices`] considers: each is a y row per pair, so the
/// workspace's y must hold `pairs x slices` rows.
pub const FC_SLICES_MAX: u32 = 64;

/// The sliced FC2's queue (the `moe4_exp = "fc2sl"` build's `_sl`
/// kernels): `warps` in groups of `n`, each group one task per round, its
/// warp `kp` the chunks `kp, kp + n, ..`, each writing its own partial y
/// row. Returns twice the longest queue in chunk-times, counting half a
/// chunk-time per task for the switch and the f32 y stores (so it compares
/// with `2 x` [`fc_split`]`.cost`).
pub const fn fc_slices_cost2(tasks: u32, nchunks: u32, warps: u32, n: u32) -> u32 {
    let groups = warps / n;
    if groups == 0 {
        return u32::MAX;
    }
    tasks.div_ceil(groups).saturating_mul(2 * nchunks.div_ceil(n) + 1)
}

/// The slice count (2 ..= `min(nchunks, max)`) with the shortest sliced FC2
/// queue, and that queue ([`fc_slices_cost2`]); `(1, u32::MAX)` when none
/// is possible. Ties keep fewer slices (less y traffic).
pub const fn fc_slices(tasks: u32, nchunks: u32, warps: u32, max: u32) -> (u32, u32) {
    let mut best = (1, u32::MAX);
    let mut n = 2;
    while n <= nchunks && n <= max {
        let c = fc_slices_cost2(tasks, nchunks, warps, n);
        if c < best.1 {
            best = (n, c);
        }
        n += 1;
    }
    best
}

/// [`fc_split`] for blocks of any warp count (the 6-warp kernels of the
/// `moe4_exp = "w6"` build): `ks` takes every divisor of `warps` (1, 2, 3,
/// 6 for 6 warps), not only the powers of two. For 4 or 8 warps it is
/// [`fc_split`] (a unit test checks it). Kept apart so the default kernels,
/// which run `fc_split` on the device, stay as measured.
pub const fn fc_split_div(tasks: u32, nchunks: u32, warps: u32, blocks: u32) -> FcSplit {
    let per_round = blocks * warps;
    let full = tasks / per_round;
    let mut best = FcSplit { whole: 0, split_from: 0, ks: 1, cost: u32::MAX };
    let mut last = u32::MAX;
    let mut i = 0;
    while i < 3 {
        let whole = match i {
            0 => 0,
            1 => full.saturating_sub(1),
            _ => full,
        };
        i += 1;
        if whole == last {
            continue;
        }
        last = whole;
        let split_from = whole * per_round;
        let per_block = (tasks - split_from).div_ceil(blocks);
        let mut ks = 1;
        while ks <= warps {
            if warps.is_multiple_of(ks) {
                let rounds = per_block.div_ceil(warps / ks);
                let split = rounds.saturating_mul(nchunks.div_ceil(ks) + (ks > 1) as u32);
                let cost = whole.saturating_mul(nchunks).saturating_add(split);
                if cost < best.cost {
                    best = FcSplit { whole, split_from, ks, cost };
                }
            }
            ks += 1;
        }
    }
    best
}

/// Words of one warp's partial tile per lane (`mt` row tiles x `nt` column
/// tiles x 4 accumulators).
pub const fn fc_partial_words(nt: u32, mt: u32) -> u32 {
    mt * nt * 4
}

/// The reduction area: per warp but the first, its partial tile (32 lanes,
/// f32).
pub const fn fc_red_bytes(nt: u32, warps: u32, mt: u32) -> u32 {
    (warps - 1) * fc_partial_words(nt, mt) * 32 * 4
}

/// Words between two of the decode FC kernels' readiness counters
/// ([`crate::params::FcDpParams::ready`]): one counter per 128-byte line, so
/// the warps that poll different groups' counters load different lines
/// (spread over L2), not one.
pub const READY_STRIDE: u32 = 32;

/// Bytes of the readiness counters of a workspace for `pairs` (token,
/// expert) pairs: word 0 and one per column group (at most one per pair),
/// [`READY_STRIDE`] words apart.
pub const fn ready_bytes(pairs: u32) -> u64 {
    4 * READY_STRIDE as u64 * (1 + pairs as u64)
}

/// Address of readiness counter `i` (0: FC1's finished groups; `1 + g`:
/// group `g`'s rows) of the counters at `ready`.
#[inline(always)]
pub const fn ready_counter(ready: u64, i: u32) -> u64 {
    ready + 4 * (i * READY_STRIDE) as u64
}

/// Most (M x top-k) pairs a decode FC kernel routes itself in its own
/// shared memory (the `_rt` kernels, [`crate::params::FcParams::route_pairs`]):
/// beyond that its two passes over the pairs (each thread compares its
/// pair with every other) would cost more than the routing launch they
/// replace. At most the threads of a block (128).
pub const FC_ROUTE_MAX_PAIRS: u32 = 64;
/// Pairs per column group of the `_rt` kernels (one column tile).
pub const FC_ROUTE_GROUP: u32 = 8;
/// The `_rt` kernels' routing tables, at the start of their shared memory
/// (byte offsets): the active-expert and column-group counts (16 B), per
/// pair its expert and flags, per column group (at most one per pair) its
/// record (expert, first slot, pairs, 0), pairs and routing weights; the
/// kernel's own shared memory follows at [`FC_ROUTE_BYTES`].
pub const FC_RT_COUNTS: u32 = 0;
/// See [`FC_RT_COUNTS`].
pub const FC_RT_IDS: u32 = 16;
/// See [`FC_RT_COUNTS`].
pub const FC_RT_FLAGS: u32 = FC_RT_IDS + 4 * FC_ROUTE_MAX_PAIRS;
/// See [`FC_RT_COUNTS`].
pub const FC_RT_GROUPS: u32 = FC_RT_FLAGS + 4 * FC_ROUTE_MAX_PAIRS;
/// See [`FC_RT_COUNTS`].
pub const FC_RT_ROWS: u32 = FC_RT_GROUPS + 16 * FC_ROUTE_MAX_PAIRS;
/// See [`FC_RT_COUNTS`].
pub const FC_RT_WEIGHTS: u32 = FC_RT_ROWS + 4 * FC_ROUTE_GROUP * FC_ROUTE_MAX_PAIRS;
/// Bytes of the `_rt` kernels' routing tables (a multiple of 16: the
/// `cp.async` slots after them stay aligned).
pub const FC_ROUTE_BYTES: u32 = FC_RT_WEIGHTS + 4 * FC_ROUTE_GROUP * FC_ROUTE_MAX_PAIRS;
const _: () = assert!(FC_ROUTE_BYTES.is_multiple_of(16));

/// Dynamic shared memory of the routing kernel: counts, first slots,
/// cursors and first groups per expert, then the scan's 96 words.
pub const fn route_smem_bytes(experts: u32) -> u32 {
    4 * (4 * experts + 96)
}

/// Threads per prefill GEMM block (4 warps, one 32-row task each).
pub const PF_THREADS: u32 = 128;
/// Pairs per prefill tile.
pub const PF_COLS: u32 = 64;
/// Prefill pipeline stages.
pub const PF_STAGES: u32 = 4;
/// Dynamic shared memory of a prefill GEMM block: per stage 4 KiB of codes,
/// 512 B of scales, 8 KiB of activations.
pub const fn pf_smem_bytes() -> u32 {
    PF_STAGES * (4 * 1024 + 512 + PF_COLS * 2 * 64)
}

/// Threads per `wgmma` prefill block (sm_90a): two warpgroups, 8 warps,
/// one 32-row task each (256 weight rows per tile).
pub const PFW_THREADS: u32 = 256;
/// Pipeline stages of the `wgmma` prefill kernels.
pub const PFW_STAGES: u32 = 5;
/// The most pipeline stages a `wgmma` prefill build uses (the `moe4_exp =
/// "stages6"` build: loads 4 chunks ahead instead of 3); the host's shared
/// memory for these kernels covers it.
pub const PFW_STAGES_MAX: u32 = 6;
/// Pairs per tile of the mixed `wgmma` prefill kernels' narrow tiles (each
/// expert's last group of at most this many pairs; the wide tiles take
/// 128): the routing's `narrow` width.
pub const PFW_NARROW_COLS: u32 = 64;
/// Bytes of one `wgmma` prefill stage with `cols` pairs per tile: the
/// activations (`cols` rows of 128 bytes, first: 1024-byte aligned), the
/// codes of 8 tasks (8 KiB), their scales (1 KiB).
pub const fn pfw_stage_bytes(cols: u32) -> u32 {
    cols * 128 + 8 * 1024 + 8 * 128
}
/// Bytes per pair of the `wgmma` prefill epilogue's staging tile (the
/// outputs gathered in shared memory, then one
/// bulk copy per pair's row piece): FC2's 256 16-bit outputs of a tile
/// (FC1 uses [`PFW_OUT_STRIDE_FC1`]), plus 16 bytes so that the 8 pairs an
/// 8 x 8 `stmatrix` writes fall in 8 different 16-byte bank groups.
pub const PFW_OUT_STRIDE_FC2: u32 = 2 * 8 * 32 + 16;
/// [`PFW_OUT_STRIDE_FC2`] for FC1: 128 16-bit h channels per pair.
pub const PFW_OUT_STRIDE_FC1: u32 = 2 * 8 * 16 + 16;
/// Bytes of one of the three slots of the `wgmma` prefill kernels' prefetched
/// group record and pairs: the 16-byte
/// record, then 128 u32 pairs (FC1).
pub const PFW_PRE_SLOT_BYTES: u32 = 16 + 4 * 128;
/// Dynamic shared memory of a `wgmma` prefill block: the stages
/// ([`PFW_STAGES_MAX`] of them), two
/// tables of a group's pairs and routing weights (`cols` u32 + `cols` f32
/// each; FC2's epilogue), three [`PFW_PRE_SLOT_BYTES`] slots (the next
/// tiles' records), the epilogue's staging tile (`cols` x
/// [`PFW_OUT_STRIDE_FC2`]), and 1 KiB to align them.
pub const fn pfw_smem_bytes(cols: u32) -> u32 {
    PFW_STAGES_MAX * pfw_stage_bytes(cols) + 2 * 8 * cols + 3 * PFW_PRE_SLOT_BYTES + cols * PFW_OUT_STRIDE_FC2 + 1024
}

/// Pairs per tile of the 128-row `wgmma` prefill kernels (`moe_pfw*_n256`,
/// `moe_pfw*_mix256`, sm_90a): the routing's `group`.
pub const PFW256_COLS: u32 = 256;
/// Their mixed kernels' narrow width: each expert's last 1-128 pairs
/// ([`crate::groups::tail_max`]) run in groups of this many on the 256-row
/// x 64-pair loop (a 64-pair tile costs ~65 % of a 128-pair one, run 71:
/// one or two of them instead of one 128-pair tile).
pub const PFW256_NARROW_COLS: u32 = 64;
/// Pipeline stages of the 128-row kernels (the staging tile is the last
/// two).
pub const PFW256_STAGES: u32 = 5;
/// Activation bytes of a 128-row stage: 256 rows of 128 bytes.
pub const PFW256_X_BYTES: u32 = PFW256_COLS * 128;
/// Bytes of a 128-row stage: the activations, then 4 tasks' codes (the
/// scales are in an array after the stages).
pub const PFW256_STAGE_BYTES: u32 = PFW256_X_BYTES + 4 * 1024;
/// Staging-tile bytes per pair of the 128-row FC1 (64 16-bit h channels,
/// plus 16 bytes against bank conflicts).
pub const PFW256_OUT_STRIDE_FC1: u32 = 2 * 64 + 16;
/// Staging-tile bytes per pair of the 128-row FC2 (128 16-bit rows, plus 16).
pub const PFW256_OUT_STRIDE_FC2: u32 = 2 * 128 + 16;
/// Dynamic shared memory of a 128-row `wgmma` prefill block: the stages
/// and their scales (512 bytes each; the epilogue's staging tile is the
/// last two stages), two tables of a group's pairs and weights (2 KiB
/// each), three prefetch slots (a record and 256 pairs), the TMA-fed
/// FC2's two `mbarrier`s per stage (8 bytes each), 1 KiB to align.
pub const fn pfw256_smem_bytes() -> u32 {
    PFW256_STAGES * (PFW256_STAGE_BYTES + 512)
        + 2 * 8 * PFW256_COLS
        + 3 * (16 + 4 * PFW256_COLS)
        + 16 * PFW256_STAGES
        + 1024
}
/// Dynamic shared memory of the mixed 128-row kernels: the 128-row loop's
/// or the 128-pair loop's, the larger.
pub const fn pfw256_mix_smem_bytes() -> u32 {
    let (a, b) = (pfw256_smem_bytes(), pfw_smem_bytes(PFW256_NARROW_COLS));
    if a > b {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    #[test]
    fn split_by_divisors_is_fc_split_for_powers_of_two() {
        let mut x = 12345u64;
        for _ in 0..20000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let tasks = (x % 70000) as u32;
            let nchunks = 1 + (x >> 20) as u32 % 240;
            let blocks = 1 + (x >> 32) as u32 % 800;
            for warps in [4, 8] {
                assert_eq!(
                    fc_split_div(tasks, nchunks, warps, blocks),
                    fc_split(tasks, nchunks, warps, blocks),
                    "{tasks} {nchunks} {warps} {blocks}"
                );
            }
        }
        // 6 warps: splits of 3 fit where powers of two do not. DeepSeek-V3's
        // FC1 at M = 1 (1024 tasks of 112 chunks) on 528 blocks of 6 warps:
        // one round of 3-way splits, 38 + 1 chunk-times (4-warp blocks: one
        // round of 2-way splits, 56 + 1; 8-warp: 45).
        let s = fc_split_div(1024, 112, 6, 528);
        assert_eq!((s.whole, s.ks, s.cost), (0, 3, 39));
        assert_eq!(fc_split(1024, 112, 4, 792).cost, 57);
        assert_eq!(fc_split(1024, 112, 8, 396).cost, 45);
    }

    #[test]
    fn sliced_fc2_balances_few_long_tasks() {
        // Mixtral at M = 1: 256 FC2 tasks of 224 chunks on 2640 warps. The
        // in-block split leaves warps idle (8 per task: 2048 busy, 29
        // chunk-times); slices of 10 keep 2640 busy for ~23.
        assert_eq!(fc_split(256, 224, 8, 330).cost, 29);
        let (n, c2) = fc_slices(256, 224, 2640, FC_SLICES_MAX);
        assert_eq!((n, c2), (10, 47));
        assert!(c2 < 2 * 29);
        // One task per group and round, shares of ceil(chunks / n).
        assert_eq!(fc_slices_cost2(256, 224, 2640, 10), 47);
        assert_eq!(fc_slices_cost2(990, 12, 99, 3), 30 * 9);
        // More slices than warps: no group.
        assert_eq!(fc_slices_cost2(10, 12, 2, 3), u32::MAX);
        // At most `nchunks` and `max` slices; none below 2.
        assert_eq!(fc_slices(10, 1, 100, 64), (1, u32::MAX));
        assert_eq!(fc_slices(10, 64, 100, 3).0, 3);
        // Many tasks: slices buy nothing over one warp per task; the
        // sliced cost is then no better than fc_split's.
        let (_, c2) = fc_slices(48832, 32, 3168, FC_SLICES_MAX);
        assert!(c2 >= 2 * fc_split(48832, 32, 8, 396).cost);
    }

    #[test]
    fn route_split_covers_every_pair_once() {
        for pairs in [1u32, 2, 1023, 1024, 1025, 4096, 65_536, 131_071, 1 << 20] {
            let (blocks, chunk) = route_split(pairs);
            assert!((1..=ROUTE_MAX_BLOCKS).contains(&blocks), "{pairs}: {blocks}");
            assert!(blocks * chunk >= pairs && (blocks - 1) * chunk < pairs, "{pairs}: {blocks} x {chunk}");
        }
    }

    #[test]
    fn split_follows_the_shortest_longest_queue() {
        let ks_cost = |s: FcSplit| (s.ks, s.cost);
        // Qwen3 FC1 at M = 1: 384 tasks of 32 chunks on 396 8-warp blocks:
        // one task per block, its K split 8 ways.
        assert_eq!(ks_cost(fc_split(384, 32, 8, 396)), (8, 5));
        // Many tasks in whole rounds: no split, no reduction cost.
        // (Whole rounds throughout: the same walk as no whole rounds, kept.)
        assert_eq!(fc_split(15840, 112, 8, 396), FcSplit { whole: 0, split_from: 0, ks: 1, cost: 560 });
        // Fewer chunks than warps: never split past the chunks' use.
        let s = fc_split(10, 2, 8, 396);
        assert!(s.ks <= 2 && s.cost == 2, "{s:?}");
        // No tasks: nothing to wait for.
        assert_eq!(fc_split(0, 32, 4, 660).cost, 0);
        // DeepSeek-V3 FC2 at M = 16 (~22 400 tasks of 32 chunks, 792
        // 4-warp blocks): 7 whole rounds, then the 224 left split 4 ways
        // (224 + 9 chunk-times; every round split 2 ways: 15 x 17 = 255).
        assert_eq!(fc_split(22400, 32, 4, 792), FcSplit { whole: 7, split_from: 7 * 3168, ks: 4, cost: 233 });
        // Never worse than splitting every round alike.
        for (tasks, nchunks, warps, blocks) in
            [(12800u32, 112u32, 4u32, 792u32), (1024, 224, 8, 396), (4500, 45, 4, 792)]
        {
            let mut ks = 1;
            while ks <= warps {
                let alike = tasks.div_ceil(blocks * (warps / ks)) * (nchunks.div_ceil(ks) + (ks > 1) as u32);
                assert!(fc_split(tasks, nchunks, warps, blocks).cost <= alike);
                ks *= 2;
            }
        }
    }

    #[test]
    fn walk_covers_every_task_and_chunk_once() {
        for (tasks, nchunks, warps, blocks) in [
            (0u32, 4u32, 4u32, 3u32),
            (1, 4, 4, 3),
            (7, 5, 4, 3),
            (40, 9, 4, 3),
            (97, 7, 8, 5),
            (300, 3, 8, 2),
            (1000, 12, 4, 7),
        ] {
            let s = fc_split(tasks, nchunks, warps, blocks);
            assert_eq!(s.split_from, s.whole * blocks * warps);
            assert!(s.split_from <= tasks && s.ks.is_power_of_two() && s.ks <= warps);
            let mut seen = vec![0u32; (tasks * nchunks) as usize];
            // The kernel's walk (fc.rs): whole rounds, then split rounds.
            let mut mark = |task: u32, kp: u32, ks: u32| {
                let mut c = kp;
                while c < nchunks {
                    seen[(task * nchunks + c) as usize] += 1;
                    c += ks;
                }
            };
            for b in 0..blocks {
                for w in 0..warps {
                    for r in 0..s.whole {
                        mark((r * blocks + b) * warps + w, 0, 1);
                    }
                    let (q, kp, g) = (w / s.ks, w % s.ks, warps / s.ks);
                    let mut task = s.split_from + b * g + q;
                    while task < tasks {
                        mark(task, kp, s.ks);
                        task += blocks * g;
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{tasks} {nchunks} {warps} {blocks} {s:?}");
        }
    }

    #[test]
    fn shared_memory_fits_the_blocks_per_sm_the_docs_promise() {
        let sm = 228 * 1024;
        let fits = |nt, w, mt| sm / (fc_kernel_smem_bytes(nt, w, mt) + 1024);
        assert_eq!(fits(1, 4, 2), 6); // registers then allow 5-6
        assert_eq!(fits(1, 8, 2), 3);
        assert!(fits(2, 4, 2) >= 4);
        assert_eq!(fits(4, 4, 2), 3);
        // 64-row tasks: 3 blocks at NT = 2, 2 at NT = 4 (registers allow no more).
        assert_eq!(fits(2, 4, 4), 3);
        assert_eq!(fits(4, 4, 4), 2);
        assert!(gemm_wg_smem_bytes() <= 227 * 1024);
        // wgmma prefill: one block per SM, stages stay 1024-byte aligned.
        for cols in [64, 128] {
            assert!(pfw_smem_bytes(cols) <= 227 * 1024);
            assert_eq!(pfw_stage_bytes(cols) % 1024, 0);
        }
        // The staging tile's rows: 16-byte aligned (bulk copies), 8
        // consecutive ones 16 bytes apart modulo the 128 bytes of the banks.
        for stride in [PFW_OUT_STRIDE_FC1, PFW_OUT_STRIDE_FC2, PFW256_OUT_STRIDE_FC1, PFW256_OUT_STRIDE_FC2] {
            assert_eq!(stride % 128, 16);
        }
        // The 128-row x 256-pair kernels: within the limit; the staging
        // tile (FC1's or FC2's) fits in the last two stages.
        assert!(pfw256_mix_smem_bytes() <= 227 * 1024, "{}", pfw256_mix_smem_bytes());
        const { assert!(PFW256_STAGES >= 4) };
        for stride in [PFW256_OUT_STRIDE_FC1, PFW256_OUT_STRIDE_FC2] {
            assert!(PFW256_COLS * stride <= 2 * PFW256_STAGE_BYTES);
        }
        assert_eq!(PFW256_STAGE_BYTES % 1024, 0);
    }
}
