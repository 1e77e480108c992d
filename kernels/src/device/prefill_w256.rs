//! `moe_pfw*_n256`, `moe_pfw*_mix256` (sm_90a builds): the `wgmma` prefill
//! GEMMs on 128-row x 256-pair tiles, where an expert has ~256 pairs or
//! more ([`crate::launch::PFW256_COLS`]; the host's `N256_PREFILL_PAIRS`).
//!
//! **Why.** The 256-row x 128-pair kernels ([`super::prefill_wg`]) issue
//! ~234 instructions per warp and 64-k chunk, ~140 of them the E2M1 decode
//! and scales of the warp's 32 rows (perf-notes, sixth session of
//! 2026-12-05). Here a warp decodes one 16-row tile (half a layout task)
//! and its warpgroup issues one `m64n256k16` per k-step instead of two
//! `m64n128k16`: the same MMA work, accumulators (128 f32 per thread) and
//! B reads per chunk, half the decode per weight element used (141
//! instructions per warp and chunk). Measured (run 87, H100): the layer
//! 4-12 % faster where experts have 256 pairs or more, less than the
//! instruction count promised: issue alone did not bound the 128-pair
//! loop.
//!
//! **Tile.** A block is 8 warps over 128 weight rows (4 layout tasks): warp
//! `w` decodes mtile `w % 2` of the block's task `w / 2`, so warpgroup `g`
//! holds the 64 rows of tasks `2g, 2g + 1` in order, the A tile of its
//! `wgmma`s. B is the activations of 256 pairs (the routing's groups of 256),
//! 256 rows of 128 bytes per chunk with the 128-byte swizzle, read in the
//! [`crate::tile::wgmma_permuted`] k order as in [`super::prefill_wg`].
//!
//! **Stage** (a chunk): the activations (32 KiB, first), the 4 tasks' codes
//! (4 KiB); the scales (512 bytes) in an array of their own after the
//! stages, so a stage stays a multiple of 1 KiB. [`PFW256_STAGES`] stages,
//! loads `STAGES - 2` chunks ahead, the pipeline and waits as in
//! [`super::prefill_wg`].
//!
//! **The staging tile is the last two stages**: the next tile's first
//! `STAGES - 2` chunks (issued before this tile's epilogue) go to the
//! others, and its first chunk's barrier, before it loads the stage after
//! them, comes after every thread's reads of the staging tile.
//! (Separate, FC2's 68 KiB tile left room for 4 stages.)
//!
//! **Rows past a group's pairs** copy the group's first row instead of
//! zeros: columns are independent in the GEMM and nothing of such a column
//! is stored, so no predicate per row is held through the loop.
//!
//! **Epilogues** through a staging tile, copied out by the block with
//! coalesced 16-byte loads and stores, 8 or 16 threads per pair's row
//! piece (FC1: 64 channels of h, 128 bytes; FC2 with 16-bit y: 128 rows,
//! 256 bytes; a `cp.async.bulk` per piece was slower, run 98); FC2 with
//! f32 y stores directly.
//!
//! **TMA** (`_tma` FC2 kernels, `moe4_exp = "tma"` builds): FC2's B rows
//! are h in slot order, so a chunk's 256 x 128-byte B tile is one 2-D box
//! of a tensor map over h (`p.tmap`, the 128-byte swizzle done by the
//! copy), and the 4 tasks' codes and scales 1-D bulk copies: thread 0
//! issues a chunk's 9 copies and arms the stage's full `mbarrier` with
//! their bytes. Every thread waits on that barrier instead of a block
//! barrier per chunk, and arrives on the stage's empty barrier once its
//! warp's `wgmma`s of the chunk are complete (chunk c - 1's at chunk c's
//! third k-step), where the stage is reloaded in the same tile; thread 0
//! waits for those arrivals before reloading it. The stages the next tile
//! starts with are covered by the tile-end barrier as before, and the
//! staging tile by one block barrier at each tile's first chunk.
//! Measured (runs 132-133, H100, M = 8192): bit for bit equal to the
//! cp.async kernels and 6-17 % slower (thread 0's issue of the bulk copies
//! paces every warp); with the codes and scales back on every thread's
//! `cp.async` completing on the same barriers
//! (docs/runs/2026-12-07-run133-tmac.patch) as fast as the cp.async
//! kernels, no faster. Hence an experiment only.
//!
//! **Mixed** (`_mix256`): the routing's 256-pair groups on these tiles,
//! then each expert's last 1-128 pairs in one or two narrow groups of 64
//! ([`crate::groups`]) on the 256-row x 64-pair loop of
//! [`super::prefill_wg`].

