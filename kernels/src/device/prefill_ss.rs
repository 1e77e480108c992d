//! `moe_pss1_*`, `moe_pss2_*`: the `wgmma` prefill grouped GEMMs with the
//! weights decoded once per tile into shared memory (sm_90a builds).
//!
//! **Why.** In `moe_pfw*` ([`super::prefill_wg`]) every warp decodes its
//! A fragments into registers and issues the `wgmma`s that read them: with
//! two warps per scheduler that decode-and-issue chain, not the tensor
//! pipe, sets the pace (docs/perf-notes.md, runs 15-29 and 48-50). Here a
//! producer warpgroup does all the non-tensor work (copies, the E2M1
//! decode) and writes the decoded weights to shared memory, where the
//! consumers' `wgmma`s read both operands (SS): the consumers issue little
//! more than `wgmma`s and barriers.
//!
//! **Tile and roles.** 384 threads. Warpgroup 0 is the producer (its
//! registers lowered to [`PRODUCER_REGS`] by `setmaxnreg`), warpgroups 1
//! and 2 the consumers ([`CONSUMER_REGS`]). A tile is `moe_pfw*`'s: 256
//! weight rows (8 layout tasks) x `8 NT` pairs of a column group; consumer
//! warp `w` (0..8) ends up holding task `w`'s accumulators in the
//! `mma.m16n8` C layout, so the epilogues are `moe_pfw*`'s.
//!
//! **Decoded weights.** Per chunk (64 k) a stage holds 256 rows of 128
//! bytes, the 128-byte-swizzled K-major layout [`wgmma::desc_sw128`] names:
//! mtile `m` of task `t` at rows `128 (t / 4) + 64 m + 16 (t % 4)`, so the
//! `m64` slice of consumer warpgroup `g` for mtile `m` starts at row
//! `128 g + 64 m`, and its warp `t % 4` receives rows `16 (t % 4) ..` of it.
//! Each producer warp decodes two tasks: a lane's word `s` of mtile `m` is
//! the `mma` A fragment of k-step `s` ([`crate::tile`]), which `stmatrix`
//! stores as the four 8 x 8 quarters of the 16 x 16 slice; its k order is
//! the [`crate::tile::wgmma_permuted`] one the activations follow, so A
//! and B agree on k.
//!
//! **Pipeline.** [`PSS_COPY_STAGES`] copy stages (a chunk's activations,
//! its codes and scales; each lane copies exactly the code and scale bytes
//! it decodes, so it reads them without a barrier) and [`PSS_A_STAGES`]
//! decoded stages. Per chunk `q` (counted over the block's tiles) the
//! producer waits until the consumers are done with chunk
//! `q - PSS_COPY_STAGES` (named barrier `empty`), copies chunk `q` (one
//! commit group), then decodes chunk `q - PSS_LAG`, whose copies have landed,
//! into the decoded stage that chunk `q - PSS_COPY_STAGES` used, fences it
//! for the async proxy and hands it over (`bar.arrive` on `full`). A
//! consumer waits at `full`, issues the chunk's 8 `wgmma`s, and releases the
//! previous chunk once they completed (`wgmma.wait_group 1`, `bar.arrive`
//! on `empty`). The producer keeps no per-tile state for the decode
//! (zero-filled codes decode to zeros), so its lag crosses tile boundaries;
//! the block's last tile runs `PSS_LAG` more iterations (waits included) to
//! hand its last chunks over.
//!
//! **Measured** (docs/perf-notes.md, runs 64-67): correct, and 35-40 %
//! slower than `moe_pfw*`; off by default (`Tuning::wgmma_ss`).
//!
//! **Work and epilogues** as `moe_pfw*`: tiles = (column group of an
//! active expert, 256-row block), tile `bid() + i gdim()` for both roles;
//! FC1 writes h (permuted) with the gated activation, FC2 alpha2 x routing
//! weight x acc to y, reading the group's pairs and weights itself.

use super::arch::*;
use super::fc::{dequant_step, epilogue_fc1, epilogue_fc2, lane_scales, post};
use super::wgmma;
use crate::launch::{pss_copy_bytes, PSS_A_STAGES, PSS_COPY_STAGES, PSS_LAG, PSS_THREADS};
use crate::params::FcParams;
use crate::tile::{CHUNK_CODE_BYTES, CHUNK_SCALE_BYTES, KCHUNK, MTILES, TASK_ROWS};

