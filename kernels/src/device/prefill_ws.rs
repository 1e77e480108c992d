//! `moe_pfs1_*`, `moe_pfs2_*`: the `wgmma` prefill grouped GEMMs
//! ([`super::prefill_wg`]) with the copies moved to a warpgroup of their
//! own (sm_90a builds).
//!
//! **Why.** In `moe_pfw*` every warp copies, waits for its copies, meets the
//! block at a barrier, decodes and issues `wgmma`s, one chunk at a time;
//! the profile (docs/perf-notes.md, runs 15-29) had the non-tensor side
//! (~238 instructions per warp and chunk, ~110 of them the decode) at low
//! IPC as the bound, with the tensor pipe ~55 % busy. Here the decoding
//! warps do only the decode, the `wgmma`s and an `mbarrier` wait per chunk.
//!
//! **Roles.** 384 threads: warpgroup 0 is the producer (its registers
//! lowered to [`PRODUCER_REGS`] by `setmaxnreg`), warpgroups 1 and 2 the
//! consumers ([`CONSUMER_REGS`]). The tile, the consumers' math and the
//! epilogues are `moe_pfw*`'s: 256 weight rows (consumer warp `w` the
//! layout task `w` of the block) x `8 NT` pairs of a column group.
//!
//! **Pipeline.** [`PFS_STAGES`] stages (activations, 8 tasks' codes and
//! scales: [`pfw_stage_bytes`]) with two `mbarrier`s each. `full[s]`
//! expects the 128 producer threads: each issues its `cp.async`s of the
//! stage and arrives when they have landed (`cp.async.mbarrier.arrive`),
//! so the producer never waits for its own copies. `empty[s]` expects the
//! 256 consumer threads: a consumer arrives once the `wgmma`s that read the
//! stage have completed (at step 2 of the next chunk, or at the tile's
//! end); the producer waits for it before refilling. Use `u` of a stage is
//! phase `u` of both barriers. The consumers fence the async proxy after
//! each wait (the copies are generic-proxy writes, `wgmma` reads through
//! the async proxy). FC2's pair/weight tables (two, by tile parity) have an
//! `mbarrier` each that the consumers arrive at after the epilogue that
//! read them; the producer copies a tile's table with its first chunk.
//!
//! Producer and consumers walk the same tiles (tile `bid() + i gdim()`) and
//! the same chunk sequence, each counting chunks for the stage and phase.

use super::arch::*;
use super::fc::{dequant_step, epilogue_fc1, epilogue_fc2_with, lane_scales, post};
use super::wgmma;
use crate::launch::{pfw_stage_bytes, PFS_LAG, PFS_STAGES, PFS_THREADS};
use crate::params::FcParams;
use crate::tile::{CHUNK_CODE_BYTES, CHUNK_SCALE_BYTES, KCHUNK, MTILES, TASK_ROWS};

const STAGES: u32 = PFS_STAGES;
const _: () = assert!(STAGES.is_power_of_two());
/// Consumer warps (one layout task each).
const WARPS: u32 = 8;
/// Producer threads.
const PT: u32 = PFS_THREADS - 32 * WARPS;
const CODE_BYTES: u32 = WARPS * CHUNK_CODE_BYTES as u32; // 8 KiB
/// Registers per thread of the producer and the consumers after
/// `setmaxnreg` (128 x 64 + 256 x 216 <= 64 K).
const PRODUCER_REGS: u32 = 64;
const CONSUMER_REGS: u32 = 216;
const _: () = assert!(PT * PRODUCER_REGS + 32 * WARPS * CONSUMER_REGS <= 65536);
/// Chunks per iteration of the consumers' main loop (ptxas drains the
/// `wgmma` pipeline at loop back-edges).
const UNROLL: u32 = 4;

/// The work of tile `tile` (`tpb` 256-row blocks per group, `tpe` tasks
/// per expert): column group, expert, its first slot and pairs, the
/// block's first task and number of tasks (at most [`WARPS`]).
#[derive(Clone, Copy)]
struct Work {
    gi: u32,
    e: u32,
    slot0: u32,
    n_cols: u32,
    task0: u32,
    ntask: u32,
}