use super::arch::*;
use super::fc::{dequant_step, global_scales, post, tile_scales, Gate};
use super::prefill_wg::{token_of, topk_reciprocal};
use super::tma::{bulk_load, mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_inval, mbar_wait, tma_load_2d};
use super::wgmma;
use crate::launch::{
    PFW256_COLS, PFW256_OUT_STRIDE_FC1, PFW256_OUT_STRIDE_FC2, PFW256_STAGES, PFW256_STAGE_BYTES, PFW256_X_BYTES,
    PFW_THREADS,
};
use crate::params::FcParams;
use crate::tile::{fc1_stage_at, CHUNK_CODE_BYTES, CHUNK_SCALE_BYTES, KCHUNK, TASK_ROWS};

const WARPS: u32 = PFW_THREADS / 32;
/// Layout tasks (32 rows) per block.
const TASKS: u32 = WARPS / 2;
const COLS: u32 = PFW256_COLS;
/// Column tiles of 8 pairs.
const NT: usize = COLS as usize / 8;
/// Activation rows each thread copies per chunk.
const RPT: usize = COLS as usize / 32;
/// Scale bytes of a stage.
const SCALE_BYTES: u32 = TASKS * CHUNK_SCALE_BYTES as u32;
/// Bytes of a prefetch slot: the group record, then 256 u32 pairs.
const PRE_SLOT: u32 = 16 + 4 * COLS;

/// One tile (a 128-row block of a 256-pair group) as this thread sees it,
/// with its copy sources at chunk 0, as in [`super::prefill_wg`].
struct Tile {
    tab: u32,
    e: u32,
    slot0: u32,
    n_cols: u32,
    task0: u32,
    ntask: u32,
    xsrc: [u64; RPT],
    csrc: u64,
    cok: bool,
    ssrc: u64,
    sok: bool,
    /// The first task's chunk index in the codes and scales (TMA loads).
    tbase: u64,
}

impl Tile {
    /// The block's first tile: its record (and FC1 pairs) from global memory.
    #[inline(always)]
    unsafe fn new<const FC1: bool>(p: &FcParams, tile: u32, tpb: u32, tpe: u32, nchunks: u32) -> Tile {
        let rec = p.groups + 16 * (tile / tpb) as u64;
        let record = (ldg_u32_coherent(rec), ldg_u32_coherent(rec + 4), ldg_u32_coherent(rec + 8));
        let tab = ldg_u32_coherent(rec + 12);
        let pair = |slot: u32, _r: u32| ldg_u32_coherent(p.sorted_pairs + 4 * slot as u64);
        Self::from_record::<FC1>(p, (record.0, record.1, record.2, tab), tile, tpb, tpe, nchunks, pair)
    }

    /// A later tile, from its record and pairs prefetched at `pre`.
    #[inline(always)]
    unsafe fn prefetched<const FC1: bool>(p: &FcParams, pre: u32, tile: u32, tpb: u32, tpe: u32, nchunks: u32) -> Tile {
        let record = (lds(pre), lds(pre + 4), lds(pre + 8), lds(pre + 12));
        let pair = |_slot: u32, r: u32| lds(pre + 16 + 4 * r);
        Self::from_record::<FC1>(p, record, tile, tpb, tpe, nchunks, pair)
    }

    #[inline(always)]
    unsafe fn from_record<const FC1: bool>(
        p: &FcParams,
        (e, slot0, n_cols, tab): (u32, u32, u32, u32),
        tile: u32,
        tpb: u32,
        tpe: u32,
        nchunks: u32,
        pair: impl Fn(u32, u32) -> u32,
    ) -> Tile {
        let t0 = tid();
        let task0 = (tile % tpb) * TASKS;
        let ntask = if tpe - task0 < TASKS { tpe - task0 } else { TASKS };
        let (q, rsub) = (t0 % 8, t0 / 8);
        let mut xsrc = [p.input; RPT];
        let topk_inv = topk_reciprocal::<FC1>(p);
        unroll!(RPT, |i| {
            // Rows past the group's pairs read its first row (module docs).
            let r = rsub + 32 * i as u32;
            let r = if r < n_cols { r } else { 0 };
            let slot = slot0 + r;
            let row = if FC1 { token_of(pair(slot, r), p.topk, topk_inv) } else { slot };
            xsrc[i] = p.input + 2 * row as u64 * p.k as u64 + 16 * q as u64;
        });
        // Codes: 4 tasks x 1 KiB, one 16-byte piece per thread.
        let task_base = (e * tpe + task0) as u64 * nchunks as u64;
        let task = t0 / 64;
        let cok = task < ntask;
        let csrc = if cok {
            p.codes + (task_base + task as u64 * nchunks as u64) * CHUNK_CODE_BYTES as u64 + 16 * (t0 % 64) as u64
        } else {
            p.codes
        };
        // Scales: 4 x 128 bytes, the first 32 threads.
        let sok = t0 < 32 && t0 / 8 < ntask;
        let ssrc = if sok {
            p.scales + (task_base + (t0 / 8) as u64 * nchunks as u64) * CHUNK_SCALE_BYTES as u64 + 16 * (t0 % 8) as u64
        } else {
            p.scales
        };
        Tile { tab, e, slot0, n_cols, task0, ntask, xsrc, csrc, cok, ssrc, sok, tbase: task_base }
    }

