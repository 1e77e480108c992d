//! `moe_pfw1_*`, `moe_pfw2_*`: the prefill grouped GEMMs on Hopper's
//! warpgroup MMA (`wgmma`, sm_90a builds).
//!
//! **Tile.** A block is two warpgroups (8 warps) and computes 256 weight
//! rows (8 tasks of the [`crate::tile`] layout, one per warp) x `COLS`
//! (64 or 128) of an expert's pairs. As in the `mma.sync` prefill kernels
//! the weights are the A operand: each warp decodes its task's 32 rows per
//! 64-k chunk into registers (the `mma.m16n8k16` A fragments, which are
//! `wgmma`'s A-from-registers fragments too), and warpgroup `w` issues, per
//! k-step, two `m64 x COLS x k16` `wgmma`s (the two 16-row tiles of its
//! four tasks). The activations are B, read by `wgmma` from shared memory.
//!
//! **The k permutation.** The weight layout gives lane `t` the k
//! `16t + 4s .. 16t + 4s + 4` of k-step `s`; B must follow, and `wgmma`
//! reads each k-step's 32 bytes of a B row in order. So the activations are
//! read in the [`crate::tile::wgmma_permuted`] order (word `8t + m` of each
//! 64-k chunk at word `4m + t`): FC1 from a permuted copy of x that
//! `moe_permute_x` writes first, FC2 from h, which FC1's epilogue stores
//! permuted. Rows are then copied with 16-byte `cp.async`s into 128-byte
//! rows with the 128-byte swizzle the descriptor names
//! ([`super::wgmma::desc_sw128`]).
//!
//! **Pipeline.** Per chunk a stage holds the activations, the 8 tasks'
//! codes (8 KiB) and scales (1 KiB); [`PFW_STAGES`] stages, loads issued
//! `PFW_STAGES - 2` chunks ahead. Each k-step's A registers are reused four
//! groups later (`wgmma.wait_group 3` before they are rewritten), so the
//! decode of the next k-steps overlaps the running `wgmma`s; a barrier per
//! chunk (after which every warpgroup has retired the chunk two back) frees
//! the stage the next loads overwrite. After a tile's last chunk (and a
//! barrier) the next tile's first `PFW_STAGES - 2` chunks are issued
//! before this tile's epilogue, so their latency hides behind its stores.
//!
//! **Mixed widths** (`moe_pfw*_mix`): with the routing's narrow groups
//! ([`crate::groups`]), the 128-pair tiles and then the 64-pair ones (each
//! expert's last group of at most 64 pairs) form one sequence of tiles over
//! the grid; a block runs the two tile loops one after the other.
//!
//! **Work and epilogues** as the `mma.sync` prefill kernels
//! ([`super::prefill`]): tiles = (column group of an active expert, 256-row
//! block), blocks persistent; FC1 writes h (permuted) with the gated
//! activation, FC2 alpha2 x routing weight x acc to y, with the group's
//! pairs and routing weights (the routing's `group_rows`, `group_w`, from
//! the group record's table offset) copied to shared memory with the tile's
//! first chunk (two tables, by tile parity: the next tile's is written
//! during this tile's epilogue). The epilogue
//! gathers a tile's outputs in a shared staging tile (FC2: `stmatrix
//! .trans`, 8 pairs x 8 rows per instruction) and sends each pair's row
//! piece with one `cp.async.bulk`, whose writes overlap the next tile
//! (FC2 with f32 y stores directly), and the next tiles' group
//! records and pair indices into shared memory ([`prefetch_record`]).

use super::arch::*;
use super::fc::{
    dequant_step, epilogue_fc1, epilogue_fc2_with, global_scales, lane_scales, post, stage_fc1, stage_fc2,
};
use super::wgmma;
use crate::launch::{
    pfw_stage_bytes, PFW_NARROW_COLS, PFW_OUT_STRIDE_FC1, PFW_OUT_STRIDE_FC2, PFW_STAGES, PFW_STAGES_MAX, PFW_THREADS,
};
use crate::params::{FcParams, PermuteParams};
use crate::tile::{CHUNK_CODE_BYTES, CHUNK_SCALE_BYTES, KCHUNK, MTILES, TASK_ROWS};

