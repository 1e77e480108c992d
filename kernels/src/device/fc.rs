//! `moe_fc1_*` and `moe_fc2_*`: the NVFP4 W4A16 streaming GEMMs of the
//! decode path (few tokens per expert, bandwidth-bound).
//!
//! **Work.** A *task* is (active expert, column group of up to `8 * NT` of
//! its pairs, 32 weight rows); the number of tasks is read on the device
//! from the routing output, so nothing waits for the host. Two schedules,
//! chosen per launch on the device, whichever gives the shorter longest
//! queue (tasks do not divide evenly over the grid: 1792 tasks on 2640
//! warps leave most warps idle half the time):
//! - a block per task, its 4 warps splitting K (warp `w` takes chunks
//!   `w, w + 4, ...`), summing their partial tiles in shared memory in a
//!   fixed order (small batches, and wherever it balances better);
//! - every warp alone: warp `w` takes tasks `w, w + W, ...` (W = warps in
//!   the grid), streaming the chunks of all its tasks as one sequence;
//!   blocks never synchronize.
//!
//! **Pipeline.** Each warp owns a ring of `S` shared-memory slots. A slot
//! holds one chunk ([`crate::tile`]): per lane, its 2 x 16 bytes of codes
//! (rows `g`, `g + 8` of both 16-row tiles, k `16t..16t+16`), its 4 bytes of
//! E4M3 scales and, for each 8-pair column tile, its 32 bytes of
//! activations `x[tok][16t..16t+16]` (`tok` the tile's column `g`). Every
//! piece is brought by the lane that later reads it, with `cp.async` (codes
//! past L1, activations through L1: the other tasks of the expert read
//! them), so a lane waits only for its own copies (`cp.async.wait_group`):
//! no barrier, no registers held by loads in flight. An empty column (past
//! the group's last pair) copies row 0 instead: real data whose results
//! are never stored, so no copy needs a predicate. The producer side of
//! the warp walks the same (task, chunk) sequence `S - 1` chunks ahead of
//! the consumer, across task boundaries, and loads each task's routing
//! record one task before it needs it.
//!
//! **Math per chunk and 16-row tile:** 4 k-steps, each one packed word
//! decoded ([`crate::decode`]) to four 16x2 registers, multiplied by the
//! row's block scale (one `fma/mul .x2` per register), one `mma.m16n8k16`
//! per column tile. The epilogue multiplies by the expert's global scale
//! (and `2^7` / `2^14`, the decode's offset).
//!
//! FC1's rows are gate/up interleaved per 8 channels ([`crate::tile::fc1_row`])
//! so each thread holds both halves of its outputs and applies the gated
//! activation in registers, writing h `[slot, I]` (16-bit). FC2 writes
//! `y[pair, H] = alpha2 * w_pair * acc` in f32 for the combine kernel.
//!
//! **Launch order.** Both kernels start with [`griddep_wait`] (programmatic
//! dependent launch: the routing, and for FC2 the h of FC1, are complete
//! after it) and then let the next kernel launch. Before its wait, FC2 asks
//! L2 for the first weights it will stream (they do not depend on FC1),
//! using the tail of FC1.

use super::arch::*;
use crate::decode::{bf16_scale_from_f16x2, decode_bf16, decode_f16, BF16_POST_LOG2, F16_POST_LOG2};
use crate::launch::{fc_red_bytes, fc_slot_bytes};
use crate::params::{ActKind, FcParams};
use crate::tile::{CHUNK_CODE_BYTES, CHUNK_SCALE_BYTES, KCHUNK, KSTEPS, MTILES, TASK_ROWS};

/// Warps per block.
pub const WARPS: u32 = crate::launch::FC_THREADS / 32;