    /// Chunk `c`'s copies into stage `s` (at `sb`; its scales at `scb`).
    #[inline(always)]
    unsafe fn load(&self, c: u32, sb: u32, scb: u32) {
        let t0 = tid();
        let (q, rsub) = (t0 % 8, t0 / 8);
        let xdst = sb + rsub * 128 + 16 * (q ^ (rsub % 8));
        unroll!(RPT, |i| {
            cp_async16(xdst + 4096 * i as u32, self.xsrc[i] + (c * 128) as u64);
        });
        cp_async16_zfill(sb + PFW256_X_BYTES + 16 * t0, self.csrc + (c * CHUNK_CODE_BYTES as u32) as u64, self.cok);
        if t0 < 32 {
            cp_async16_zfill(scb + 16 * t0, self.ssrc + (c * CHUNK_SCALE_BYTES as u32) as u64, self.sok);
        }
    }

    /// Chunk `c`'s copies into stage `s` (at `sb`; its scales at `scb`) by
    /// TMA, issued by the calling thread and completing on the `mbarrier`
    /// at `bar`: the 256 h rows from `slot0` as one 2-D box (rows past
    /// the group's pairs are other groups' rows, or zeros past h's end:
    /// never stored, module docs), the busy tasks' codes and scales as 1-D
    /// bulk copies (an idle task's stay as they were: its rows are not
    /// stored either).
    #[inline(always)]
    unsafe fn load_tma(&self, p: &FcParams, c: u32, sb: u32, scb: u32, bar: u32, nchunks: u32) {
        mbar_arrive_expect_tx(bar, PFW256_X_BYTES + self.ntask * (CHUNK_CODE_BYTES + CHUNK_SCALE_BYTES) as u32);
        tma_load_2d(sb, p.tmap, c * KCHUNK as u32, self.slot0, bar);
        unroll!(TASKS as usize, |t| {
            if (t as u32) < self.ntask {
                let at = self.tbase + (t as u32 * nchunks + c) as u64;
                bulk_load(sb + PFW256_X_BYTES + 1024 * t as u32, p.codes + at * CHUNK_CODE_BYTES as u64, 1024, bar);
                let scale = p.scales + at * CHUNK_SCALE_BYTES as u64;
                bulk_load(scb + CHUNK_SCALE_BYTES as u32 * t as u32, scale, CHUNK_SCALE_BYTES as u32, bar);
            }
        });
    }

    /// The first `STAGES - 2` chunks' copies, one commit group each (the
    /// first also copies FC2's pairs and weights of the group to `tab`:
    /// 256 u32, then 256 f32).
    /// With `tma`, thread 0 issues the chunks by TMA instead (onto the
    /// stages' full barriers at `base + BARS_AT`), and one commit group
    /// holds the tables.
    #[inline(always)]
    unsafe fn prologue<const FC1: bool>(&self, p: &FcParams, nchunks: u32, base: u32, tab: u32, tma: bool) {
        let t0 = tid();
        if !FC1 && (64..64 + COLS / 2).contains(&t0) {
            let j = t0 - 64;
            let (src, at) = if j < COLS / 4 { (p.group_rows, 16 * j) } else { (p.group_w, 16 * (j - COLS / 4)) };
            cp_async16(tab + if j < COLS / 4 { 0 } else { 4 * COLS } + at, src + 4 * self.tab as u64 + at as u64);
        }
        if tma {
            cp_async_commit();
            if t0 == 0 {
                unroll!(STAGES as usize - 2, |s| {
                    let s = s as u32;
                    if s < nchunks {
                        let (sb, scb) = stage_at(base, s);
                        self.load_tma(p, s, sb, scb, full_at(base, s), nchunks);
                    }
                });
            }
            return;
        }
        let mut s = 0;
        while s < STAGES - 2 {
            if s < nchunks {
                let (sb, scb) = stage_at(base, s);
                self.load(s, sb, scb);
            }
            cp_async_commit();
            s += 1;
        }
    }
}

/// Tile `tile`'s group record (if `tile < tiles`) copied to `at` by thread
/// 0, in the current `cp.async` group.
#[inline(always)]
unsafe fn prefetch_record(p: &FcParams, tile: u32, tiles: u32, tpb: u32, at: u32) {
    if tid() == 0 && tile < tiles {
        cp_async16(at, p.groups + 16 * (tile / tpb) as u64);
    }
}