const WARPS: u32 = PFW_THREADS / 32;
/// Pipeline stages: [`PFW_STAGES`], or (the `moe4_exp = "stages6"` build)
/// [`PFW_STAGES_MAX`].
const STAGES: u32 = if cfg!(moe4_exp = "stages6") { PFW_STAGES_MAX } else { PFW_STAGES };
const CODE_BYTES: u32 = WARPS * CHUNK_CODE_BYTES as u32; // 8 KiB
/// Chunks per iteration of the main loop.
const UNROLL: u32 = 4;

/// FC1's reciprocal of top-k for [`token_of`] (FC2: unused, 0).
#[inline(always)]
pub(super) fn topk_reciprocal<const FC1: bool>(p: &FcParams) -> u32 {
    if FC1 {
        crate::fastdiv::reciprocal(p.topk)
    } else {
        0
    }
}

/// The token of FC1's `pair` (`pair / topk`) by the reciprocal `inv`
/// ([`topk_reciprocal`]), worked out once per tile switch for all of a
/// thread's rows.
#[inline(always)]
pub(super) fn token_of(pair: u32, topk: u32, inv: u32) -> u32 {
    crate::fastdiv::div_by(pair, topk, inv)
}
/// One tile (a 256-row block of a column group) as this thread sees it:
/// the work, and this thread's copy sources at chunk 0 (chunk `c` adds `c` x
/// 128 bytes of activations, `c` x 1 KiB of codes, `c` x 128 bytes of
/// scales) with whether each is valid, worked out once per tile so a
/// chunk's copies are an add and a `cp.async` each. Invalid pieces (columns
/// past the group's pairs, warps past the expert's tasks) are zero-filled
/// and read nothing, from an in-bounds address.
struct Tile<const RPT: usize> {
    /// The group's first column in the pair and weight tables.
    tab: u32,
    /// Expert.
    e: u32,
    /// The group's first slot and pairs.
    slot0: u32,
    n_cols: u32,
    /// The block's first task and its number of tasks (at most [`WARPS`]).
    task0: u32,
    ntask: u32,
    xsrc: [u64; RPT],
    xok: [bool; RPT],
    csrc: [u64; 2],
    cok: [bool; 2],
    ssrc: u64,
    sok: bool,
}

impl<const RPT: usize> Tile<RPT> {
    /// Tile `tile` of `tpb` 256-row blocks per group, counted from group
    /// `g0`; `tpe` tasks per expert, `nchunks` chunks. The block's first
    /// tile: its group record (and, FC1, its columns' pairs) read from
    /// global memory.
    #[inline(always)]
    unsafe fn new<const FC1: bool>(p: &FcParams, g0: u32, tile: u32, tpb: u32, tpe: u32, nchunks: u32) -> Tile<RPT> {
        let rec = p.groups + 16 * (g0 + tile / tpb) as u64;
        let record = (ldg_u32_coherent(rec), ldg_u32_coherent(rec + 4), ldg_u32_coherent(rec + 8));
        let tab = ldg_u32_coherent(rec + 12);
        let pair = |slot: u32, _r: u32| ldg_u32_coherent(p.sorted_pairs + 4 * slot as u64);
        Self::from_record::<FC1>(p, (record.0, record.1, record.2, tab), tile, tpb, tpe, nchunks, pair)
    }

    /// [`Tile::new`] from the tile's group record (and, FC1, the pairs of
    /// its columns) prefetched into shared memory at `pre` ([`prefetch_record`]):
    /// every tile after the block's first.
    #[inline(always)]
    unsafe fn prefetched<const FC1: bool>(
        p: &FcParams,
        pre: u32,
        tile: u32,
        tpb: u32,
        tpe: u32,
        nchunks: u32,
    ) -> Tile<RPT> {
        let record = (lds(pre), lds(pre + 4), lds(pre + 8), lds(pre + 12));
        let pair = |_slot: u32, r: u32| lds(pre + 16 + 4 * r);
        Self::from_record::<FC1>(p, record, tile, tpb, tpe, nchunks, pair)
    }