const STAGES: u32 = PSS_COPY_STAGES;
const A_STAGES: u32 = PSS_A_STAGES;
const LAG: u32 = PSS_LAG;
const _: () = assert!(LAG + A_STAGES == STAGES && 2 * STAGES < 16);
/// Consumer warps (one layout task each).
const WARPS: u32 = 8;
/// Producer threads.
const PT: u32 = PSS_THREADS - 32 * WARPS;
/// Decoded weights per stage: 256 rows of 128 bytes.
const A_BYTES: u32 = WARPS * TASK_ROWS as u32 * 128;
/// Offset of the scales in a copy stage's raw codes (after 8 tasks' codes).
const RAW_SCALES: u32 = WARPS * CHUNK_CODE_BYTES as u32;
/// Registers per thread of the producer and the consumers after
/// `setmaxnreg` (launched at 168: 384 x 168 <= 64 K; the producer gives
/// back 128 x 96, the consumers take 256 x 48).
const PRODUCER_REGS: u32 = 72;
const CONSUMER_REGS: u32 = 216;
const _: () = assert!(PT * (168 - PRODUCER_REGS) == 32 * WARPS * (CONSUMER_REGS - 168));
/// Chunks per iteration of the consumers' main loop.
const UNROLL: u32 = 4;

/// Named barrier of stage `q`'s hand-over to the consumers (1..; 0 is
/// `sync`'s).
#[inline(always)]
fn full_bar(q: u32) -> u32 {
    1 + q % STAGES
}
/// Named barrier of stage `q`'s release back to the producer.
#[inline(always)]
fn empty_bar(q: u32) -> u32 {
    1 + STAGES + q % STAGES
}

/// The work of tile `tile` (`tpb` 256-row blocks per group, `tpe` tasks
/// per expert): column group, expert, its first slot and pairs, the
/// block's first task and number of tasks (at most [`WARPS`]).
#[derive(Clone, Copy)]
struct Work {
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
        Work { e, slot0, n_cols, task0, ntask }
    }
}

/// The shared-memory layout: the decoded stages from `base` (1024-byte
/// aligned), then the copy stages.
#[derive(Clone, Copy)]
struct Smem {
    base: u32,
    copies: u32,
    copy_bytes: u32,
    x_bytes: u32,
}

impl Smem {
    #[inline(always)]
    fn new(cols: u32) -> Smem {
        let base = (smem() + 1023) & !1023;
        Smem { base, copies: base + A_STAGES * A_BYTES, copy_bytes: pss_copy_bytes(cols), x_bytes: cols * 128 }
    }
    /// Decoded weights of chunk `q`.
    #[inline(always)]
    fn a(&self, q: u32) -> u32 {
        self.base + (q % A_STAGES) * A_BYTES
    }
    /// Copy stage of chunk `q`: its activations.
    #[inline(always)]
    fn x(&self, q: u32) -> u32 {
        self.copies + (q % STAGES) * self.copy_bytes
    }
    /// Copy stage of chunk `q`: its raw codes, then scales.
    #[inline(always)]
    fn raw(&self, q: u32) -> u32 {
        self.x(q) + self.x_bytes
    }
}

/// (tiles, 256-row blocks per group, tasks per expert) of the launch, and
/// the number of chunks this block runs over all its tiles.
#[inline(always)]
unsafe fn tiles(p: &FcParams) -> (u32, u32, u32, u32) {
    let groups = ldg_u32_coherent(p.n_active + 4);
    // (Kept below the caller's `setmaxnreg`: hoisted above it, a value
    // would stay live across it.)
    let tpe = opaque(p.rows) / TASK_ROWS as u32;
    let tpb = tpe.div_ceil(WARPS);
    let tiles = groups * tpb;
    let b = bid_here();
    let mine = if b < tiles { (tiles - b).div_ceil(gdim()) } else { 0 };
    (tiles, tpb, tpe, mine * (p.k / KCHUNK as u32))
}