/// FC1: the pairs of `n_cols` columns from `slot0` to `at` (zeros past
/// them), one per thread.
#[inline(always)]
unsafe fn prefetch_pairs(p: &FcParams, slot0: u32, n_cols: u32, at: u32) {
    let t0 = tid();
    let src = if t0 < n_cols { p.sorted_pairs + 4 * (slot0 + t0) as u64 } else { p.sorted_pairs };
    cp_async4_zfill(at + 4 * t0, src, t0 < n_cols);
}

/// 128-row blocks per group of a layer of `rows` weight rows.
#[inline(always)]
fn blocks_per_group(rows: u32) -> u32 {
    (rows / TASK_ROWS as u32).div_ceil(TASKS)
}

/// Where the FC2 tables start, from the 1 KiB aligned base (after the
/// stages and their scales; `pfw256_smem_bytes` in [`crate::launch`]).
const TABLES_AT: u32 = STAGES * (PFW256_STAGE_BYTES + SCALE_BYTES);
/// The TMA-fed FC2's `mbarrier`s, after the prefetch slots: per stage a
/// full one (the producer's expect-tx arrival and the copies' bytes), then
/// per stage an empty one (every thread's arrival once its warp's reads of
/// the stage are done).
const BARS_AT: u32 = TABLES_AT + 2 * 8 * COLS + 3 * PRE_SLOT;
const STAGES: u32 = PFW256_STAGES;

/// Stage `s`'s address (h rows, then codes) and its scales' (after the
/// stages), from the aligned shared base.
#[inline(always)]
fn stage_at(base: u32, s: u32) -> (u32, u32) {
    (base + s * PFW256_STAGE_BYTES, base + STAGES * PFW256_STAGE_BYTES + s * SCALE_BYTES)
}

/// The TMA-fed FC2's full `mbarrier` of stage `s` (the empty one follows
/// the `STAGES` full ones).
#[inline(always)]
fn full_at(base: u32, s: u32) -> u32 {
    base + BARS_AT + 8 * s
}