impl Work {
    #[inline(always)]
    unsafe fn of(p: &FcParams, tile: u32, tpb: u32, tpe: u32) -> Work {
        let (gi, rb) = (tile / tpb, tile % tpb);
        let rec = p.groups + 16 * gi as u64;
        let (e, slot0, n_cols) = (ldg_u32_coherent(rec), ldg_u32_coherent(rec + 4), ldg_u32_coherent(rec + 8));
        let task0 = rb * WARPS;
        let ntask = if tpe - task0 < WARPS { tpe - task0 } else { WARPS };
        Work { gi, e, slot0, n_cols, task0, ntask }
    }
}

/// The shared-memory layout: stages from `base` (1024-byte aligned), then
/// the two tables, then the barriers.
#[derive(Clone, Copy)]
struct Smem {
    base: u32,
    stage_bytes: u32,
    tables: u32,
    bars: u32,
}

impl Smem {
    #[inline(always)]
    fn new(cols: u32) -> Smem {
        let base = (smem() + 1023) & !1023;
        let stage_bytes = pfw_stage_bytes(cols);
        let tables = base + STAGES * stage_bytes;
        Smem { base, stage_bytes, tables, bars: tables + 16 * cols }
    }
    #[inline(always)]
    fn stage(&self, q: u32) -> u32 {
        self.base + (q % STAGES) * self.stage_bytes
    }
    #[inline(always)]
    fn empty(&self, q: u32) -> u32 {
        self.bars + 8 * (q % STAGES)
    }
    /// The barrier of table `parity`.
    #[inline(always)]
    fn tab_free(&self, parity: u32) -> u32 {
        self.bars + 8 * (STAGES + parity)
    }
    #[inline(always)]
    fn table(&self, parity: u32, cols: u32) -> u32 {
        self.tables + parity * 8 * cols
    }
}

/// A producer thread's copy sources of a tile at chunk 0 (chunk `c` adds
/// `c` x 128 bytes of activations, `c` KiB of codes, `c` x 128 bytes of
/// scales), with whether each is valid; invalid pieces are zero-filled
/// from an in-bounds address. `RPT` activation rows per thread.
struct Sources<const RPT: usize> {
    /// Offsets from `p.input` and `p.codes` in 16-byte units (fewer
    /// registers than pointers: the producer runs on [`PRODUCER_REGS`]).
    xsrc: [u32; RPT],
    xok: [bool; RPT],
    csrc: [u32; 4],
    cok: [bool; 4],
    ssrc: u64,
    sok: bool,
}

impl<const RPT: usize> Sources<RPT> {
    #[inline(always)]
    unsafe fn new<const FC1: bool>(p: &FcParams, w: &Work, t: u32, tpe: u32, nchunks: u32) -> Sources<RPT> {
        // Activations: 16-byte piece `t % 8` of rows `t / 8 + 16 i`.
        let (q, rsub) = (t % 8, t / 8);
        let mut xsrc = [0u32; RPT];
        let mut xok = [false; RPT];
        unroll!(RPT, |i| {
            let r = rsub + 16 * i as u32;
            if r < w.n_cols {
                let slot = w.slot0 + r;
                let row = if FC1 { ldg_u32_coherent(p.sorted_pairs + 4 * slot as u64) / p.topk } else { slot };
                xsrc[i] = row * (p.k / 8) + q;
                xok[i] = true;
            }
        });
        // Codes: 8 tasks x 1 KiB, 4 x 16 B per thread; scales: 8 x 128 B.
        let task_base = (w.e * tpe + w.task0) as u64 * nchunks as u64;
        let mut csrc = [0u32; 4];
        let mut cok = [false; 4];
        unroll!(4, |j| {
            let idx = t + PT * j as u32;
            let task = idx / 64;
            if task < w.ntask {
                let at = (task_base + task as u64 * nchunks as u64) * (CHUNK_CODE_BYTES / 16) as u64;
                csrc[j] = at as u32 + idx % 64;
                cok[j] = true;
            }
        });
        let sok = t < 64 && t / 8 < w.ntask;
        let ssrc = if sok {
            let at = (task_base + (t / 8) as u64 * nchunks as u64) * CHUNK_SCALE_BYTES as u64;
            p.scales + at + 16 * (t % 8) as u64
        } else {
            p.scales
        };
        Sources { xsrc, xok, csrc, cok, ssrc, sok }
    }