/// Per-row scale pairs of a lane for one chunk: `[mtile][row g / row g+8]`,
/// each broadcast to both halves, in the arithmetic's 16-bit format.
#[inline(always)]
pub fn lane_scales<const BF16: bool>(s: u32) -> [[u32; 2]; MTILES] {
    let mut s01 = cvt_e4m3x2_f16x2(s & 0xFFFF);
    let mut s23 = cvt_e4m3x2_f16x2(s >> 16);
    if BF16 {
        s01 = bf16_scale_from_f16x2(s01);
        s23 = bf16_scale_from_f16x2(s23);
    }
    [[bcast_lo(s01), bcast_hi(s01)], [bcast_lo(s23), bcast_hi(s23)]]
}

/// The four A registers of one k-step: decoded and multiplied by the scales
/// of rows g (`sg`) and g+8 (`sg8`).
#[inline(always)]
pub fn dequant_step<const BF16: bool>(q: u32, sg: u32, sg8: u32) -> [u32; 4] {
    if BF16 {
        let d = decode_bf16(q);
        [mul_bf16x2(d[0], sg), mul_bf16x2(d[1], sg8), mul_bf16x2(d[2], sg), mul_bf16x2(d[3], sg8)]
    } else {
        let d = decode_f16(q);
        [mul_f16x2(d[0], sg), mul_f16x2(d[1], sg8), mul_f16x2(d[2], sg), mul_f16x2(d[3], sg8)]
    }
}

/// `mma.m16n8k16` in the activation's 16-bit format.
#[inline(always)]
pub(super) fn mma<const BF16: bool>(d: &mut [f32; 4], a: [u32; 4], b0: u32, b1: u32) {
    if BF16 {
        mma_bf16(d, a, b0, b1)
    } else {
        mma_f16(d, a, b0, b1)
    }
}

/// One chunk of a lane, read back from its slot: the A words of both 16-row
/// tiles, the four E4M3 scales and the B words of every column tile.
struct Chunk<const NT: usize> {
    a: [[u32; 4]; MTILES],
    s: u32,
    b: [[u32; 8]; NT],
}

/// Offset of the scales in a slot.
const SLOT_SCALES: u32 = CHUNK_CODE_BYTES as u32;
/// Offset of the activations in a slot.
const SLOT_X: u32 = (CHUNK_CODE_BYTES + CHUNK_SCALE_BYTES) as u32;

/// Reads this lane's pieces of a slot back (`src` = slot + 16 lane,
/// `src_s` = slot + 1024 + 4 lane).
#[inline(always)]
unsafe fn read_slot<const NT: usize>(src: u32, src_s: u32) -> Chunk<NT> {
    let a = [lds_v4(src), lds_v4(src + 512)];
    let s = lds(src_s);
    let mut b = [[0u32; 8]; NT];
    unroll!(NT, |j| {
        let at = src + SLOT_X + 1024 * j as u32;
        let lo = lds_v4(at);
        let hi = lds_v4(at + 512);
        b[j] = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
    });
    Chunk { a, s, b }
}

#[inline(always)]
fn compute<const BF16: bool, const NT: usize, const LD: bool>(acc: &mut [[[f32; 4]; NT]; MTILES], ch: &Chunk<NT>) {
    if LD {
        // Benchmark variant: the loads only (a fold keeps them alive).
        let mut x = ch.s;
        unroll!(MTILES, |mt| unroll!(4, |w| x ^= ch.a[mt][w]));
        unroll!(NT, |j| unroll!(8, |w| x ^= ch.b[j][w]));
        acc[0][0][0] += f32::from_bits(x & 0x3FFF_FFFF);
        return;
    }
    let sc = lane_scales::<BF16>(ch.s);
    unroll!(KSTEPS, |step| {
        unroll!(MTILES, |mt| {
            let a = dequant_step::<BF16>(ch.a[mt][step], sc[mt][0], sc[mt][1]);
            unroll!(NT, |j| mma::<BF16>(&mut acc[mt][j], a, ch.b[j][2 * step], ch.b[j][2 * step + 1]));
        });
    });
}

#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + ex2(-x * core::f32::consts::LOG2_E))
}