    /// The tile of group record `(e, slot0, n_cols, tab)`; `pair(slot, r)`
    /// is FC1's pair at `slot` (column `r` of the group).
    #[inline(always)]
    unsafe fn from_record<const FC1: bool>(
        p: &FcParams,
        (e, slot0, n_cols, tab): (u32, u32, u32, u32),
        tile: u32,
        tpb: u32,
        tpe: u32,
        nchunks: u32,
        pair: impl Fn(u32, u32) -> u32,
    ) -> Tile<RPT> {
        let t0 = tid();
        let rb = tile % tpb;
        // Warps past the expert's rows multiply zeros (a warpgroup with
        // none skips its wgmmas).
        let task0 = rb * WARPS;
        let ntask = if tpe - task0 < WARPS { tpe - task0 } else { WARPS };
        // Activations: 16-byte piece `q` of rows `rsub + 32 i`.
        let (q, rsub) = (t0 % 8, t0 / 8);
        let mut xsrc = [p.input; RPT];
        let mut xok = [false; RPT];
        let topk_inv = topk_reciprocal::<FC1>(p);
        unroll!(RPT, |i| {
            let r = rsub + 32 * i as u32;
            if r < n_cols {
                let slot = slot0 + r;
                let row = if FC1 { token_of(pair(slot, r), p.topk, topk_inv) } else { slot };
                xsrc[i] = p.input + 2 * row as u64 * p.k as u64 + 16 * q as u64;
                xok[i] = true;
            }
        });
        // Codes: 8 tasks x 1 KiB, 2 x 16 B per thread; scales: 8 x 128 B.
        let task_base = (e * tpe + task0) as u64 * nchunks as u64;
        let mut csrc = [p.codes; 2];
        let mut cok = [false; 2];
        unroll!(2, |j| {
            let idx = t0 + PFW_THREADS * j as u32;
            let task = idx / 64;
            if task < ntask {
                let at = (task_base + task as u64 * nchunks as u64) * CHUNK_CODE_BYTES as u64;
                csrc[j] = p.codes + at + 16 * (idx % 64) as u64;
                cok[j] = true;
            }
        });
        let sok = t0 < 64 && t0 / 8 < ntask;
        let ssrc = if sok {
            let at = (task_base + (t0 / 8) as u64 * nchunks as u64) * CHUNK_SCALE_BYTES as u64;
            p.scales + at + 16 * (t0 % 8) as u64
        } else {
            p.scales
        };
        Tile { tab, e, slot0, n_cols, task0, ntask, xsrc, xok, csrc, cok, ssrc, sok }
    }

    /// Chunk `c`'s copies into the stage at `sb` (activations first, then
    /// codes, then scales: [`pfw_stage_bytes`]).
    #[inline(always)]
    unsafe fn load(&self, c: u32, sb: u32, x_bytes: u32) {
        let t0 = tid();
        let (q, rsub) = (t0 % 8, t0 / 8);
        // Row `rsub + 32 i`, swizzled: piece `q ^ (row % 8)`.
        let xdst = sb + rsub * 128 + 16 * (q ^ (rsub % 8));
        unroll!(RPT, |i| {
            cp_async16_zfill(xdst + 4096 * i as u32, self.xsrc[i] + (c * 128) as u64, self.xok[i]);
        });
        unroll!(2, |j| {
            let dst = sb + x_bytes + 16 * (t0 + PFW_THREADS * j as u32);
            cp_async16_zfill(dst, self.csrc[j] + (c * CHUNK_CODE_BYTES as u32) as u64, self.cok[j]);
        });
        if t0 < 64 {
            let dst = sb + x_bytes + CODE_BYTES + 16 * t0;
            cp_async16_zfill(dst, self.ssrc + (c * CHUNK_SCALE_BYTES as u32) as u64, self.sok);
        }
    }