    /// Chunk `c`'s copies into the stage at `sb` (activations, codes,
    /// scales: [`pfw_stage_bytes`]).
    #[inline(always)]
    unsafe fn load(&self, p: &FcParams, t: u32, c: u32, sb: u32, x_bytes: u32) {
        let (q, rsub) = (t % 8, t / 8);
        // Row `rsub + 16 i`, swizzled: piece `q ^ (row % 8)`.
        let xdst = sb + rsub * 128 + 16 * (q ^ (rsub % 8));
        unroll!(RPT, |i| {
            let src = p.input + 16 * (self.xsrc[i] + 8 * c) as u64;
            cp_async16_zfill(xdst + 2048 * i as u32, src, self.xok[i]);
        });
        unroll!(4, |j| {
            let dst = sb + x_bytes + 16 * (t + PT * j as u32);
            let src = p.codes + 16 * (self.csrc[j] + c * (CHUNK_CODE_BYTES / 16) as u32) as u64;
            cp_async16_zfill(dst, src, self.cok[j]);
        });
        if t < 64 {
            let dst = sb + x_bytes + CODE_BYTES + 16 * t;
            cp_async16_zfill(dst, self.ssrc + (c * CHUNK_SCALE_BYTES as u32) as u64, self.sok);
        }
    }
}

/// Stages a producer thread may have copying before it hands the oldest
/// over (its `cp.async` groups in flight past the one it signals).
const LAG: u32 = PFS_LAG;
const _: () = assert!(LAG < STAGES);

/// Named barrier of stage `q % S`'s "full" handoff (1.., 0 is `sync`).
#[inline(always)]
fn full_bar(q: u32) -> u32 {
    1 + q % STAGES
}

/// The producer warpgroup: every tile's chunks into the stages, in order.
/// A stage is handed over (`bar.arrive` on its [`full_bar`], which the
/// consumers `bar.sync`) once its copies have landed: `LAG` commit groups
/// after it was issued; the block's last tile runs `LAG` more iterations
/// with empty groups to hand over its last chunks. (One hand-over site in
/// the chunk loop: with a flush after the loops, ptxas serialized the
/// consumers' `wgmma`s, C7518.)
///
/// FC2's table of tile `n` waits for tile `n - 2`'s epilogue, which needs
/// every chunk of that tile handed over: with at least `LAG` chunks per
/// tile (`p.k >= 64 LAG`, the host's condition for these kernels) the only
/// chunks still held back then belong to tile `n - 1`.
#[inline(always)]
unsafe fn produce<const FC1: bool, const RPT: usize>(
    p: &FcParams,
    sm: Smem,
    cols: u32,
    tiles: u32,
    tpb: u32,
    tpe: u32,
) {
    let t = tid();
    let nchunks = p.k / KCHUNK as u32;
    let x_bytes = cols * 128;
    // Chunks issued, commit groups, chunks handed over, tiles started.
    let (mut q, mut groups, mut sig, mut n) = (0u32, 0u32, 0u32, 0u32);
    let mut tile = bid();
    while tile < tiles {
        let w = Work::of(p, tile, tpb, tpe);
        let src = Sources::<RPT>::new::<FC1>(p, &w, t, tpe, nchunks);
        let iters = if tile + gdim() >= tiles { nchunks + LAG } else { nchunks };
        let mut c = 0;
        while c < iters {
            if c < nchunks {
                if q >= STAGES {
                    // Use q / S of the stage: phase q / S - 1 of `empty` done.
                    mbar_wait(sm.empty(q), (q / STAGES - 1) & 1);
                }
                if !FC1 && c == 0 && (64..64 + cols / 2).contains(&t) {
                    // The group's pairs and routing weights for FC2's
                    // epilogue, once the epilogue two tiles back is done
                    // with the table.
                    let parity = n & 1;
                    if n >= 2 {
                        mbar_wait(sm.tab_free(parity), (n / 2 - 1) & 1);
                    }
                    let j = t - 64; // 16-byte piece j of the pairs (j < cols / 4), then of the weights
                    let (from, at) =
                        if j < cols / 4 { (p.group_rows, 16 * j) } else { (p.group_w, 16 * (j - cols / 4)) };
                    cp_async16(
                        sm.table(parity, cols) + if j < cols / 4 { 0 } else { 4 * cols } + at,
                        from + 4 * (w.gi * cols) as u64 + at as u64,
                    );
                }
                src.load(p, t, c, sm.stage(q), x_bytes);
                q += 1;
            }
            cp_async_commit();
            groups += 1;
            if groups - sig > LAG {
                // Chunk `sig`'s group has landed once at most LAG are
                // pending; fence its copies for the consumers' wgmma reads.
                cp_async_wait::<LAG>();
                wgmma::fence_proxy_async();
                bar_arrive(full_bar(sig), PFS_THREADS);
                sig += 1;
            }
            c += 1;
        }
        n += 1;
        tile += gdim();
    }
}