/// The tiles `tile, tile + gdim(), ..` of the first `groups` (256-pair)
/// column groups. `TMA` (FC2 only): the stages are loaded by TMA
/// (module docs, "TMA").
#[inline(always)]
unsafe fn prefill_w256<const FC1: bool, const BF16: bool, const TMA: bool>(
    p: &FcParams,
    groups: u32,
    mut tile: u32,
    zero: u32,
) {
    let tma = TMA && !FC1;
    let t0 = tid() + zero;
    let (warp, lane) = (t0 / 32, t0 % 32);
    let tpe = (p.rows + zero) / TASK_ROWS as u32;
    let tpb = blocks_per_group(p.rows + zero);
    let nchunks = (p.k + zero) / KCHUNK as u32;
    let tiles = groups * tpb;
    let base = (smem() + zero + 1023) & !1023;
    let scales = base + STAGES * PFW256_STAGE_BYTES;
    let tables = base + TABLES_AT;
    let pre_at = |k: u32| tables + 2 * 8 * COLS + k * PRE_SLOT;
    // The staging tile: the last two stages (module docs).
    let out_stage = base + (STAGES - 2) * PFW256_STAGE_BYTES;
    let mut pslot = 0;
    // FC1 and FC2 with 16-bit y go through the staging tile; FC2 with f32
    // y stores from registers.
    let staged = FC1 || p.y16 != 0;
    let post = post::<BF16>();

    if tile >= tiles {
        return;
    }
    let (full, empty) = (|s: u32| full_at(base, s), |s: u32| full_at(base, STAGES + s));
    if tma {
        if t0 == 0 {
            unroll!(STAGES as usize, |s| {
                mbar_init(full(s as u32), 1);
                mbar_init(empty(s as u32), PFW_THREADS);
            });
        }
        // (Reached from both sides of the branch: the non-`.aligned` form.)
        sync_divergent();
    }
    // The phase parities of the full barriers (every thread) and of the
    // empty ones (thread 0, the producer), one bit per stage.
    let (mut fph, mut eph) = (0u32, 0u32);
    let mut cur = Tile::new::<FC1>(p, tile, tpb, tpe, nchunks);
    let mut parity = 0;
    {
        let t1 = tile + gdim_here();
        if t1 < tiles {
            prefetch_record(p, t1, tiles, tpb, pre_at(1));
            if FC1 {
                let rec = p.groups + 16 * (t1 / tpb) as u64;
                prefetch_pairs(p, ldg_u32_coherent(rec + 4), ldg_u32_coherent(rec + 8), pre_at(1) + 16);
            }
        }
        prefetch_record(p, t1 + gdim_here(), tiles, tpb, pre_at(2));
    }
    cur.prologue::<FC1>(p, nchunks, base, tables, tma);
    // Warp w: mtile w % 2 of the block's task w / 2.
    let (wtask, wmt) = (warp / 2, warp % 2);
    while tile < tiles {
        let wg_busy = 2 * (warp / 4) < cur.ntask;
        let mut acc = [[0f32; 4]; NT];
        // Chunk `c` in stage `s` (the loop runs STAGES chunks per
        // iteration, so `s` is a constant: no `c % STAGES`).
        let mut chunk = |c: u32, s: u32, acc: &mut [[f32; 4]; NT]| {
            let next = c + STAGES - 2;
            // The stage two back, and the one before.
            let sn = if s >= 2 { s - 2 } else { s + STAGES - 2 };
            let sprev = if s >= 1 { s - 1 } else { STAGES - 1 };
            // TMA: every thread arrives on the empty barrier of chunk c - 1's
            // stage once its warp's reads of it are done, where the producer
            // reloads that stage in this tile (chunk c - 1 + STAGES).
            let release = tma && c >= 1 && c - 1 + STAGES < nchunks;
            if tma {
                mbar_wait(full(s), (fph >> s) & 1);
                fph ^= 1 << s;
                if c == 0 {
                    // The previous tile's staging tile (the last two
                    // stages, generic-proxy writes and reads) is done with
                    // before this tile's chunks c = 0, 1 load into it.
                    wgmma::fence_proxy_async();
                    sync();
                }
                if t0 == 0 && next < nchunks {
                    // Its previous chunk (c - 2) released by every warp.
                    if c >= 2 {
                        mbar_wait(empty(sn), (eph >> sn) & 1);
                        eph ^= 1 << sn;
                    }
                    // (Addresses from a fresh read of the shared base: the
                    // same as `base`, `zero` being 0, but not held for it.)
                    let b = (smem_here() + 1023) & !1023;
                    let (sb, scb) = stage_at(b, sn);
                    cur.load_tma(p, next, sb, scb, full_at(b, sn), nchunks);
                }
            } else {
                cp_async_wait_dyn(STAGES - 3);
                // (`moe4_exp` builds leave one part out, to time the others,
                // as in prefill_wg.rs.)
                if !cfg!(moe4_exp = "nofence") {
                    wgmma::fence_proxy_async();
                }
                if !cfg!(moe4_exp = "nosync") {
                    sync();
                }
                if next < nchunks && !cfg!(moe4_exp = "noload") {
                    cur.load(next, base + sn * PFW256_STAGE_BYTES, scales + sn * SCALE_BYTES);
                }
                cp_async_commit();
            }
            if !wg_busy && release {
                mbar_arrive(empty(sprev));
            }
            if wg_busy {
                let sb = base + s * PFW256_STAGE_BYTES;
                let wa = lds_v4(sb + PFW256_X_BYTES + wtask * 1024 + wmt * 512 + 16 * lane);
                let sw = lds(scales + s * SCALE_BYTES + wtask * 128 + 4 * lane) >> (16 * wmt);
                let sc = tile_scales::<BF16>(sw);
                wgmma::wait::<3>();
                let a_of = |st: usize| dequant_step::<BF16>(wa[st], sc[0], sc[1]);
                let mut a = [a_of(0), [0; 4]];
                unroll!(4, |st| {
                    if st < 3 {
                        wgmma::wait::<2>();
                        a[(st + 1) % 2] = a_of(st + 1);
                    }
                    // (After this k-step's wait, chunk c - 1's groups are
                    // complete.)
                    if st == 2 && release {
                        mbar_arrive(empty(sprev));
                    }
                    wgmma::fence();
                    let desc = wgmma::desc_sw128(sb + 32 * st as u32);
                    if cfg!(moe4_exp = "nowgmma") {
                        let x = a[st % 2];
                        acc[0][0] += f32::from_bits((x[0] ^ x[1] ^ x[2] ^ x[3] ^ desc as u32) & 0x0FFF_FFFF);
                    } else {
                        wgmma::mma_n256::<BF16>(acc, a[st % 2], desc, true);
                    }
                    wgmma::commit();
                });
            }
        };
        // ptxas drains the wgmma pipeline at every loop back-edge, so the
        // loop body is STAGES chunks (stage u of the body is u).
        let mut c = 0;
        while c < nchunks {
            unroll!(STAGES as usize, |u| {
                if c + (u as u32) < nchunks {
                    chunk(c + u as u32, u as u32, &mut acc);
                }
            });
            c += STAGES;
        }
        // The expert's global scales, loaded before the drain so that
        // their latency runs under it (run 103: loaded in the epilogue, FC2's
        // warps waited on it ~4 % of their time).
        let alpha = global_scales::<FC1>(p, cur.e);
        wgmma::wait::<0>();
        wgmma::hold_f32_n256(&mut acc);
        cp_async_wait::<0>();
        sync();
        let (slot0, n_cols, task0, ntask) = (cur.slot0, cur.n_cols, cur.task0, cur.ntask);
        let tab = tables + parity * 8 * COLS;
        let next = tile + gdim_here();
        if next < tiles {
            let s1 = if pslot == 2 { 0 } else { pslot + 1 };
            let s2 = if s1 == 2 { 0 } else { s1 + 1 };
            cur = Tile::prefetched::<FC1>(p, pre_at(s1), next, tpb, tpe, nchunks);
            let t2 = next + gdim_here();
            if FC1 && t2 < tiles {
                let at = pre_at(s2);
                prefetch_pairs(p, lds(at + 4), lds(at + 8), at + 16);
            }
            prefetch_record(p, t2 + gdim_here(), tiles, tpb, pre_at(pslot));
            pslot = s1;
            cur.prologue::<FC1>(p, nchunks, base, tables + (parity ^ 1) * 8 * COLS, tma);
        }
        // (The `noepi` build stores nothing: the epilogue's cost, timed;
        // a fold of the accumulators keeps the `wgmma`s.)
        #[cfg(moe4_exp = "noepi")]
        {
            let mut x = 0u32;
            unroll!(4, |j0| unroll!(8, |j1| unroll!(4, |c| x ^= acc[8 * j0 + j1][c].to_bits())));
            stg_u32_if(p.output, x, x == 0x7fc0_1234);
        }
        let busy = wtask < ntask && !cfg!(moe4_exp = "noepi");
        if staged {
            if busy {
                if FC1 {
                    stage_fc1::<BF16>(p, &acc, alpha, warp, post, out_stage);
                } else {
                    let weight = |col: u32| f32::from_bits(lds(tab + 4 * (COLS + col)));
                    stage_fc2::<BF16>(&acc, alpha.0, warp, post, weight, out_stage);
                }
            }
            // (No proxy fence: the staging tile is written and read by the
            // generic proxy; run 102 measured its removal: same times,
            // tests and sanitizers clean.)
            sync();
            // The block copies the staging tile out with 16-byte loads and
            // stores, 8 (FC1) or 16 (FC2) threads per column's row piece,
            // coalesced: run 98, -1.6 % (Qwen3) and -4.6 % (DeepSeek-V3)
            // against a `cp.async.bulk` per column, whose reads the next
            // tile had to wait for. The next tile's first barrier orders
            // these reads before its loads reuse the stages.
            let (lg, stride, used) =
                if FC1 { (3, PFW256_OUT_STRIDE_FC1, 2 * ntask) } else { (4, PFW256_OUT_STRIDE_FC2, 4 * ntask) };
            // (`noepi` and `nobulk`, timing-only builds: nothing copied out.)
            if !cfg!(any(moe4_exp = "noepi", moe4_exp = "nobulk")) {
                // FC2: the y rows of the thread's 16 columns first, then the
                // copies (run 103: a table read before each copy's address,
                // each waited for, held FC2's warps ~3.5 % of their time).
                let mut pair = [0u32; 16];
                if !FC1 {
                    unroll16!(16, |k| pair[k] = lds(tab + 4 * ((t0 + 256 * k as u32) >> lg)));
                }
                unroll16!(16, |k| {
                    let i = t0 + 256 * k as u32;
                    // Column `col`'s 16-byte piece `piece`: FC1 h row slot0 +
                    // col from channel 16 task0, FC2 y row of its pair from
                    // row 32 task0.
                    let (col, piece) = (i >> lg, i & ((1 << lg) - 1));
                    if !(FC1 && k >= 8) && col < n_cols && piece < used {
                        let v = lds_v4(out_stage + col * stride + 16 * piece);
                        let row = if FC1 {
                            (slot0 + col) as u64 * (p.rows / 2) as u64 + 16 * task0 as u64
                        } else {
                            pair[k] as u64 * p.rows as u64 + 32 * task0 as u64
                        };
                        stg_v4(p.output + 2 * row + 16 * piece as u64, v);
                    }
                });
            }
        } else if busy {
            store_fc2_f32::<BF16>(p, &acc, alpha.0, 2 * task0 + warp, n_cols, post, tab);
        }
        tile = next;
        parity ^= 1;
    }
    if tma {
        // Every copy was waited for; the barriers' memory may be reused
        // (the mixed kernels' narrow tiles).
        sync();
        if t0 == 0 {
            let mut b = 0;
            while b < 2 * STAGES {
                mbar_inval(full_at(base, b));
                b += 1;
            }
        }
    }
}