    /// The first `STAGES - 2` chunks' copies (one commit group each; the
    /// first also copies FC2's pairs and routing weights of the group to the
    /// table at `tab`: `cols` u32, then `cols` f32).
    #[inline(always)]
    unsafe fn prologue<const FC1: bool>(&self, p: &FcParams, nchunks: u32, base: u32, cols: u32, tab: u32) {
        let stage_bytes = pfw_stage_bytes(cols);
        let t0 = tid();
        if !FC1 && (64..64 + cols / 2).contains(&t0) {
            // 16-byte piece j of the pairs (j < cols / 4), then of the weights.
            let j = t0 - 64;
            let (src, at) = if j < cols / 4 { (p.group_rows, 16 * j) } else { (p.group_w, 16 * (j - cols / 4)) };
            cp_async16(tab + if j < cols / 4 { 0 } else { 4 * cols } + at, src + 4 * self.tab as u64 + at as u64);
        }
        let mut s = 0;
        while s < STAGES - 2 {
            if s < nchunks {
                self.load(s, base + s * stage_bytes, cols * 128);
            }
            cp_async_commit();
            s += 1;
        }
    }
}

/// Tile `tile`'s group record (if `tile <
/// tiles`) copied to `at` by thread 0, in the current `cp.async` group.
///
/// The group records (and, FC1, the columns' pairs, [`prefetch_pairs`]) of
/// the next tiles are copied into shared memory ahead of time, so
/// [`Tile::prefetched`] reads shared memory instead of waiting on two
/// dependent global loads per tile. Three slots, by tile index modulo 3:
/// with tile `k`'s first copies go tile `k + 2`'s record and its pairs
/// (whose record came with tile `k - 1`'s); tile `k + 1`'s are complete by
/// the end of tile `k`'s k-loop. Nothing is added to the k-loop. (This code
/// was the `moe4_exp = "recpre"` experiment until run 77 measured it.)
#[inline(always)]
unsafe fn prefetch_record(p: &FcParams, g0: u32, tile: u32, tiles: u32, tpb: u32, at: u32) {
    if tid() == 0 && tile < tiles {
        cp_async16(at, p.groups + 16 * (g0 + tile / tpb) as u64);
    }
}

/// FC1: the pairs of `n_cols` columns from slot `slot0`, to
/// `at` (zeros past them); one per thread of the first 128, in the current
/// `cp.async` group.
#[inline(always)]
unsafe fn prefetch_pairs(p: &FcParams, slot0: u32, n_cols: u32, at: u32) {
    let t0 = tid();
    if t0 < 128 {
        let src = if t0 < n_cols { p.sorted_pairs + 4 * (slot0 + t0) as u64 } else { p.sorted_pairs };
        cp_async4_zfill(at + 4 * t0, src, t0 < n_cols);
    }
}

/// 256-row blocks per column group of a layer of `rows` weight rows.
#[inline(always)]
fn blocks_per_group(rows: u32) -> u32 {
    (rows / TASK_ROWS as u32).div_ceil(WARPS)
}