/// A consumer warpgroup (consumer warp `cw` = 0..8): every tile's chunks
/// from the stages, then its epilogue.
#[inline(always)]
unsafe fn consume<const FC1: bool, const BF16: bool, const NT: usize>(
    p: &FcParams,
    sm: Smem,
    tiles: u32,
    tpb: u32,
    tpe: u32,
) {
    let cols = 8 * NT as u32;
    let x_bytes = cols * 128;
    let cw = shfl_idx(tid() / 32, 0) - PT / 32; // warp-uniform, as the role
    let lane = tid() % 32;
    let nchunks = p.k / KCHUNK as u32;
    let post = post::<BF16>();
    let (mut q0, mut n) = (0u32, 0u32);
    let mut tile = bid();
    while tile < tiles {
        let w = Work::of(p, tile, tpb, tpe);
        let busy = (cw / 4) * 4 < w.ntask;
        let mut acc = [[[0f32; 4]; NT]; MTILES];
        // Chunk `c` (sequence number `q`): wait for its stage, decode and
        // issue its 4 k-steps; free the previous chunk's stage once its
        // wgmmas are done.
        let chunk = |c: u32, q: u32, acc: &mut [[[f32; 4]; NT]; MTILES]| {
            bar_sync(full_bar(q), PFS_THREADS);
            if busy {
                let sb = sm.stage(q);
                let cb = sb + x_bytes + cw * 1024;
                let wa = [lds_v4(cb + 16 * lane), lds_v4(cb + 512 + 16 * lane)];
                let sc = lane_scales::<BF16>(lds(sb + x_bytes + CODE_BYTES + cw * 128 + 4 * lane));
                // As moe_pfw*: step st + 1 is decoded before step st is
                // issued; step st's registers were last read by step st of
                // the previous chunk.
                wgmma::wait::<3>();
                let a_of = |st: usize| {
                    [
                        dequant_step::<BF16>(wa[0][st], sc[0][0], sc[0][1]),
                        dequant_step::<BF16>(wa[1][st], sc[1][0], sc[1][1]),
                    ]
                };
                let mut a = [a_of(0), [[0; 4]; MTILES]];
                unroll!(4, |st| {
                    if st < 3 {
                        wgmma::wait::<2>();
                        if st == 2 {
                            // The previous chunk's wgmmas are all done.
                            mbar_arrive_if(sm.empty(q.wrapping_sub(1)), c > 0);
                        }
                        a[(st + 1) % 2] = a_of(st + 1);
                    }
                    let cur = a[st % 2];
                    wgmma::fence();
                    let desc = wgmma::desc_sw128(sb + 32 * st as u32);
                    wgmma::mma::<BF16, NT>(&mut acc[0], cur[0], desc, true);
                    wgmma::mma::<BF16, NT>(&mut acc[1], cur[1], desc, true);
                    wgmma::commit();
                });
            } else {
                mbar_arrive(sm.empty(q));
            }
        };
        let mut c = 0;
        while c < nchunks {
            unroll!(UNROLL as usize, |u| {
                if c + (u as u32) < nchunks {
                    chunk(c + u as u32, q0 + c + u as u32, &mut acc)
                }
            });
            c += UNROLL;
        }
        if busy {
            wgmma::wait::<0>();
            unroll!(MTILES, |mt| wgmma::hold_f32(&mut acc[mt]));
            mbar_arrive(sm.empty(q0 + nchunks - 1));
        }
        q0 += nchunks;
        if cw < w.ntask {
            let r = w.task0 + cw;
            if FC1 {
                epilogue_fc1::<BF16, NT, true>(p, &acc, w.e, r, w.slot0, w.n_cols, post);
            } else {
                // The group's pairs and weights, copied with its first chunk.
                let tab = sm.table(n & 1, cols);
                let pair_w = |col: u32| (lds(tab + 4 * col), f32::from_bits(lds(tab + 4 * (cols + col))));
                epilogue_fc2_with::<NT>(p, &acc, w.e, r, w.n_cols, post, pair_w);
            }
        }
        if !FC1 {
            mbar_arrive(sm.tab_free(n & 1));
        }
        n += 1;
        tile += gdim();
    }
}