/// `f(j)` for the 32 column tiles.
macro_rules! each_tile {
    (|$j:ident| $body:expr) => {
        unroll!(4, |j0| unroll!(8, |j1| {
            let $j = 8 * j0 + j1;
            $body
        }))
    };
}

/// FC1 into the staging tile: warp `w`'s 8 channels (block channels `8 w
/// ..`: mtile `w % 2` of task `w / 2`) of the 256 columns, 16-bit h at
/// [`fc1_stage_at`] (the block's first channel, 16 x its first task, is a
/// multiple of 64: the h row piece's permutation is the row's); `alpha`:
/// the expert's global scales of the gate and up rows.
#[inline(always)]
unsafe fn stage_fc1<const BF16: bool>(
    p: &FcParams,
    acc: &[[f32; 4]; NT],
    (alpha_g, alpha_u): (f32, f32),
    w: u32,
    post: f32,
    stage: u32,
) {
    let (ag, au) = (alpha_g * post, alpha_u * post);
    let lane = tid() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let gate = Gate::of(p);
    let at = fc1_stage_at(0, 8 * w + g, PFW256_OUT_STRIDE_FC1);
    macro_rules! store_with {
        ($act:expr) => {
            each_tile!(|j| unroll!(2, |u| {
                let col = 8 * j as u32 + 2 * t + u as u32;
                // Every column is stored: those past the group's pairs
                // (copies of its first) are never copied out, and a check
                // cost a branch per output (run 93: -4.5 % on the layer).
                let h = $act(acc[j][u] * ag, acc[j][2 + u] * au);
                sts_u16(stage + col * PFW256_OUT_STRIDE_FC1 + at, to_half_bits::<BF16>(h));
            }))
        };
    }
    // Plain SiLU without the clamps' instructions (run 95: -2.3 % on
    // Qwen3's layer at M = 8192; the same bits).
    if gate.plain() {
        store_with!(Gate::silu)
    } else {
        store_with!(|g, u| gate.apply(g, u))
    }
}