/// A producer thread's copy sources of a tile at chunk 0 (chunk `c` adds
/// `c` x 128 bytes of activations, `c` KiB of codes, `c` x 128 bytes of
/// scales), with whether each is valid; invalid pieces are zero-filled
/// from an in-bounds address. `RPT` activation rows per thread.
struct Sources<const RPT: usize> {
    /// Activations: offsets from `p.input` in 16-byte units, valid for
    /// `i < nx` (rows past the group's pairs are zero-filled; a count, not
    /// `RPT` flags: the producer runs on [`PRODUCER_REGS`]).
    xsrc: [u32; RPT],
    nx: u32,
    /// This warp's two tasks as `(expert task) x nchunks` (chunk 0's index
    /// in the codes and scales, in chunks), and whether each is valid.
    at: [u32; 2],
    ok: [bool; 2],
}

impl<const RPT: usize> Sources<RPT> {
    #[inline(always)]
    unsafe fn new<const FC1: bool>(p: &FcParams, w: &Work, t: u32, tpe: u32, nchunks: u32) -> Sources<RPT> {
        // Activations: 16-byte piece `t % 8` of rows `t / 8 + 16 i`.
        let (q, rsub) = (t % 8, t / 8);
        let mut xsrc = [0u32; RPT];
        unroll!(RPT, |i| {
            let r = rsub + 16 * i as u32;
            if r < w.n_cols {
                let slot = w.slot0 + r;
                let row = if FC1 { ldg_u32_coherent(p.sorted_pairs + 4 * slot as u64) / p.topk } else { slot };
                xsrc[i] = row * (p.k / 8) + q;
            }
        });
        // Rows rsub + 16 i < n_cols.
        let nx = if w.n_cols > rsub { (w.n_cols - rsub).div_ceil(16) } else { 0 };
        let pw = t / 32;
        let mut at = [0u32; 2];
        let mut ok = [false; 2];
        unroll!(2, |j| {
            let task = 2 * pw + j as u32;
            if task < w.ntask {
                // < 2^32: the matrix's codes in KiB.
                at[j] = (w.e * tpe + w.task0 + task) * nchunks;
                ok[j] = true;
            }
        });
        Sources { xsrc, nx, at, ok }
    }

    /// Chunk `c`'s copies: activations to `xs`, this lane's codes and
    /// scales to `raw`.
    #[inline(always)]
    unsafe fn load(&self, p: &FcParams, t: u32, c: u32, xs: u32, raw: u32) {
        let (q, rsub) = (t % 8, t / 8);
        // Row `rsub + 16 i`, swizzled: piece `q ^ (row % 8)`.
        let xdst = xs + rsub * 128 + 16 * (q ^ (rsub % 8));
        unroll!(RPT, |i| {
            let src = p.input + 16 * (self.xsrc[i] + 8 * c) as u64;
            cp_async16_zfill(xdst + 2048 * i as u32, src, (i as u32) < self.nx);
        });
        let (pw, lane) = (t / 32, t % 32);
        unroll!(2, |j| {
            let task = 2 * pw + j as u32;
            let chunk = (self.at[j] + c) as u64;
            let dst = raw + task * CHUNK_CODE_BYTES as u32 + 16 * lane;
            let src = p.codes + chunk * CHUNK_CODE_BYTES as u64 + 16 * lane as u64;
            cp_async16_zfill(dst, src, self.ok[j]);
            cp_async16_zfill(dst + 512, src + 512, self.ok[j]);
            let sdst = raw + RAW_SCALES + task * CHUNK_SCALE_BYTES as u32 + 4 * lane;
            let ssrc = p.scales + chunk * CHUNK_SCALE_BYTES as u64 + 4 * lane as u64;
            cp_async4_zfill(sdst, ssrc, self.ok[j]);
        });
    }
}