/// The gated activation of DESIGN.md §4 (NaN in, NaN out).
#[inline(always)]
pub fn activation(kind: u32, g: f32, u: f32, limit: f32, alpha: f32) -> f32 {
    if kind == ActKind::Silu as u32 {
        g * sigmoid(g) * u
    } else {
        let g = min_nan(g, limit);
        let u = max_nan(min_nan(u, limit), -limit);
        if kind == ActKind::ClampedSilu as u32 {
            g * sigmoid(g) * u
        } else {
            g * sigmoid(alpha * g) * (u + 1.0)
        }
    }
}

/// The grid-wide plan, the same in every warp.
#[derive(Clone, Copy)]
struct Plan {
    /// Tasks (32-row blocks) per expert.
    tpe: u32,
    /// Chunks along K.
    nchunks: u32,
    /// Tasks in all.
    tasks: u32,
}

/// What the producer needs of a task, loaded one task ahead: the expert
/// and this lane's column rows (`u32::MAX` past the group's last pair).
#[derive(Clone, Copy)]
struct Rec<const NT: usize> {
    e: u32,
    rows: [u32; NT],
}

#[inline(always)]
unsafe fn load_rec<const NT: usize>(p: &FcParams, plan: &Plan, task: u32) -> Rec<NT> {
    let mut r = Rec { e: 0, rows: [u32::MAX; NT] };
    if task < plan.tasks {
        let gi = task / plan.tpe;
        let g = (tid() % 32) / 4;
        r.e = ldg_u32_coherent(p.groups + 16 * gi as u64);
        unroll!(NT, |j| {
            let col = 8 * j as u32 + g;
            r.rows[j] = ldg_u32_coherent(p.group_rows + 4 * (gi * 8 * NT as u32 + col) as u64);
        });
    }
    r
}

/// What the epilogue needs of a task: (expert, first slot, pairs).
#[inline(always)]
unsafe fn load_job(p: &FcParams, plan: &Plan, task: u32) -> (u32, u32, u32) {
    if task >= plan.tasks {
        return (0, 0, 0);
    }
    let rec = p.groups + 16 * (task / plan.tpe) as u64;
    (ldg_u32_coherent(rec), ldg_u32_coherent(rec + 4), ldg_u32_coherent(rec + 8))
}

/// The copying side of a warp: walks tasks `task, task + tstep, ...`, in
/// each the chunks `c0, c0 + cstep, ... < nchunks`, holding this lane's
/// source addresses of chunk 0 of the current task (every chunk's address
/// is then one wide multiply-add).
#[derive(Clone, Copy)]
struct Producer<const NT: usize> {
    task: u32,
    /// The next chunk to copy, and how many of this task are left.
    c: u32,
    left: u32,
    c0: u32,
    cstep: u32,
    tstep: u32,
    code: u64,
    scale: u64,
    /// Activation row per column tile: an empty column copies row 0 (real
    /// data of another column; its results are never stored).
    b: [u64; NT],
    next: Rec<NT>,
}

impl<const NT: usize> Producer<NT> {
    #[inline(always)]
    unsafe fn start<const FC1: bool>(p: &FcParams, plan: &Plan, task: u32, c0: u32, cstep: u32, tstep: u32) -> Self {
        let rec = load_rec::<NT>(p, plan, task);
        let next = load_rec::<NT>(p, plan, task.saturating_add(tstep));
        let mut x = Producer { task, c: c0, left: 0, c0, cstep, tstep, code: 0, scale: 0, b: [0; NT], next };
        x.point::<FC1>(p, plan, &rec);
        x
    }

    #[inline(always)]
    fn valid(&self, plan: &Plan) -> bool {
        self.task < plan.tasks
    }