/// FC2 into the staging tile (16-bit y): `alpha2 x w(column) x acc` of
/// warp `w`'s 16 rows (block rows `16 w ..`), column `c`'s values at
/// `stage + c x stride + 2 x` the block row. One `stmatrix .trans` per two
/// column tiles: matrix `q` is column tile `2 jj + q / 2`, rows `8 (q % 2)
/// ..`; lane `8 q + i` addresses its column `i`.
#[inline(always)]
unsafe fn stage_fc2<const BF16: bool>(
    acc: &[[f32; 4]; NT],
    alpha2: f32,
    w: u32,
    post: f32,
    weight: impl Fn(u32) -> f32,
    stage: u32,
) {
    let lane = tid() % 32;
    let t = lane % 4;
    let (q, i) = (lane / 8, lane % 8);
    let a2 = alpha2 * post;
    let pack = |lo: f32, hi: f32| if BF16 { pack_bf16x2(lo, hi) } else { pack_f16x2(lo, hi) };
    let row_at = stage + 2 * (16 * w + 8 * (q % 2));
    unroll!(2, |h0| unroll!(8, |h1| {
        let jj = 8 * h0 + h1;
        let (j0, j1) = (2 * jj, 2 * jj + 1);
        let (c0, c1) = (8 * j0 as u32 + 2 * t, 8 * j1 as u32 + 2 * t);
        let (s00, s01) = (weight(c0) * a2, weight(c0 + 1) * a2);
        let (s10, s11) = (weight(c1) * a2, weight(c1 + 1) * a2);
        let v = [
            pack(acc[j0][0] * s00, acc[j0][1] * s01),
            pack(acc[j0][2] * s00, acc[j0][3] * s01),
            pack(acc[j1][0] * s10, acc[j1][1] * s11),
            pack(acc[j1][2] * s10, acc[j1][3] * s11),
        ];
        let col = 8 * (j0 as u32 + q / 2) + i;
        stmatrix_x4_trans(row_at + col * PFW256_OUT_STRIDE_FC2, v);
    }));
}

/// FC2 with f32 y: `y[pair, row] = alpha2 x w x acc` stored directly for
/// the 16 rows of mtile `m` (rows `16 m ..` of the expert: `m` = 2 x the
/// block's first task + warp) and the group's pairs and weights from the
/// table at `tab`.
#[inline(always)]
unsafe fn store_fc2_f32<const BF16: bool>(
    p: &FcParams,
    acc: &[[f32; 4]; NT],
    alpha2: f32,
    m: u32,
    n_cols: u32,
    post: f32,
    tab: u32,
) {
    let lane = tid() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let a2 = alpha2 * post;
    let row = (16 * m + g) as u64;
    each_tile!(|j| unroll!(2, |u| {
        let col = 8 * j as u32 + 2 * t + u as u32;
        if col < n_cols {
            let pair = lds(tab + 4 * col) as u64;
            let w = f32::from_bits(lds(tab + 4 * (COLS + col))) * a2;
            let y = p.output + 4 * pair * p.rows as u64;
            stg_u32(y + 4 * row, (acc[j][u] * w).to_bits());
            stg_u32(y + 4 * (row + 8), (acc[j][2 + u] * w).to_bits());
        }
    }));
}