/// Decodes this producer warp's two tasks of the chunk whose raw codes are
/// at `raw` into the decoded stage at `sb` (see the module docs).
#[inline(always)]
unsafe fn decode<const BF16: bool>(t: u32, sb: u32, raw: u32) {
    let (pw, lane) = (t / 32, t % 32);
    // This lane's stmatrix row (quarter `lane / 8`, its row `lane % 8`)
    // and 16-byte half of a k-step.
    let (rsub, half) = (lane % 8 + 8 * ((lane / 8) % 2), lane / 16);
    unroll!(2, |j| {
        let task = 2 * pw + j as u32;
        let cb = raw + task * CHUNK_CODE_BYTES as u32 + 16 * lane;
        let wa = [lds_v4(cb), lds_v4(cb + 512)];
        let sc = lane_scales::<BF16>(lds(raw + RAW_SCALES + task * CHUNK_SCALE_BYTES as u32 + 4 * lane));
        unroll!(MTILES, |mt| {
            let row = 128 * (task / 4) + 64 * mt as u32 + 16 * (task % 4) + rsub;
            let at = sb + 128 * row;
            unroll!(4, |st| {
                let a = dequant_step::<BF16>(wa[mt][st], sc[mt][0], sc[mt][1]);
                // Piece 2 st + half of the row, swizzled by row % 8 = lane % 8.
                stmatrix_x4(at + 16 * ((2 * st as u32 + half) ^ (lane % 8)), a);
            });
        });
    });
}

/// The producer warpgroup: every tile's chunks into the stages, in order.
#[inline(always)]
unsafe fn produce<const FC1: bool, const BF16: bool, const RPT: usize>(p: &FcParams, sm: Smem) {
    let (tiles, tpb, tpe, _) = tiles(p);
    let t = tid_here();
    let nchunks = p.k / KCHUNK as u32;
    // Chunks issued, commit groups.
    let (mut q, mut groups) = (0u32, 0u32);
    let mut tile = bid_here();
    while tile < tiles {
        let w = Work::of(p, tile, tpb, tpe);
        let src = Sources::<RPT>::new::<FC1>(p, &w, t, tpe, nchunks);
        let iters = if tile + gdim() >= tiles { nchunks + LAG } else { nchunks };
        let mut c = 0;
        while c < iters {
            // Iteration `groups` (chunk q until the last tile's flush): the
            // consumers are done with chunk groups - STAGES, whose copy
            // stage chunk q refills and whose decoded stage chunk
            // groups - LAG (decoded below) overwrites; the flush needs the
            // latter too.
            if groups >= STAGES {
                bar_sync(empty_bar(groups), PSS_THREADS);
            }
            if c < nchunks {
                src.load(p, t, c, sm.x(q), sm.raw(q));
                q += 1;
            }
            cp_async_commit();
            groups += 1;
            if groups > LAG {
                // Chunk d's group has landed once at most LAG are pending.
                let d = groups - 1 - LAG;
                cp_async_wait::<LAG>();
                // (`moe4_exp` builds leave one part out, to time the others.)
                if !cfg!(moe4_exp = "pss_nodecode") {
                    decode::<BF16>(t, sm.a(d), sm.raw(d));
                }
                wgmma::fence_proxy_async();
                bar_arrive_if(full_bar(d), PSS_THREADS, true);
            }
            c += 1;
        }
        tile += gdim();
    }
}