    /// Sets the addresses of `self.task` from its record.
    #[inline(always)]
    fn point<const FC1: bool>(&mut self, p: &FcParams, plan: &Plan, rec: &Rec<NT>) {
        if self.task >= plan.tasks || self.c0 >= plan.nchunks {
            self.task = u32::MAX;
            return;
        }
        self.c = self.c0;
        self.left = (plan.nchunks - self.c0).div_ceil(self.cstep);
        let lane = tid() % 32;
        let (g, t) = (lane / 4, lane % 4);
        let gi = self.task / plan.tpe;
        let r = self.task - gi * plan.tpe;
        let chunk0 = (rec.e * plan.tpe + r) as u64 * plan.nchunks as u64;
        self.code = p.codes + chunk0 * CHUNK_CODE_BYTES as u64 + 16 * lane as u64;
        self.scale = p.scales + chunk0 * CHUNK_SCALE_BYTES as u64 + 4 * lane as u64;
        unroll!(NT, |j| {
            // FC1 reads the pair's token row of x; FC2 the group's h row.
            let row = if rec.rows[j] == u32::MAX {
                0
            } else if FC1 {
                rec.rows[j]
            } else {
                gi * 8 * NT as u32 + 8 * j as u32 + g
            };
            self.b[j] = p.input + 2 * (row as u64 * p.k as u64 + 16 * t as u64);
        });
    }

    /// Starts the copies of this lane's pieces of the next chunk into the
    /// slot whose lane-adjusted addresses are `dst` (codes, activations:
    /// slot + 16 lane) and `dst_s` (scales: slot + 1024 + 4 lane).
    #[inline(always)]
    unsafe fn issue(&mut self, dst: u32, dst_s: u32) {
        let c = self.c as u64;
        let code = self.code + c * CHUNK_CODE_BYTES as u64;
        cp_async16(dst, code);
        cp_async16(dst + 512, code + 512);
        cp_async4(dst_s, self.scale + c * CHUNK_SCALE_BYTES as u64);
        unroll!(NT, |j| {
            let (at, b) = (dst + SLOT_X + 1024 * j as u32, self.b[j] + c * (2 * KCHUNK) as u64);
            cp_async16_ca(at, b);
            cp_async16_ca(at + 512, b + 16);
        });
        self.c += self.cstep;
        self.left -= 1;
    }

    #[inline(always)]
    unsafe fn next_task<const FC1: bool>(&mut self, p: &FcParams, plan: &Plan) {
        self.task = self.task.saturating_add(self.tstep);
        let rec = self.next;
        self.next = load_rec::<NT>(p, plan, self.task.saturating_add(self.tstep));
        self.point::<FC1>(p, plan, &rec);
    }

    /// Copies the next chunk (if any) into the slot at `dst`/`dst_s`, then
    /// closes a copy group (always, so groups stay in step with chunks).
    #[inline(always)]
    unsafe fn refill<const FC1: bool>(&mut self, p: &FcParams, plan: &Plan, dst: u32, dst_s: u32) {
        if self.valid(plan) {
            self.issue(dst, dst_s);
            if self.left == 0 {
                self.next_task::<FC1>(p, plan);
            }
        }
        cp_async_commit();
    }
}

/// The decode offset of the 16-bit format, as the factor the epilogue applies.
#[inline(always)]
fn post<const BF16: bool>() -> f32 {
    f32::from_bits(((if BF16 { BF16_POST_LOG2 } else { F16_POST_LOG2 } + 127) as u32) << 23)
}

#[inline(always)]
unsafe fn epilogue<const FC1: bool, const BF16: bool, const NT: usize>(
    p: &FcParams,
    plan: &Plan,
    acc: &[[[f32; 4]; NT]; MTILES],
    task: u32,
    job: (u32, u32, u32),
) {
    let (e, slot0, n_grp) = job;
    let gi = task / plan.tpe;
    let r = task - gi * plan.tpe;
    if FC1 {
        epilogue_fc1::<BF16, NT>(p, acc, e, r, gi * 8 * NT as u32, n_grp, post::<BF16>());
    } else {
        epilogue_fc2::<NT>(p, acc, e, r, slot0, n_grp, post::<BF16>());
    }
}