/// The tiles `tile, tile + gdim(), ..` of the `groups` column groups from
/// group `g0` (each `8 * NT` pairs wide), after the kernel's `griddep_wait`.
/// `zero` is 0: an [`opaque`] one makes the values every tile uses (thread
/// index, tile counts, shared addresses) computed here, not merged with an
/// earlier call's and kept live through it (the mixed kernels' second
/// call).
#[inline(always)]
unsafe fn prefill_wg<const FC1: bool, const BF16: bool, const NT: usize, const RPT: usize>(
    p: &FcParams,
    g0: u32,
    groups: u32,
    mut tile: u32,
    zero: u32,
) {
    const { assert!(RPT * 32 == NT * 8) };
    let cols = 8 * NT as u32;
    let x_bytes = cols * 128;
    let stage_bytes = pfw_stage_bytes(cols);
    let t0 = tid() + zero;
    let (warp, lane) = (t0 / 32, t0 % 32);
    let tpe = (p.rows + zero) / TASK_ROWS as u32;
    let tpb = blocks_per_group(p.rows + zero);
    let nchunks = (p.k + zero) / KCHUNK as u32;
    let tiles = groups * tpb;
    let base = (smem() + zero + 1023) & !1023;
    // FC2's pair/weight tables, one per tile parity; the staging tile.
    let tables = base + STAGES * stage_bytes;
    let out_stage = tables + 2 * 8 * cols;
    // Three slots (tile index modulo 3) of a record and 128 pairs,
    // before the staging tile; the current tile's slot.
    let pre_at = |k: u32| tables + 2 * 8 * cols + k * crate::launch::PFW_PRE_SLOT_BYTES;
    let out_stage = out_stage + 3 * crate::launch::PFW_PRE_SLOT_BYTES;
    let mut pslot = 0;
    // The epilogue through the staging tile and bulk copies (run 77: the
    // layer 10 % faster on Qwen3 at M = 8192, 2 % on DeepSeek-V3, with the
    // record prefetch): each pair's row piece (FC1: 256 bytes of h, FC2: 512
    // bytes of y) leaves in one `cp.async.bulk` issued by one thread, in
    // flight while the next tile runs, instead of 64 (FC1) or 128 (FC2)
    // 2-byte stores per thread. FC2 with f32 y stores directly.
    let bulk = FC1 || p.y16 != 0;
    let post = post::<BF16>();

    if tile >= tiles {
        return;
    }
    let mut cur = Tile::<RPT>::new::<FC1>(p, g0, tile, tpb, tpe, nchunks);
    let mut parity = 0;
    // Tiles 1 and 2's records and tile 1's pairs (from its record
    // in global memory, once), with the first chunk's copies.
    {
        let t1 = tile + gdim_here();
        if t1 < tiles {
            prefetch_record(p, g0, t1, tiles, tpb, pre_at(1));
            if FC1 {
                let rec = p.groups + 16 * (g0 + t1 / tpb) as u64;
                prefetch_pairs(p, ldg_u32_coherent(rec + 4), ldg_u32_coherent(rec + 8), pre_at(1) + 16);
            }
        }
        prefetch_record(p, g0, t1 + gdim_here(), tiles, tpb, pre_at(2));
    }
    cur.prologue::<FC1>(p, nchunks, base, cols, tables);
    while tile < tiles {
        let wg_busy = (warp / 4) * 4 < cur.ntask;
        let mut acc = [[[0f32; 4]; NT]; MTILES];
        // One chunk: wait for its stage, refill the one two back, decode and
        // issue its 4 k-steps.
        let chunk = |c: u32, acc: &mut [[[f32; 4]; NT]; MTILES]| {
            cp_async_wait::<{ STAGES - 3 }>();
            // (`moe4_exp` builds leave one part out, to time the others.)
            if !cfg!(moe4_exp = "nofence") {
                wgmma::fence_proxy_async();
            }
            if !cfg!(moe4_exp = "nosync") {
                sync();
            }
            let next = c + STAGES - 2;
            if next < nchunks && !cfg!(moe4_exp = "noload") {
                cur.load(next, base + (next % STAGES) * stage_bytes, x_bytes);
            }
            cp_async_commit();
            if wg_busy {
                let sb = base + (c % STAGES) * stage_bytes;
                let cb = sb + x_bytes + warp * 1024;
                let wa = [lds_v4(cb + 16 * lane), lds_v4(cb + 512 + 16 * lane)];
                let sc = lane_scales::<BF16>(lds(sb + x_bytes + CODE_BYTES + warp * 128 + 4 * lane));
                // Step st + 1 is decoded before step st is issued, so a
                // step's wgmma does not wait on the decode just before it.
                // Step st's registers were last read by step st of the
                // previous chunk: 3 groups were issued after it when step 0
                // is decoded, 2 for the others.
                wgmma::wait::<3>();
                let a_of = |st: usize| {
                    [
                        dequant_step::<BF16>(wa[0][st], sc[0][0], sc[0][1]),
                        dequant_step::<BF16>(wa[1][st], sc[1][0], sc[1][1]),
                    ]
                };
                // Steps st and st + 1 in a[st % 2], a[(st + 1) % 2].
                let mut a = [a_of(0), [[0; 4]; MTILES]];
                unroll!(4, |st| {
                    if st < 3 {
                        wgmma::wait::<2>();
                        a[(st + 1) % 2] = a_of(st + 1);
                    }
                    let cur = a[st % 2];
                    wgmma::fence();
                    let desc = wgmma::desc_sw128(sb + 32 * st as u32);
                    if cfg!(moe4_exp = "nowgmma") {
                        let (a0, a1) = (cur[0], cur[1]);
                        let x = a0[0] ^ a0[1] ^ a0[2] ^ a0[3] ^ a1[0] ^ a1[1] ^ a1[2] ^ a1[3] ^ desc as u32;
                        acc[0][0][0] += f32::from_bits(x & 0x0FFF_FFFF);
                    } else {
                        wgmma::mma::<BF16, NT>(&mut acc[0], cur[0], desc, true);
                        wgmma::mma::<BF16, NT>(&mut acc[1], cur[1], desc, true);
                    }
                    wgmma::commit();
                });
            }
        };
        // ptxas drains the wgmma pipeline at every loop back-edge (the A
        // operands live in registers), so the loop body is UNROLL chunks.
        let mut c = 0;
        while c < nchunks {
            unroll!(UNROLL as usize, |u| {
                if c + (u as u32) < nchunks {
                    chunk(c + u as u32, &mut acc)
                }
            });
            c += UNROLL;
        }
        // The expert's global scales, loaded before the drain as the n256
        // kernels do (runs 107 and 109: Qwen3 at M = 2048 -2.5 % on an H100, -1.4 % on
        // an H200; M = 8192 unchanged).
        let alpha = global_scales::<FC1>(p, cur.e);
        wgmma::wait::<0>();
        unroll!(MTILES, |mt| wgmma::hold_f32(&mut acc[mt]));
        cp_async_wait::<0>();
        if bulk {
            // The previous tile's bulk copies have read the staging tile.
            bulk_wait_read::<0>();
        }
        // Every warpgroup's reads of the stages are done: the next tile's
        // first copies go out now, in flight during this tile's epilogue.
        sync();
        let (e, slot0, n_cols, task0, ntask) = (cur.e, cur.slot0, cur.n_cols, cur.task0, cur.ntask);
        let tab = tables + parity * 8 * cols;
        // (Read here: a grid size held from the kernel's start costs the
        // mixed kernels a spilled register.)
        let next = tile + gdim_here();
        if next < tiles {
            // Slots of the next tile and of the one after it.
            let s1 = if pslot == 2 { 0 } else { pslot + 1 };
            let s2 = if s1 == 2 { 0 } else { s1 + 1 };
            cur = Tile::<RPT>::prefetched::<FC1>(p, pre_at(s1), next, tpb, tpe, nchunks);
            // The tile after next: its pairs, from its record (landed
            // in this tile's k-loop).
            let t2 = next + gdim_here();
            if FC1 && t2 < tiles {
                let at = pre_at(s2);
                prefetch_pairs(p, lds(at + 4), lds(at + 8), at + 16);
            }
            // This tile's slot is free: the record of the tile after those.
            prefetch_record(p, g0, t2 + gdim_here(), tiles, tpb, pre_at(pslot));
            pslot = s1;
            // The other table was last read by the previous tile's epilogue,
            // before this tile's chunk barriers.
            cur.prologue::<FC1>(p, nchunks, base, cols, tables + (parity ^ 1) * 8 * cols);
        }
        if bulk {
            let stride = if FC1 { PFW_OUT_STRIDE_FC1 } else { PFW_OUT_STRIDE_FC2 };
            // (The `noepi` build stores nothing: the epilogue's cost, timed;
            // a fold of the accumulators keeps the `wgmma`s.)
            #[cfg(moe4_exp = "noepi")]
            {
                let mut x = 0u32;
                unroll!(MTILES, |m| unroll16!(NT, |j| unroll!(4, |c| x ^= acc[m][j][c].to_bits())));
                stg_u32_if(p.output, x, x == 0x7fc0_1234);
            }
            if warp < ntask && !cfg!(moe4_exp = "noepi") {
                if FC1 {
                    stage_fc1::<BF16, NT>(p, &acc, alpha, (task0 + warp, task0), post, (out_stage, stride));
                } else {
                    let weight = |col: u32| f32::from_bits(lds(tab + 4 * (cols + col)));
                    stage_fc2::<BF16, NT>(&acc, alpha.0, warp, post, weight, (out_stage, stride));
                }
            }
            // Written by the generic proxy, read by the bulk copies.
            wgmma::fence_proxy_async();
            sync();
            // (`nobulk`: the staging tile written, never copied out; timing only.)
            if t0 < n_cols && !cfg!(any(moe4_exp = "noepi", moe4_exp = "nobulk")) {
                // Column t0's piece: FC1 h row slot0 + t0 from channel 16
                // task0 (16 channels per task), FC2 y row of its pair from
                // row 32 task0 (32 rows per task).
                let (dst, bytes) = if FC1 {
                    let row = (slot0 + t0) as u64 * (p.rows / 2) as u64;
                    (p.output + 2 * (row + 16 * task0 as u64), 32 * ntask)
                } else {
                    let row = lds(tab + 4 * t0) as u64 * p.rows as u64;
                    (p.output + 2 * (row + 32 * task0 as u64), 64 * ntask)
                };
                bulk_s2g(dst, out_stage + t0 * stride, bytes);
                bulk_commit();
            }
        } else if warp < ntask {
            let r = task0 + warp;
            if FC1 {
                epilogue_fc1::<BF16, NT, true>(p, &acc, e, r, slot0, n_cols, post);
            } else {
                // The group's pairs and weights, copied with its first chunk.
                let pair_w = |col: u32| (lds(tab + 4 * col), f32::from_bits(lds(tab + 4 * (cols + col))));
                epilogue_fc2_with::<BF16, NT>(p, &acc, e, r, n_cols, post, pair_w);
            }
        }
        tile = next;
        parity ^= 1;
    }
    if bulk {
        // Every bulk copy's writes done before the block exits (or the
        // mixed kernels' narrow tiles reuse the shared memory).
        bulk_wait::<0>();
    }
}