#[inline(always)]
unsafe fn prefill_ws<const FC1: bool, const BF16: bool, const NT: usize, const RPT: usize>(p: &FcParams) {
    const { assert!(RPT * 16 == NT * 8) };
    let cols = 8 * NT as u32;
    let sm = Smem::new(cols);
    if tid() == 0 {
        unroll!(STAGES as usize, |s| {
            mbar_init(sm.empty(s as u32), 32 * WARPS);
        });
        mbar_init(sm.tab_free(0), 32 * WARPS);
        mbar_init(sm.tab_free(1), 32 * WARPS);
    }
    sync();
    // Programmatic dependent launch: the previous kernel in the stream is
    // complete (its writes visible) after this; then let the next launch.
    griddep_wait();
    griddep_launch_dependents();
    // The warpgroup as a value ptxas knows is warp-uniform (a broadcast):
    // with `tid() < PT` it serialized the consumers' wgmmas (C7518). Each
    // role works out the rest after `setmaxnreg` (values live across it
    // spilled).
    if shfl_idx(tid() / 128, 0) == 0 {
        wgmma::regs_dec::<PRODUCER_REGS>();
        let (tiles, tpb, tpe) = tiles(p);
        produce::<FC1, RPT>(p, Smem::new(cols), cols, tiles, tpb, tpe);
    } else {
        wgmma::regs_inc::<CONSUMER_REGS>();
        let (tiles, tpb, tpe) = tiles(p);
        consume::<FC1, BF16, NT>(p, Smem::new(cols), tiles, tpb, tpe);
    }
}

/// (tiles, 256-row blocks per group, tasks per expert) of the launch.
#[inline(always)]
unsafe fn tiles(p: &FcParams) -> (u32, u32, u32) {
    let groups = ldg_u32_coherent(p.n_active + 4);
    // (Kept below the caller's `setmaxnreg`: hoisted above it, the value
    // spilled across it.)
    let tpe = opaque(p.rows) / TASK_ROWS as u32;
    let tpb = tpe.div_ceil(WARPS);
    (groups * tpb, tpb, tpe)
}

macro_rules! pfs_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal, $nt:literal;)*) => {$(
        /// Warp-specialized `wgmma` prefill GEMM instance `(FC1?, bf16?,
        /// column tiles)`; see the module docs.
        ///
        /// # Safety
        /// `p` as [`FcParams`] documents, routed with `group = 8 * NT`;
        /// [`PFS_THREADS`] threads, `pfs_smem_bytes(8 * NT)` bytes of
        /// dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            prefill_ws::<$fc1, $bf16, $nt, { $nt / 2 }>(&p)
        }
    )*};
}

pfs_kernels! {
    moe_pfs1_bf16_n128: true, true, 16;
    moe_pfs1_f16_n128: true, false, 16;
    moe_pfs2_bf16_n128: false, true, 16;
    moe_pfs2_f16_n128: false, false, 16;
    moe_pfs1_bf16_n64: true, true, 8;
    moe_pfs1_f16_n64: true, false, 8;
    moe_pfs2_bf16_n64: false, true, 8;
    moe_pfs2_f16_n64: false, false, 8;
}