/// FC2, before waiting for FC1: asks L2 for the weights of this warp's
/// first task (its share of the block's task on the block path).
#[inline(always)]
unsafe fn prefetch_first(p: &FcParams, plan: &Plan, block_path: bool) {
    let (warp, lane) = (tid() / 32, tid() % 32);
    let (task, c0, n) = if block_path {
        let per = plan.nchunks.div_ceil(WARPS);
        let c0 = warp * per;
        let c1 = if c0 + per < plan.nchunks { c0 + per } else { plan.nchunks };
        (bid(), c0, c1.saturating_sub(c0))
    } else {
        (bid() * WARPS + warp, 0, if plan.nchunks < 8 { plan.nchunks } else { 8 })
    };
    if lane == 0 && task < plan.tasks && n > 0 {
        let e = ldg_u32_coherent(p.groups + 16 * (task / plan.tpe) as u64);
        let tglob = (e * plan.tpe + task % plan.tpe) as u64 * plan.nchunks as u64 + c0 as u64;
        prefetch_l2_bulk(p.codes + tglob * CHUNK_CODE_BYTES as u64, n * CHUNK_CODE_BYTES as u32);
        prefetch_l2_bulk(p.scales + tglob * CHUNK_SCALE_BYTES as u64, n * CHUNK_SCALE_BYTES as u32);
    }
}

#[inline(always)]
unsafe fn fc<const FC1: bool, const BF16: bool, const NT: usize, const S: u32, const LD: bool>(p: &FcParams) {
    // FC1 reads the routing first thing; FC2 reads the routing (complete:
    // FC1 let FC2 launch only after its own wait) before waiting for FC1.
    if FC1 {
        griddep_wait();
    }
    let groups = ldg_u32_coherent(p.n_active + 4);
    let tpe = p.rows / TASK_ROWS as u32;
    let plan = Plan { tpe, nchunks: p.k / KCHUNK as u32, tasks: groups * tpe };
    // The schedule with the shorter longest queue (in chunk-times of one
    // warp): every warp alone, or a block per task with K split 4 ways.
    let longest_warp = plan.tasks.div_ceil(gdim() * WARPS) * plan.nchunks;
    let longest_block = plan.tasks.div_ceil(gdim()) * plan.nchunks.div_ceil(WARPS);
    let block_path = longest_block < longest_warp;
    if !FC1 {
        prefetch_first(p, &plan, block_path);
        griddep_wait();
    }
    griddep_launch_dependents();
    if plan.tasks == 0 {
        return;
    }
    if block_path {
        fc_block::<FC1, BF16, NT, S, LD>(p, &plan)
    } else {
        fc_warps::<FC1, BF16, NT, S, LD>(p, &plan)
    }
}

/// Every warp alone: tasks `w, w + W, ...`, chunk after chunk. The loop
/// is unrolled by `S` so every slot address is a constant offset.
#[inline(always)]
unsafe fn fc_warps<const FC1: bool, const BF16: bool, const NT: usize, const S: u32, const LD: bool>(
    p: &FcParams,
    plan: &Plan,
) {
    let (warp, lane) = (tid() / 32, tid() % 32);
    let gw = bid() * WARPS + warp;
    let nw = gdim() * WARPS;
    let slot_bytes = fc_slot_bytes(NT as u32);
    let ring = smem() + fc_red_bytes(NT as u32) + warp * S * slot_bytes;
    let (dst, dst_s) = (ring + 16 * lane, ring + SLOT_SCALES + 4 * lane);

    let mut pf = Producer::<NT>::start::<FC1>(p, plan, gw, 0, 1, nw);
    unroll!(S - 1, |d| pf.refill::<FC1>(p, plan, dst + d as u32 * slot_bytes, dst_s + d as u32 * slot_bytes));
    let mut task = gw;
    let mut job = load_job(p, plan, task);
    let mut left = plan.nchunks;
    let mut acc = [[[0f32; 4]; NT]; MTILES];
    while task < plan.tasks {
        unroll!(S, |d| {
            if task < plan.tasks {
                let d = d as u32;
                let refill = (d + S - 1) % S;
                cp_async_wait_dyn(S - 2);
                let ch = read_slot::<NT>(dst + d * slot_bytes, dst_s + d * slot_bytes);
                pf.refill::<FC1>(p, plan, dst + refill * slot_bytes, dst_s + refill * slot_bytes);
                compute::<BF16, NT, LD>(&mut acc, &ch);
                left -= 1;
                if left == 0 {
                    epilogue::<FC1, BF16, NT>(p, plan, &acc, task, job);
                    acc = [[[0f32; 4]; NT]; MTILES];
                    left = plan.nchunks;
                    task = task.saturating_add(nw);
                    job = load_job(p, plan, task);
                }
            }
        });
    }
}