macro_rules! pfw_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal, $nt:literal;)*) => {$(
        /// `wgmma` prefill GEMM instance `(FC1?, bf16?, column tiles)`; see
        /// the module docs.
        ///
        /// # Safety
        /// `p` as [`FcParams`] documents, routed with `group = 8 * NT`;
        /// [`PFW_THREADS`] threads, `pfw_smem_bytes(8 * NT)` bytes of
        /// dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            // Programmatic dependent launch: the previous kernel in the
            // stream is complete (its writes visible) after this; then let
            // the next launch.
            griddep_wait();
            griddep_launch_dependents();
            // (`stages6`: an opaque zero, as in the mixed kernels; with a
            // literal one the 128-pair kernels spilled a register.)
            let zero = if cfg!(moe4_exp = "stages6") { opaque(0) } else { 0 };
            prefill_wg::<$fc1, $bf16, $nt, { $nt / 4 }>(&p, 0, ldg_u32_coherent(p.n_active + 4), bid(), zero)
        }
    )*};
}

macro_rules! pfw_mixed_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal;)*) => {$(
        /// `wgmma` prefill GEMM instance `(FC1?, bf16?)` for mixed groups:
        /// the 128-pair groups, then the 64-pair narrow ones
        /// ([`crate::groups`]), as one sequence of tiles over the grid.
        ///
        /// # Safety
        /// `p` as [`FcParams`] documents, routed with `group = 128`, `narrow
        /// = 64`; [`PFW_THREADS`] threads, `pfw_smem_bytes(128)` bytes of
        /// dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            griddep_wait();
            griddep_launch_dependents();
            prefill_mixed::<$fc1, $bf16>(&p)
        }
    )*};
}