/// A consumer warpgroup: every tile's chunks from the stages, then its
/// epilogue.
#[inline(always)]
unsafe fn consume<const FC1: bool, const BF16: bool, const NT: usize>(p: &FcParams, sm: Smem) {
    let (tiles, tpb, tpe, total) = tiles(p);
    let cw = shfl_idx(tid_here() / 32, 0) - PT / 32; // warp-uniform
    let cg = cw / 4;
    let nchunks = p.k / KCHUNK as u32;
    let post = post::<BF16>();
    let mut q0 = 0u32;
    let mut tile = bid_here();
    while tile < tiles {
        // (The tile's other fields are read again for the epilogue: kept
        // live through the loop, they pushed it past its registers.)
        let busy = 4 * cg < Work::of(p, tile, tpb, tpe).ntask;
        let mut acc = [[[0f32; 4]; NT]; MTILES];
        // The zeros as asm outputs, before the first wgmma's fence (left to
        // LLVM, their moves land between the wgmmas and ptxas serializes
        // them: C7519).
        unroll!(MTILES, |mt| wgmma::hold_f32(&mut acc[mt]));
        // Chunk `c` of the tile (`q` of the block): wait for its stage,
        // issue its 8 wgmmas, free the previous chunk's stage.
        let chunk = |c: u32, q: u32, acc: &mut [[[f32; 4]; NT]; MTILES]| {
            bar_sync(full_bar(q), PSS_THREADS);
            if busy && !cfg!(moe4_exp = "pss_nowgmma") {
                let (xs, a0) = (sm.x(q), sm.a(q) + 128 * 128 * cg);
                wgmma::fence();
                unroll!(4, |st| {
                    let db = wgmma::desc_sw128(xs + 32 * st as u32);
                    let (da0, da1) =
                        (wgmma::desc_sw128(a0 + 32 * st as u32), wgmma::desc_sw128(a0 + 8192 + 32 * st as u32));
                    wgmma::mma_ss::<BF16, NT>(&mut acc[0], da0, db, true);
                    wgmma::mma_ss::<BF16, NT>(&mut acc[1], da1, db, true);
                });
                wgmma::commit();
                wgmma::wait::<1>();
            }
            // Chunk q - 1's wgmmas are done; the producer waits for that
            // while it has chunks left to decode (q - 1 + A_STAGES < total).
            bar_arrive_if(empty_bar(q.wrapping_sub(1)), PSS_THREADS, c > 0 && q.wrapping_sub(1) + A_STAGES < total);
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
        // On both paths (an idle warpgroup issued none): ptxas otherwise
        // injects a wait where they merge (C7517).
        wgmma::wait::<0>();
        unroll!(MTILES, |mt| wgmma::hold_f32(&mut acc[mt]));
        let last = q0 + nchunks - 1;
        bar_arrive_if(empty_bar(last), PSS_THREADS, last + A_STAGES < total);
        q0 += nchunks;
        let w = Work::of(p, tile, tpb, tpe);
        if cw < w.ntask {
            let r = w.task0 + cw;
            if FC1 {
                epilogue_fc1::<BF16, NT, true>(p, &acc, w.e, r, w.slot0, w.n_cols, post);
            } else {
                epilogue_fc2::<BF16, NT>(p, &acc, w.e, r, w.slot0, w.n_cols, post);
            }
        }
        tile += gdim();
    }
}

#[inline(always)]
unsafe fn prefill_ss<const FC1: bool, const BF16: bool, const NT: usize, const RPT: usize>(p: &FcParams) {
    const { assert!(RPT * 16 == NT * 8) };
    // Programmatic dependent launch: the previous kernel in the stream is
    // complete (its writes visible) after this; then let the next launch.
    griddep_wait();
    griddep_launch_dependents();
    // The warpgroup as a value ptxas knows is warp-uniform (a broadcast):
    // with a `tid()` branch it serializes the consumers' wgmmas (C7518,
    // runs 48-50). Each role works out the rest after `setmaxnreg` (values
    // live across it are spilled).
    if shfl_idx(tid_here() / 128, 0) == 0 {
        wgmma::regs_dec::<PRODUCER_REGS>();
        produce::<FC1, BF16, RPT>(p, Smem::new(opaque(8 * NT as u32)));
    } else {
        wgmma::regs_inc::<CONSUMER_REGS>();
        consume::<FC1, BF16, NT>(p, Smem::new(opaque(8 * NT as u32)));
    }
}

macro_rules! pss_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal, $nt:literal;)*) => {$(
        /// Decode-once `wgmma` prefill GEMM instance `(FC1?, bf16?, column
        /// tiles)`; see the module docs.
        ///
        /// # Safety
        /// `p` as [`FcParams`] documents, routed with `group = 8 * NT`;
        /// [`PSS_THREADS`] threads, `pss_smem_bytes(8 * NT)` bytes of
        /// dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            prefill_ss::<$fc1, $bf16, $nt, { $nt / 2 }>(&p)
        }
    )*};
}

pss_kernels! {
    moe_pss1_bf16_n128: true, true, 16;
    moe_pss1_f16_n128: true, false, 16;
    moe_pss2_bf16_n128: false, true, 16;
    moe_pss2_f16_n128: false, false, 16;
    moe_pss1_bf16_n64: true, true, 8;
    moe_pss1_f16_n64: true, false, 8;
    moe_pss2_bf16_n64: false, true, 8;
    moe_pss2_f16_n64: false, false, 8;
}