/// A block per task: block `b` takes tasks `b, b + grid, ...`; warp `w`
/// takes chunks `w, w + 4, ...` of each; the four partial tiles are summed
/// in shared memory (fixed order) and warp 0 runs the epilogue.
#[inline(always)]
unsafe fn fc_block<const FC1: bool, const BF16: bool, const NT: usize, const S: u32, const LD: bool>(
    p: &FcParams,
    plan: &Plan,
) {
    let (warp, lane) = (tid() / 32, tid() % 32);
    let slot_bytes = fc_slot_bytes(NT as u32);
    let red = smem();
    let ring = red + fc_red_bytes(NT as u32) + warp * S * slot_bytes;
    let (dst, dst_s) = (ring + 16 * lane, ring + SLOT_SCALES + 4 * lane);
    let n_my = if warp < plan.nchunks { (plan.nchunks - warp).div_ceil(WARPS) } else { 0 };
    let mut pf = Producer::<NT>::start::<FC1>(p, plan, bid(), warp, WARPS, gdim());
    unroll!(S - 1, |d| pf.refill::<FC1>(p, plan, dst + d as u32 * slot_bytes, dst_s + d as u32 * slot_bytes));
    let nacc = (MTILES * NT * 4) as u32;
    let at = |w: u32, mt: usize, j: usize, c: usize| red + 4 * ((w * nacc + ((mt * NT + j) * 4 + c) as u32) * 32 + lane);
    let mut task = bid();
    let mut job = load_job(p, plan, task);
    let mut i = 0u32;
    while task < plan.tasks {
        let mut acc = [[[0f32; 4]; NT]; MTILES];
        let mut q = 0;
        while q < n_my {
            let (d, refill) = (i % S, (i + S - 1) % S);
            cp_async_wait_dyn(S - 2);
            let ch = read_slot::<NT>(dst + d * slot_bytes, dst_s + d * slot_bytes);
            pf.refill::<FC1>(p, plan, dst + refill * slot_bytes, dst_s + refill * slot_bytes);
            compute::<BF16, NT, LD>(&mut acc, &ch);
            i += 1;
            q += 1;
        }
        // Sum the warps' partial tiles: [warp-1][accumulator][lane].
        if warp != 0 {
            unroll!(MTILES, |mt| unroll!(NT, |j| unroll!(4, |c| sts(at(warp - 1, mt, j, c), acc[mt][j][c].to_bits()))));
        }
        sync();
        if warp == 0 {
            unroll!(MTILES, |mt| {
                unroll!(NT, |j| {
                    unroll!(4, |c| {
                        let mut w = 0;
                        while w < WARPS - 1 {
                            acc[mt][j][c] += f32::from_bits(lds(at(w, mt, j, c)));
                            w += 1;
                        }
                    })
                })
            });
            epilogue::<FC1, BF16, NT>(p, plan, &acc, task, job);
        }
        sync();
        task = task.saturating_add(gdim());
        job = load_job(p, plan, task);
    }
}

/// FC1 epilogue of one warp's 32 rows x `8 NT` pairs: global scales, gated
/// activation, h rows `hrow0 + column` (decode: the group's position;
/// prefill: the slot).
#[inline(always)]
pub(super) unsafe fn epilogue_fc1<const BF16: bool, const NT: usize>(
    p: &FcParams,
    acc: &[[[f32; 4]; NT]; MTILES],
    e: u32,
    r: u32,
    hrow0: u32,
    n_grp: u32,
    post: f32,
) {
    let lane = tid() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let inter = p.rows / 2;
    let ag = ldg_f32(p.alpha_a + 4 * e as u64) * post;
    let au = ldg_f32(p.alpha_b + 4 * e as u64) * post;
    unroll!(MTILES, |mt| {
        let ch = 16 * r + 8 * mt as u32 + g;
        unroll!(NT, |j| {
            unroll!(2, |u| {
                let col = 8 * j as u32 + 2 * t + u as u32;
                if col < n_grp {
                    let h = activation(p.act, acc[mt][j][u] * ag, acc[mt][j][2 + u] * au, p.limit, p.act_alpha);
                    let row = (hrow0 + col) as u64;
                    stg_u16(p.output + 2 * (row * inter as u64 + ch as u64), to_half_bits::<BF16>(h));
                }
            })
        })
    });
}