/// The mixed-width kernels' body: tiles `0..wide * tpb` are the wide
/// groups', the rest the narrow groups'; block `b` takes tiles `b, b +
/// gdim(), ..` of that one sequence.
#[inline(always)]
unsafe fn prefill_mixed<const FC1: bool, const BF16: bool>(p: &FcParams) {
    // (An opaque zero here as well: with a literal one, ptxas spilled a
    // register or two of the wide loop.)
    prefill_wg::<FC1, BF16, 16, 4>(p, 0, ldg_u32_coherent(p.n_active + 4), bid_here(), opaque(0));
    // The narrow tiles' stages and tables overlap the wide ones'.
    sync();
    // What the narrow tiles need is worked out again here (the loads are
    // volatile; `zero` is opaque), so nothing is held through the wide
    // tiles' 255-register loop.
    let zero = opaque(0);
    let (wide, narrow) = (ldg_u32_coherent(p.n_active + 4), ldg_u32_coherent(p.n_active + 8));
    let wide_tiles = wide * blocks_per_group(p.rows) + zero;
    let first = stride_first_from(wide_tiles) - wide_tiles;
    const NT: usize = PFW_NARROW_COLS as usize / 8;
    prefill_wg::<FC1, BF16, NT, { NT / 4 }>(p, wide, narrow, first, zero);
}