macro_rules! w256_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal, $tma:literal;)*) => {$(
        /// `wgmma` 128-row x 256-pair prefill GEMM instance `(FC1?,
        /// bf16?, TMA?)`; see the module docs (`TMA`: `p.tmap` set).
        ///
        /// # Safety
        /// `p` as [`FcParams`] documents, routed with `group = 256`,
        /// `narrow = 0`; [`PFW_THREADS`] threads,
        /// `pfw256_smem_bytes()` bytes of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            griddep_wait();
            griddep_launch_dependents();
            prefill_w256::<$fc1, $bf16, $tma>(&p, ldg_u32_coherent(p.n_active + 4), bid(), 0)
        }
    )*};
}

/// The mixed kernels' narrow tiles: this block's share of them, continuing
/// its stride over the wide tiles (`bid, bid + gdim, ..` over the wide tiles,
/// then over the narrow ones).
#[inline(always)]
unsafe fn narrow_part<const FC1: bool, const BF16: bool>(p: &FcParams) {
    let zero = opaque(0);
    let (wide, narrow) = (ldg_u32_coherent(p.n_active + 4), ldg_u32_coherent(p.n_active + 8));
    let wide_tiles = wide * blocks_per_group(p.rows) + zero;
    let first = stride_first_from(wide_tiles) - wide_tiles;
    super::prefill_wg::narrow_tiles::<FC1, BF16>(p, wide, narrow, first, zero);
}

macro_rules! w256_mixed_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal, $tma:literal;)*) => {$(
        /// `wgmma` prefill GEMM instance `(FC1?, bf16?, TMA?)` for mixed
        /// groups (`TMA`: `p.tmap` set):
        /// the 256-pair groups on 128-row tiles, then the narrow ones (at
        /// most 64 pairs) on 256-row x 64-pair tiles, as one sequence of
        /// tiles over the grid.
        ///
        /// # Safety
        /// `p` as [`FcParams`] documents, routed with `group = 256`,
        /// `narrow = 64`; [`PFW_THREADS`] threads, `pfw256_mix_smem_bytes()`
        /// bytes of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            griddep_wait();
            griddep_launch_dependents();
            // The wide tiles, then the narrow ones.
            #[cfg(not(moe4_exp = "nfirst"))]
            {
                prefill_w256::<$fc1, $bf16, $tma>(&p, ldg_u32_coherent(p.n_active + 4), bid_here(), opaque(0));
                sync();
                narrow_part::<$fc1, $bf16>(&p);
            }
            // `nfirst` builds (an experiment): odd blocks run their narrow
            // tiles first, so that the narrow tiles' weight reads (bound by
            // DRAM bandwidth when every block runs them at once) overlap
            // other blocks' wide tiles. (One call site of the wide loop:
            // with two, FC2 spilled a word; with one of each in a two-phase
            // loop, ptxas serialized the `wgmma`s.)
            #[cfg(moe4_exp = "nfirst")]
            {
                if bid_here() % 2 == 1 {
                    narrow_part::<$fc1, $bf16>(&p);
                    sync();
                }
                prefill_w256::<$fc1, $bf16, $tma>(&p, ldg_u32_coherent(p.n_active + 4), bid_here(), opaque(0));
                if bid_here() % 2 == 0 {
                    sync();
                    narrow_part::<$fc1, $bf16>(&p);
                }
            }
        }
    )*};
}

w256_kernels! {
    moe_pfw1_bf16_n256: true, true, false;
    moe_pfw1_f16_n256: true, false, false;
    moe_pfw2_bf16_n256: false, true, false;
    moe_pfw2_f16_n256: false, false, false;
}

// The TMA-fed FC2 (`moe4_exp = "tma"` builds while it is measured).
#[cfg(moe4_exp = "tma")]
w256_kernels! {
    moe_pfw2_bf16_n256_tma: false, true, true;
    moe_pfw2_f16_n256_tma: false, false, true;
}

w256_mixed_kernels! {
    moe_pfw1_bf16_mix256: true, true, false;
    moe_pfw1_f16_mix256: true, false, false;
    moe_pfw2_bf16_mix256: false, true, false;
    moe_pfw2_f16_mix256: false, false, false;
}

#[cfg(moe4_exp = "tma")]
w256_mixed_kernels! {
    moe_pfw2_bf16_mix256_tma: false, true, true;
    moe_pfw2_f16_mix256_tma: false, false, true;
}