/// FC2 epilogue of one warp's 32 rows x `8 NT` pairs: alpha2 x routing
/// weight, y `[pair, H]` (f32).
#[inline(always)]
pub(super) unsafe fn epilogue_fc2<const NT: usize>(
    p: &FcParams,
    acc: &[[[f32; 4]; NT]; MTILES],
    e: u32,
    r: u32,
    slot0: u32,
    n_grp: u32,
    post: f32,
) {
    let lane = tid() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let a2 = ldg_f32(p.alpha_a + 4 * e as u64) * post;
    unroll!(NT, |j| {
        unroll!(2, |u| {
            let col = 8 * j as u32 + 2 * t + u as u32;
            if col < n_grp {
                let pair = ldg_u32_coherent(p.sorted_pairs + 4 * (slot0 + col) as u64);
                let w = ldg_f32(p.topk_weights + 4 * pair as u64) * a2;
                let y = p.output + 4 * pair as u64 * p.rows as u64;
                unroll!(MTILES, |mt| {
                    let row = (TASK_ROWS as u32 * r + 16 * mt as u32 + g) as u64;
                    stg_u32(y + 4 * row, (acc[mt][j][u] * w).to_bits());
                    stg_u32(y + 4 * (row + 8), (acc[mt][j][2 + u] * w).to_bits());
                });
            }
        })
    });
}

macro_rules! fc_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal, $nt:literal, $s:literal, $ld:literal;)*) => {$(
        /// FC kernel instance `(FC1?, bf16?, column tiles, pipeline slots
        /// per warp, loads only (a benchmark variant, wrong results)?)`.
        ///
        /// # Safety
        /// `p` must describe device buffers as [`FcParams`] documents, from
        /// a routing run over the same ids with `group = 8 * NT`; 128
        /// threads per block, `fc_smem_bytes(NT, S)` of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            fc::<$fc1, $bf16, $nt, $s, $ld>(&p)
        }
    )*};
}

// The default depth of each NT is `launch::fc_stages(NT)`; the `_s*`
// instances are the other depths the benchmark compares, `_ld` the
// loads-only variant it measures the memory side with.
fc_kernels! {
    moe_fc1_bf16_nt1: true, true, 1, 4, false;
    moe_fc1_bf16_nt2: true, true, 2, 3, false;
    moe_fc1_bf16_nt4: true, true, 4, 3, false;
    moe_fc1_f16_nt1: true, false, 1, 4, false;
    moe_fc1_f16_nt2: true, false, 2, 3, false;
    moe_fc1_f16_nt4: true, false, 4, 3, false;
    moe_fc2_bf16_nt1: false, true, 1, 4, false;
    moe_fc2_bf16_nt2: false, true, 2, 3, false;
    moe_fc2_bf16_nt4: false, true, 4, 3, false;
    moe_fc2_f16_nt1: false, false, 1, 4, false;
    moe_fc2_f16_nt2: false, false, 2, 3, false;
    moe_fc2_f16_nt4: false, false, 4, 3, false;
    moe_fc1_bf16_nt1_s6: true, true, 1, 6, false;
    moe_fc2_bf16_nt1_s6: false, true, 1, 6, false;
    moe_fc1_bf16_nt1_s8: true, true, 1, 8, false;
    moe_fc2_bf16_nt1_s8: false, true, 1, 8, false;
    moe_fc1_bf16_nt1_ld: true, true, 1, 4, true;
    moe_fc2_bf16_nt1_ld: false, true, 1, 4, true;
}