/// The narrow tiles ([`crate::launch::PFW256_NARROW_COLS`] pairs) of the
/// mixed 128-row x 256-pair kernels ([`super::prefill_w256`]): groups
/// `g0 ..` on this module's 256-row loop of that width, from tile `first`.
#[inline(always)]
pub(super) unsafe fn narrow_tiles<const FC1: bool, const BF16: bool>(
    p: &FcParams,
    g0: u32,
    groups: u32,
    first: u32,
    zero: u32,
) {
    const NT: usize = crate::launch::PFW256_NARROW_COLS as usize / 8;
    prefill_wg::<FC1, BF16, NT, { NT / 4 }>(p, g0, groups, first, zero);
}

pfw_mixed_kernels! {
    moe_pfw1_bf16_mix: true, true;
    moe_pfw1_f16_mix: true, false;
    moe_pfw2_bf16_mix: false, true;
    moe_pfw2_f16_mix: false, false;
}

pfw_kernels! {
    moe_pfw1_bf16_n128: true, true, 16;
    moe_pfw1_f16_n128: true, false, 16;
    moe_pfw2_bf16_n128: false, true, 16;
    moe_pfw2_f16_n128: false, false, 16;
    moe_pfw1_bf16_n64: true, true, 8;
    moe_pfw1_f16_n64: true, false, 8;
    moe_pfw2_bf16_n64: false, true, 8;
    moe_pfw2_f16_n64: false, false, 8;
}

/// `dst = x` with each row's 64-element chunks in the
/// [`crate::tile::wgmma_permuted`] order (the `wgmma` FC1's input); one thread per
/// 16-byte piece of `dst` (natural words `8t + m`, t = 0..4, of piece `m`).
///
/// # Safety
/// `src` and `dst` hold `rows x k` 16-bit values, `k % 64 == 0`, both
/// 16-byte aligned; any 1-D launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_permute_x(p: PermuteParams) {
    griddep_wait();
    griddep_launch_dependents();
    let pieces = p.rows as u64 * (p.k / 8) as u64;
    let mut i = (bid() * bdim() + tid()) as u64;
    while i < pieces {
        // Piece i = (row, chunk, m): its words are natural words 8t + m.
        let (chunk, m) = (i / 8, (i % 8) as u32);
        let src = p.src + 128 * chunk;
        let mut v = [0u32; 4];
        unroll!(4, |t| {
            // Natural k = 2 (8t + m): wgmma_permuted(k) = 2 (4m + t), word t
            // of this piece.
            v[t] = ldg_u32(src + 4 * (8 * t as u32 + m) as u64);
        });
        stg_v4(p.dst + 16 * i, v);
        i += (gdim() * bdim()) as u64;
    }
}
