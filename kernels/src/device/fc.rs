//! `moe_fc1_*` and `moe_fc2_*`: the NVFP4 W4A16 streaming GEMMs of the
//! decode path (few tokens per expert, bandwidth-bound).
//!
//! **Work.** A *task* is (active expert, column group of up to `8 * NT` of
//! its pairs, `16 MT` weight rows) x all of K, cut into 64-k *chunks*: 32
//! rows (`MT = 2`, one task of the [`crate::tile`] layout), or 64 (`MT = 4`,
//! the `_r64` kernels: two layout tasks, whose activations the warp then
//! copies and reads once for both, which halves the shared-memory traffic
//! per weight that bound the four-column-tile kernels); the number
//! of tasks is read on the device from the routing output, so nothing waits
//! for the host. The grid works in two phases ([`crate::launch::fc_split`],
//! chosen on the device: the walk with the shortest longest queue): first
//! `whole` rounds in which each warp takes a whole task, then rounds in
//! which a block's `WB` warps form groups of `KS` (1, 2, 4 or 8) that each
//! take one task, its warps the chunks `kp, kp + KS, ...`; with `KS > 1`
//! the partial tiles are summed in shared memory in `kp` order (a fixed
//! order: the output is the same bit for bit on every run) and the group's
//! first warp runs the epilogue. Small batches split every round (few
//! tasks, many warps); large ones only the last one or two, so that a
//! partly filled last round does not leave most warps idle behind a few
//! whole tasks.
//!
//! **Pipeline.** Each warp owns a ring of `S` shared-memory slots. A slot
//! holds one chunk ([`crate::tile`]): per lane and layout task, its 2 x 16
//! bytes of codes (rows `g`, `g + 8` of both 16-row tiles, k `16t..16t+16`)
//! and its 4 bytes of E4M3 scales; and, for each 8-pair column tile, its 32
//! bytes of
//! activations `x[tok][16t..16t+16]` (`tok` the tile's column `g`). Every
//! piece is brought by the lane that later reads it, with `cp.async` (codes
//! past L1, activations through L1: the other tasks of the expert read
//! them), so a lane waits only for its own copies (`cp.async.wait_group`):
//! no barrier, no registers held by loads in flight. An empty column (past
//! the group's last pair) reads nothing (`ignore-src` writes zeros). The
//! producer side of the warp walks its chunks `S - 1` ahead of the
//! consumer, across task boundaries, loading each task's routing record
//! one task before it needs it; the epilogue's inputs (pairs, routing
//! weights) are loaded when a task starts.
//!
//! **Math per chunk and 16-row tile:** 4 k-steps, each one packed word
//! decoded ([`crate::decode`]) to four 16x2 registers, multiplied by the
//! row's block scale (one `fma/mul .x2` per register), one `mma.m16n8k16`
//! per column tile. The epilogue multiplies by the expert's global scale
//! (and `2^7` / `2^14`, the decode's offset).
//!
//! FC1's rows are gate/up interleaved per 8 channels ([`crate::tile::fc1_row`])
//! so each thread holds both halves of its outputs and applies the gated
//! activation in registers, writing h `[group row, I]` (16-bit). FC2 writes
//! `y[pair, H] = alpha2 * w_pair * acc` in f32 for the combine kernel.
//!
//! **Launch order.** FC1 starts with [`griddep_wait`] (programmatic
//! dependent launch: the routing is complete after it); FC2 works out its
//! plan (and, `_rt`, routes) and copies the weights of each warp's first
//! `S - 1` chunks into its ring before its wait, which makes FC1's h
//! visible; h follows. FC2's blocks become resident as FC1's leave the
//! SMs, so those weight copies overlap FC1's tail. Each kernel then lets
//! the next one launch. (A bulk L2 prefetch of FC2's whole first task in
//! that place slowed most decode points: docs/perf-notes.md, run 54.)
//!
//! **Routing in the block (`_rt`).** For small batches (at most
//! [`crate::launch::FC_ROUTE_MAX_PAIRS`] pairs, one column tile) there is
//! no routing launch: every block of FC1 and of FC2 groups the pairs by
//! expert itself, into tables at the start of its shared memory
//! ([`route_in_block`]), and reads them from there; FC2 does it before its
//! wait, overlapping FC1's tail, as it reads only the layer's inputs.

use super::arch::*;
use super::route::route_in_block;
use super::trace;
use crate::decode::{bf16_scale_from_f16x2, decode_bf16, decode_f16, BF16_POST_LOG2, F16_POST_LOG2};
#[cfg(not(any(moe4_exp = "fc2sl", moe4_arch = "sm_89")))]
use crate::fastdiv::{div_by, reciprocal};
#[cfg(moe4_exp = "w6")]
use crate::launch::fc_split_div;
use crate::launch::{
    fc_partial_words, fc_slot_bytes, fc_split, ready_counter, FC_ROUTE_BYTES, FC_RT_COUNTS, FC_RT_GROUPS, FC_RT_ROWS,
    FC_RT_WEIGHTS,
};
use crate::params::{ActKind, FcParams};
#[cfg(moe4_arch = "sm_90a")]
use crate::tile::{fc1_stage_at, fc2_stage_row};
use crate::tile::{wgmma_permuted, CHUNK_CODE_BYTES, CHUNK_SCALE_BYTES, KCHUNK, MTILES, TASK_ROWS};
use crate::trace::TraceKernel;

/// Per-row scale pairs of a lane for one chunk: `[mtile][row g / row g+8]`,
/// each broadcast to both halves, in the arithmetic's 16-bit format.
#[inline(always)]
pub fn lane_scales<const BF16: bool>(s: u32) -> [[u32; 2]; MTILES] {
    [tile_scales::<BF16>(s), tile_scales::<BF16>(s >> 16)]
}

/// The scale pair of one 16-row tile (the low two E4M3 bytes of `s`: rows
/// g and g + 8), as [`lane_scales`] gives it.
#[inline(always)]
pub fn tile_scales<const BF16: bool>(s: u32) -> [u32; 2] {
    let mut h2 = cvt_e4m3x2_f16x2(s & 0xFFFF);
    if BF16 {
        h2 = bf16_scale_from_f16x2(h2);
    }
    [bcast_lo(h2), bcast_hi(h2)]
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

/// Offset of the scales in a slot of a kernel with `MT` 16-row tiles per
/// task (the codes of its `MT / 2` layout tasks first).
const fn slot_scales(mt: usize) -> u32 {
    (mt / 2 * CHUNK_CODE_BYTES) as u32
}
/// Offset of the activations in such a slot.
const fn slot_x(mt: usize) -> u32 {
    (mt / 2 * (CHUNK_CODE_BYTES + CHUNK_SCALE_BYTES)) as u32
}

/// One chunk of this lane's accumulators: `[row tile][column tile][4]`.
type Acc<const NT: usize, const MT: usize> = [[[f32; 4]; NT]; MT];

/// The math of one chunk, from this lane's pieces of a slot (`src` = slot +
/// 16 lane, `src_s` = slot + scales + 4 lane). The activations are read per
/// half of the k-steps, so `8 * NT` of them are live at a time, not `16 NT`;
/// each serves all `MT` row tiles (with `MT = 4`, the two layout tasks of
/// a 64-row task: half the activation reads per weight). Only the first
/// `USED` column tiles are read and multiplied (the task's group holds
/// pairs in those only: the others are all zeros, their outputs never
/// stored).
#[inline(always)]
unsafe fn compute<const BF16: bool, const NT: usize, const MT: usize, const LD: bool, const USED: usize>(
    acc: &mut Acc<NT, MT>,
    src: u32,
    src_s: u32,
) {
    // Row tile i: codes at 512 i (layout task i / 2, its tile i % 2), scales
    // in word i / 2, bytes 2 (i % 2) and up.
    let mut a = [[0u32; 4]; MT];
    unroll!(MT, |i| a[i] = lds_v4(src + 512 * i as u32));
    let mut s = [0u32; MT];
    unroll!(MT, |i| if i % 2 == 0 {
        s[i / 2] = lds(src_s + 128 * (i / 2) as u32)
    });
    if LD {
        // Benchmark variant: the loads only (a fold keeps them alive).
        let mut x = 0;
        unroll!(MT, |i| x ^= s[i] ^ a[i][0] ^ a[i][1] ^ a[i][2] ^ a[i][3]);
        unroll!(2, |h| unroll!(NT, |j| {
            let b = lds_v4(src + slot_x(MT) + 1024 * j as u32 + 512 * h as u32);
            x ^= b[0] ^ b[1] ^ b[2] ^ b[3];
        }));
        acc[0][0][0] += f32::from_bits(x & 0x3FFF_FFFF);
        return;
    }
    let mut sc = [[0u32; 2]; MT];
    unroll!(MT, |i| sc[i] = tile_scales::<BF16>(s[i / 2] >> (16 * (i % 2))));
    unroll!(2, |h| {
        // Activation words of steps 2h, 2h+1 for every column tile.
        let mut b = [[0u32; 4]; NT];
        unroll!(NT, |j| if j < USED {
            b[j] = lds_v4(src + slot_x(MT) + 1024 * j as u32 + 512 * h as u32)
        });
        unroll!(2, |sh| {
            let step = 2 * h + sh;
            unroll!(MT, |mt| {
                let w = dequant_step::<BF16>(a[mt][step], sc[mt][0], sc[mt][1]);
                unroll!(NT, |j| if j < USED {
                    mma::<BF16>(&mut acc[mt][j], w, b[j][2 * sh], b[j][2 * sh + 1])
                });
            });
        });
    });
}

/// The gated activation of DESIGN.md §4 (NaN in, NaN out), its kind
/// resolved once per epilogue so each output is one branch-free formula:
/// `g' sigmoid(a g') (u' + b)` with `g' = min(g, limit)`, `u' =
/// clamp(u, -limit, limit)` (`limit` is +inf for plain SiLU, so the clamps
/// change nothing there), `a = 1, b = 0` for SiLU and clamped SiLU, `a =
/// alpha, b = 1` for GPT-OSS. The sigmoid takes `ex2` and an approximate
/// reciprocal (1 ulp) instead of an IEEE division. (`limit` and `alpha` are
/// read from the parameters at each use: held in registers beside the
/// `wgmma` kernels' accumulators they cost a spill.)
#[derive(Clone, Copy)]
pub struct Gate<'a> {
    p: &'a FcParams,
    gpt: bool,
}

impl<'a> Gate<'a> {
    /// The activation `p.act` with `p.limit`, `p.act_alpha`.
    #[inline(always)]
    pub fn of(p: &'a FcParams) -> Gate<'a> {
        Gate { p, gpt: p.act == ActKind::GptOss as u32 }
    }

    /// Whether the activation is SiLU without a clamp (`limit` = +inf),
    /// where [`Gate::silu`] gives [`Gate::apply`]'s bits with fewer
    /// instructions (one test per epilogue, uniform across the warp).
    #[inline(always)]
    pub fn plain(&self) -> bool {
        !self.gpt && self.p.limit == f32::INFINITY
    }

    /// `act(g, u)` where [`Gate::plain`]: `g * sigmoid(g) * u`, the same
    /// operations as [`Gate::apply`] less the clamps that cannot bind.
    #[inline(always)]
    pub fn silu(g: f32, u: f32) -> f32 {
        let s = rcp(1.0 + ex2(g * -core::f32::consts::LOG2_E));
        g * s * u
    }

    /// `act(g, u)`.
    #[inline(always)]
    pub fn apply(&self, g: f32, u: f32) -> f32 {
        let limit = self.p.limit;
        let g = min_nan(g, limit);
        let u = max_nan(min_nan(u, limit), -limit);
        let x = if self.gpt { self.p.act_alpha * g } else { g };
        let s = rcp(1.0 + ex2(x * -core::f32::consts::LOG2_E));
        g * s * if self.gpt { u + 1.0 } else { u }
    }
}

/// The grid-wide plan, the same in every warp.
#[derive(Clone, Copy)]
struct Plan {
    /// Tasks (blocks of `16 MT` rows: `MT / 2` tasks of the layout) per
    /// expert.
    tpe: u32,
    /// Chunks along K.
    nchunks: u32,
    /// Tasks in all.
    tasks: u32,
    /// The reciprocals of `tpe` and top-k for [`Plan::group`] and
    /// [`Plan::token`] (not in the `moe4_exp = "fc2sl"` build, whose sliced
    /// FC2 steps by chunk counts that are not powers of two, nor on sm_89,
    /// where they cost the 8-warp FC2 a spilled word).
    #[cfg(not(any(moe4_exp = "fc2sl", moe4_arch = "sm_89")))]
    tpe_inv: u32,
    #[cfg(not(any(moe4_exp = "fc2sl", moe4_arch = "sm_89")))]
    topk_inv: u32,
}

impl Plan {
    #[inline(always)]
    fn new(tpe: u32, nchunks: u32, tasks: u32, topk: u32) -> Plan {
        #[cfg(not(any(moe4_exp = "fc2sl", moe4_arch = "sm_89")))]
        let plan = Plan { tpe, nchunks, tasks, tpe_inv: reciprocal(tpe), topk_inv: reciprocal(topk) };
        #[cfg(any(moe4_exp = "fc2sl", moe4_arch = "sm_89"))]
        let plan = {
            let _ = topk;
            Plan { tpe, nchunks, tasks }
        };
        plan
    }

    /// The token of `pair` (`pair / topk`, by [`div_by`]: run 88 measured
    /// the divisions by reciprocal 0.5-2.8 % faster at M = 1-4).
    #[inline(always)]
    fn token(&self, pair: u32, topk: u32) -> u32 {
        #[cfg(not(any(moe4_exp = "fc2sl", moe4_arch = "sm_89")))]
        let t = div_by(pair, topk, self.topk_inv);
        #[cfg(any(moe4_exp = "fc2sl", moe4_arch = "sm_89"))]
        let t = pair / topk;
        t
    }

    /// The column group of `task` (`task / tpe`), by [`div_by`] (each task
    /// switch divides by `tpe` several times; a u32 division is ~20
    /// instructions of software).
    #[inline(always)]
    fn group(&self, task: u32) -> u32 {
        #[cfg(not(any(moe4_exp = "fc2sl", moe4_arch = "sm_89")))]
        let g = div_by(task, self.tpe, self.tpe_inv);
        #[cfg(any(moe4_exp = "fc2sl", moe4_arch = "sm_89"))]
        let g = task / self.tpe;
        g
    }
}

/// What the producer needs of a task, loaded one task ahead: the expert
/// and this lane's column pairs (`u32::MAX` past the group's last pair).
#[derive(Clone, Copy)]
struct Rec<const NT: usize> {
    e: u32,
    pairs: [u32; NT],
}

/// A word of a routing table: at `global` (from the routing kernels) or,
/// in the `_rt` kernels (`RT`), the block's own copy at `smem() + rt` (from
/// [`route_in_block`]).
#[inline(always)]
unsafe fn table<const RT: bool>(global: u64, rt: u32) -> u32 {
    if RT {
        lds(smem() + rt)
    } else {
        ldg_u32_coherent(global)
    }
}

#[inline(always)]
unsafe fn load_rec<const NT: usize, const RT: bool>(p: &FcParams, plan: &Plan, task: u32) -> Rec<NT> {
    let mut r = Rec { e: 0, pairs: [u32::MAX; NT] };
    if task < plan.tasks {
        let gi = plan.group(task);
        let g = (tid() % 32) / 4;
        r.e = table::<RT>(p.groups + 16 * gi as u64, FC_RT_GROUPS + 16 * gi);
        unroll!(NT, |j| {
            let col = gi * 8 * NT as u32 + 8 * j as u32 + g;
            r.pairs[j] = table::<RT>(p.group_rows + 4 * col as u64, FC_RT_ROWS + 4 * col);
        });
    }
    r
}

/// What the epilogue needs of a task, loaded when the task starts: the
/// expert, the group's pair count, and (FC2) this lane's output columns'
/// pairs and routing weights.
#[derive(Clone, Copy)]
struct Epi<const NT: usize> {
    e: u32,
    n_grp: u32,
    pair: [[u32; 2]; NT],
    w: [[f32; 2]; NT],
}

#[inline(always)]
unsafe fn load_epi<const FC1: bool, const NT: usize, const RT: bool>(p: &FcParams, plan: &Plan, task: u32) -> Epi<NT> {
    let mut x = Epi { e: 0, n_grp: 0, pair: [[u32::MAX; 2]; NT], w: [[0.0; 2]; NT] };
    if task >= plan.tasks {
        return x;
    }
    let gi = plan.group(task);
    let rec = p.groups + 16 * gi as u64;
    x.e = table::<RT>(rec, FC_RT_GROUPS + 16 * gi);
    x.n_grp = table::<RT>(rec + 8, FC_RT_GROUPS + 16 * gi + 8);
    if !FC1 {
        let t = tid() % 4;
        unroll!(NT, |j| unroll!(2, |u| {
            let i = gi * 8 * NT as u32 + 8 * j as u32 + 2 * t + u as u32;
            let at = 4 * i as u64;
            x.pair[j][u] = table::<RT>(p.group_rows + at, FC_RT_ROWS + 4 * i);
            x.w[j][u] = f32::from_bits(table::<RT>(p.group_w + at, FC_RT_WEIGHTS + 4 * i));
        }));
    }
    x
}

/// The `_dp` kernels' per-group waits ([`crate::params::FcDpParams`]) as a
/// type: [`NoGate`] in every other kernel (a zero-sized value whose methods
/// do nothing, so those kernels' code is what it was without the waits),
/// [`DpGate`] in the `_dp` instances: the counters and FC2's pending wait.
trait GroupWait: Copy {
    /// Whether the kernel has readiness counters.
    const ON: bool;
    /// The counters (0 without).
    fn ready(&self) -> u64;
    /// The column group whose h the next activation copy is the first read
    /// of, [`GATE_NONE`] or [`GATE_ALL`].
    fn get(&self) -> u32;
    /// Sets [`GroupWait::get`].
    fn set(&mut self, g: u32);
}

/// No readiness counters: FC2 waits for all of FC1 (`griddep_wait`).
#[derive(Clone, Copy)]
struct NoGate;

impl GroupWait for NoGate {
    const ON: bool = false;
    #[inline(always)]
    fn ready(&self) -> u64 {
        0
    }
    #[inline(always)]
    fn get(&self) -> u32 {
        GATE_NONE
    }
    #[inline(always)]
    fn set(&mut self, _g: u32) {}
}

/// The `_dp` kernels' counters and FC2's pending wait.
#[cfg(moe4_exp = "deps")]
#[derive(Clone, Copy)]
struct DpGate {
    ready: u64,
    gate: u32,
}

#[cfg(moe4_exp = "deps")]
impl GroupWait for DpGate {
    const ON: bool = true;
    #[inline(always)]
    fn ready(&self) -> u64 {
        self.ready
    }
    #[inline(always)]
    fn get(&self) -> u32 {
        self.gate
    }
    #[inline(always)]
    fn set(&mut self, g: u32) {
        self.gate = g;
    }
}

/// [`GroupWait::get`]: no wait pending.
const GATE_NONE: u32 = u32::MAX;
/// [`GroupWait::get`]: FC1 has finished every group; no more waits.
const GATE_ALL: u32 = u32::MAX - 1;

/// FC2 with readiness counters ([`crate::params::FcDpParams::ready`]):
/// returns once FC1 has written all its rows (`2 k`) of column group `gi`'s
/// h: [`GATE_ALL`] if it has finished every group (counter 0; then no
/// later task needs to ask), else [`GATE_NONE`]. One acquire load each of
/// counter 0 and the group's where FC1 is done with the group; where it is
/// not, relaxed polls (no L1 invalidation each) with a pause growing to
/// 512 ns, then one more acquire load (runs 84-85). Every lane loads (one
/// address: one request per try), so each lane's later reads of h are
/// ordered after its own acquire.
#[inline(always)]
unsafe fn wait_ready<const RT: bool>(p: &FcParams, ready: u64, gi: u32) -> u32 {
    let groups = table::<RT>(p.n_active + 4, FC_RT_COUNTS + 4);
    if ld_acquire_u32(ready) >= groups {
        return GATE_ALL;
    }
    let at = ready_counter(ready, 1 + gi);
    if ld_acquire_u32(at) < 2 * p.k {
        let mut pause = 32;
        while ld_relaxed_u32(at) < 2 * p.k {
            nanosleep(pause);
            pause = if pause < 512 { 2 * pause } else { 512 };
        }
        ld_acquire_u32(at);
    }
    GATE_NONE
}

/// The copying side of a warp: walks tasks `task, task + tstep, ...`, in
/// each the chunks `c0, c0 + cstep, ... < nchunks`, holding this lane's
/// source addresses of chunk 0 of the current task (a chunk's address is
/// then one wide multiply-add).
#[derive(Clone, Copy)]
struct Producer<const NT: usize, const MT: usize, const RT: bool> {
    task: u32,
    /// The next chunk of `task` to copy, and how many are left. (The
    /// `moe4_exp = "w6"` build keeps no count: a task ends when `c` passes
    /// the last chunk, so no division by `cstep`, 3 or 6 there, and one
    /// register less.)
    c: u32,
    #[cfg(not(moe4_exp = "w6"))]
    left: u32,
    c0: u32,
    cstep: u32,
    tstep: u32,
    code: u64,
    scale: u64,
    /// Activation row per column tile, and 1 where the column is empty
    /// (nothing is read; zeros are written).
    b: [u64; NT],
    skip: [u32; NT],
    next: Rec<NT>,
    #[cfg(moe4_exp = "cbulk")]
    bk: Bulk,
}

/// `cbulk` (experiment): a warp's ring of slots fed by `cp.async.bulk`. Each
/// chunk's codes (1 KiB per layout task) and scales (128 bytes) are one
/// bulk copy each, issued by lane 0 and completing on the slot's
/// `mbarrier` (run 144: the lanes' `cp.async.cg` copies ask L2 for each
/// sector twice; run 145: `.ca` asks once, but through L1, and the layer
/// was not faster). The activations keep their `cp.async` copy groups.
#[cfg(moe4_exp = "cbulk")]
#[derive(Clone, Copy)]
struct Bulk {
    /// This lane's address in slot 0 (slot + 16 lane).
    ring: u32,
    /// The `mbarrier` of slot 0 (slot `i`'s at `bars + 8 i`).
    bars: u32,
    /// The parity each slot's next wait is for, one bit per slot.
    ph: u32,
}

#[cfg(moe4_exp = "cbulk")]
impl Bulk {
    /// Warp `warp`'s `S` barriers, initialized by its lane 0 (`dst`: this
    /// lane's address in slot 0).
    #[inline(always)]
    unsafe fn init<const S: u32>(warp: u32, lane: u32, dst: u32) -> Bulk {
        let bars = super::tma::fc_bars() + 8 * S * warp;
        if lane == 0 {
            unroll!(S as usize, |i| super::tma::mbar_init(bars + 8 * i as u32, 1));
        }
        syncwarp();
        Bulk { ring: dst, bars, ph: 0 }
    }

    /// The `mbarrier` of the slot at `dst` (this lane's address in it).
    #[inline(always)]
    fn bar<const NT: usize, const MT: usize>(&self, dst: u32) -> u32 {
        self.bars + 8 * ((dst - self.ring) / fc_slot_bytes(NT as u32, MT as u32))
    }

    /// Waits for slot `slot`'s codes and scales.
    #[inline(always)]
    unsafe fn wait(&mut self, slot: u32) {
        super::tma::mbar_wait(self.bars + 8 * slot, (self.ph >> slot) & 1);
        self.ph ^= 1 << slot;
    }

    /// After the phase (every copy waited for): the barriers invalidated,
    /// so the next phase may initialize them again.
    #[inline(always)]
    unsafe fn release<const S: u32>(&self, lane: u32) {
        syncwarp();
        if lane == 0 {
            unroll!(S as usize, |i| super::tma::mbar_inval(self.bars + 8 * i as u32));
        }
        syncwarp();
    }
}

impl<const NT: usize, const MT: usize, const RT: bool> Producer<NT, MT, RT> {
    #[inline(always)]
    unsafe fn start<const FC1: bool>(p: &FcParams, plan: &Plan, task: u32, c0: u32, cstep: u32, tstep: u32) -> Self {
        let rec = load_rec::<NT, RT>(p, plan, task);
        let next = load_rec::<NT, RT>(p, plan, task.saturating_add(tstep));
        #[cfg(not(moe4_exp = "w6"))]
        let mut x = Producer {
            task,
            c: c0,
            left: 0,
            c0,
            cstep,
            tstep,
            code: 0,
            scale: 0,
            b: [0; NT],
            skip: [1; NT],
            next,
            #[cfg(moe4_exp = "cbulk")]
            bk: Bulk { ring: 0, bars: 0, ph: 0 },
        };
        #[cfg(moe4_exp = "w6")]
        let mut x = Producer { task, c: c0, c0, cstep, tstep, code: 0, scale: 0, b: [0; NT], skip: [1; NT], next };
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
        // (`cstep` is a power of two here, the K split's group size, so
        // the division is a shift; not so in the `fc2sl` build; sm_89
        // divides.)
        #[cfg(all(not(moe4_exp = "w6"), any(moe4_exp = "fc2sl", moe4_arch = "sm_89")))]
        {
            self.left = (plan.nchunks - self.c0).div_ceil(self.cstep);
        }
        #[cfg(all(not(moe4_exp = "w6"), not(any(moe4_exp = "fc2sl", moe4_arch = "sm_89"))))]
        {
            self.left = (plan.nchunks - self.c0 + self.cstep - 1) >> self.cstep.trailing_zeros();
        }
        let lane = tid() % 32;
        let (g, t) = (lane / 4, lane % 4);
        let gi = plan.group(self.task);
        let r = self.task - gi * plan.tpe;
        // The first of the task's `MT / 2` layout tasks (the others follow,
        // `nchunks` chunks apart).
        let chunk0 = ((rec.e * plan.tpe + r) * (MT / 2) as u32) as u64 * plan.nchunks as u64;
        self.code = p.codes + chunk0 * CHUNK_CODE_BYTES as u64 + 16 * lane as u64;
        self.scale = p.scales + chunk0 * CHUNK_SCALE_BYTES as u64 + 4 * lane as u64;
        unroll!(NT, |j| {
            // FC1 reads the pair's token row of x; FC2 the group's h row.
            let empty = rec.pairs[j] == u32::MAX;
            let row = if empty {
                0
            } else if FC1 {
                plan.token(rec.pairs[j], p.topk)
            } else {
                gi * 8 * NT as u32 + 8 * j as u32 + g
            };
            self.b[j] = p.input + 2 * (row as u64 * p.k as u64 + 16 * t as u64);
            self.skip[j] = empty as u32;
        });
    }

    /// This lane's activation sources of the next chunk: per column tile
    /// the address and 1 where the column is empty.
    #[inline(always)]
    fn x_src(&self) -> [(u64, u32); NT] {
        let c = self.c as u64;
        let mut x = [(0, 1); NT];
        unroll!(NT, |j| x[j] = (self.b[j] + c * (2 * KCHUNK) as u64, self.skip[j]));
        x
    }

    /// Copies this lane's codes and scales of the next chunk into the slot
    /// at `dst` (slot + 16 lane), `dst_s` (slot + [`slot_scales`] + 4 lane).
    #[inline(always)]
    unsafe fn copy_weights<const FC1: bool>(&self, plan: &Plan, dst: u32, dst_s: u32) {
        let c = self.c as u64;
        unroll!(MT / 2, |s| {
            let chunk = s as u64 * plan.nchunks as u64 + c;
            let code = self.code + chunk * CHUNK_CODE_BYTES as u64;
            // `cca` (experiment): the codes through L1 (`.ca`). The `.cg`
            // copies of a warp's contiguous 512 bytes ask L2 for 32 sectors,
            // not 16 (run 144); `.ca` asks for 16 (run 145: FC1's L2 read
            // sectors at Qwen3 M = 1 842K -> 449K, the loads-only FC1 10 %
            // faster), but the layer is not faster (Qwen3 M = 1 / 2 +3 /
            // +5 %, M = 4 -3.6 %), so `.cg` stays.
            // `cca1` (experiment): `.ca` in FC1 only (run 145's Nsight
            // Compute with `cca`: FC1 alone 2.5 % faster, FC2 3.2 % slower).
            #[cfg(not(moe4_exp = "cbulk"))]
            if cfg!(moe4_exp = "cca") || (cfg!(moe4_exp = "cca1") && FC1) {
                cp_async16_ca(dst + 1024 * s as u32, code);
                cp_async16_ca(dst + 1024 * s as u32 + 512, code + 512);
            } else {
                cp_async16(dst + 1024 * s as u32, code);
                cp_async16(dst + 1024 * s as u32 + 512, code + 512);
            }
            #[cfg(not(moe4_exp = "cbulk"))]
            cp_async4(dst_s + 128 * s as u32, self.scale + chunk * CHUNK_SCALE_BYTES as u64);
            // `cbulk`: lane 0's addresses are the chunk's and the slot's
            // (the lanes' pieces lie in the slot as in memory).
            #[cfg(moe4_exp = "cbulk")]
            if tid() % 32 == 0 {
                let bar = self.bk.bar::<NT, MT>(dst);
                if s == 0 {
                    super::tma::mbar_arrive_expect_tx(bar, (MT / 2 * (CHUNK_CODE_BYTES + CHUNK_SCALE_BYTES)) as u32);
                }
                super::tma::bulk_load(dst + 1024 * s as u32, code, CHUNK_CODE_BYTES as u32, bar);
                let scale = self.scale + chunk * CHUNK_SCALE_BYTES as u64;
                super::tma::bulk_load(dst_s + 128 * s as u32, scale, CHUNK_SCALE_BYTES as u32, bar);
            }
        });
    }

    /// Moves on to the chunk after the next one (and to the next task after
    /// the last chunk of this one).
    #[inline(always)]
    unsafe fn advance<const FC1: bool>(&mut self, p: &FcParams, plan: &Plan) {
        self.c += self.cstep;
        #[cfg(not(moe4_exp = "w6"))]
        let done = {
            self.left -= 1;
            self.left == 0
        };
        #[cfg(moe4_exp = "w6")]
        let done = self.c >= plan.nchunks;
        if done {
            self.task = self.task.saturating_add(self.tstep);
            let rec = self.next;
            self.next = load_rec::<NT, RT>(p, plan, self.task.saturating_add(self.tstep));
            self.point::<FC1>(p, plan, &rec);
        }
    }

    /// Copies this lane's pieces of the next chunk (if any) into the slot
    /// whose lane-adjusted addresses are `dst` (codes, activations: slot +
    /// 16 lane) and `dst_s` (scales: slot + [`slot_scales`] + 4 lane); then
    /// closes a copy group (always, so the groups stay in step with the
    /// chunks).
    #[inline(always)]
    unsafe fn refill<const FC1: bool, G: GroupWait>(
        &mut self,
        p: &FcParams,
        plan: &Plan,
        dst: u32,
        dst_s: u32,
        g: &mut G,
    ) {
        if self.valid(plan) {
            self.copy_weights::<FC1>(plan, dst, dst_s);
            // The `_dp` FC2: the first h copy of a task waits for FC1 to
            // finish the task's column group.
            if G::ON && !FC1 && g.get() < GATE_ALL {
                g.set(wait_ready::<RT>(p, g.ready(), g.get()));
            }
            // The activations and the step to the next chunk are written
            // out here rather than as `copy_x` and `advance`: with those
            // calls LLVM lays out FC1's NT = 4 kernels differently from the
            // code measured (run 60).
            let c = self.c as u64;
            unroll!(NT, |j| {
                let (at, b) = (dst + slot_x(MT) + 1024 * j as u32, self.b[j] + c * (2 * KCHUNK) as u64);
                cp_async16_ca_or_zero(at, b, self.skip[j]);
                cp_async16_ca_or_zero(at + 512, b + 16, self.skip[j]);
            });
            self.c += self.cstep;
            #[cfg(not(moe4_exp = "w6"))]
            let done = {
                self.left -= 1;
                self.left == 0
            };
            #[cfg(moe4_exp = "w6")]
            let done = self.c >= plan.nchunks;
            if done {
                self.task = self.task.saturating_add(self.tstep);
                let rec = self.next;
                self.next = load_rec::<NT, RT>(p, plan, self.task.saturating_add(self.tstep));
                self.point::<FC1>(p, plan, &rec);
                if G::ON && !FC1 && self.valid(plan) && g.get() != GATE_ALL {
                    g.set(plan.group(self.task));
                }
            }
        }
        cp_async_commit();
    }
}

/// Copies a chunk's activations (`x`: [`Producer::x_src`]) into the slot
/// at `dst` (slot + 16 lane).
#[inline(always)]
unsafe fn copy_x<const NT: usize, const MT: usize>(dst: u32, x: [(u64, u32); NT]) {
    unroll!(NT, |j| {
        let at = dst + slot_x(MT) + 1024 * j as u32;
        cp_async16_ca_or_zero(at, x[j].0, x[j].1);
        cp_async16_ca_or_zero(at + 512, x[j].0 + 16, x[j].1);
    });
}

/// The decode offset of the 16-bit format, as the factor the epilogue applies.
#[inline(always)]
pub(super) fn post<const BF16: bool>() -> f32 {
    f32::from_bits(((if BF16 { BF16_POST_LOG2 } else { F16_POST_LOG2 } + 127) as u32) << 23)
}

/// Expert `e`'s global scales, `alpha_a` and (FC1, the up rows) `alpha_b`
/// (FC2: 0): every epilogue's, loaded where it wants them (the `wgmma`
/// prefill kernels ahead of their last MMAs' drain).
#[inline(always)]
pub(super) unsafe fn global_scales<const FC1: bool>(p: &FcParams, e: u32) -> (f32, f32) {
    (ldg_f32(p.alpha_a + 4 * e as u64), if FC1 { ldg_f32(p.alpha_b + 4 * e as u64) } else { 0.0 })
}

/// The epilogue of a finished task.
#[inline(always)]
unsafe fn finish<const FC1: bool, const BF16: bool, const NT: usize, const MT: usize, G: GroupWait>(
    p: &FcParams,
    g: &G,
    plan: &Plan,
    acc: &Acc<NT, MT>,
    task: u32,
    epi: &Epi<NT>,
) {
    let gi = plan.group(task);
    // The first layout task (32 rows) of this task.
    let r = (task - gi * plan.tpe) * (MT / 2) as u32;
    if FC1 {
        let (ag, au) = global_scales::<true>(p, epi.e);
        let (ag, au) = (ag * post::<BF16>(), au * post::<BF16>());
        store_h::<BF16, NT, MT, false>(p, acc, ag, au, r, gi * 8 * NT as u32, epi.n_grp);
        if G::ON {
            // The task's h rows are out: count them in the group's counter
            // (`bar.warp.sync` orders every lane's stores before lane 0's
            // release, which is cumulative); the task that completes a
            // group counts it in counter 0.
            syncwarp();
            if tid() % 32 == 0 {
                let rows = (TASK_ROWS * MT / 2) as u32;
                if atomic_add_acq_rel_u32(ready_counter(g.ready(), 1 + gi), rows) + rows == p.rows {
                    red_release_add_u32(g.ready(), 1);
                }
            }
        }
    } else {
        let a2 = global_scales::<false>(p, epi.e).0 * post::<BF16>();
        let mut scale = epi.w;
        unroll!(NT, |j| unroll!(2, |u| scale[j][u] *= a2));
        store_y::<NT, MT>(p, acc, r, &epi.pair, &scale);
    }
}

/// The timeline section of FC1 or FC2.
#[inline(always)]
const fn kind<const FC1: bool>() -> TraceKernel {
    if FC1 {
        TraceKernel::Fc1
    } else {
        TraceKernel::Fc2
    }
}

/// The kernel body: the whole rounds of the split (each warp one task:
/// [`phase`] with `KS = 1` over the tasks below `split_from`), then the
/// split rounds over the rest.
#[inline(always)]
unsafe fn fc<
    const FC1: bool,
    const BF16: bool,
    const NT: usize,
    const MT: usize,
    const WB: u32,
    const S: u32,
    const LD: bool,
    const RT: bool,
    G: GroupWait,
>(
    p: &FcParams,
    g: G,
) {
    const { assert!(MT == 2 || MT == 4) };
    trace::entry(kind::<FC1>());
    // FC1 reads the routing first thing; FC2 reads the routing (complete:
    // FC1 let FC2 launch only after its own wait) and copies its first
    // chunks' weights before waiting for FC1 (in [`phase`]).
    if FC1 {
        griddep_wait();
        trace::waited(TraceKernel::Fc1);
    }
    // The `_rt` kernels route the pairs themselves (FC2 before its wait:
    // it reads only the ids and routing weights, inputs of the layer).
    if RT {
        route_in_block(p, FC1 && bid() == 0);
    }
    let warp = tid() / 32;
    let groups = table::<RT>(p.n_active + 4, FC_RT_COUNTS + 4);
    // Rows are a multiple of 64: a whole number of 64-row tasks.
    let tpe = p.rows / (TASK_ROWS * MT / 2) as u32;
    let plan = Plan::new(tpe, p.k / KCHUNK as u32, groups * tpe, p.topk);
    trace::planned(kind::<FC1>(), plan.tasks);
    #[cfg(not(moe4_exp = "w6"))]
    let split = fc_split(plan.tasks, plan.nchunks, WB, gdim());
    // A power of two up to 8, which the compiler must see: divisions by
    // `ks` then become shifts (as a plain runtime value, they cost 10-90
    // registers in the loop).
    #[cfg(not(moe4_exp = "w6"))]
    let ks = 1u32 << (split.ks.trailing_zeros() & 3);
    // The 6-warp kernels (`moe4_exp = "w6"`): any divisor of 6 (the
    // producer divides by it once, not per task).
    #[cfg(moe4_exp = "w6")]
    let split = if WB == 6 {
        fc_split_div(plan.tasks, plan.nchunks, WB, gdim())
    } else {
        fc_split(plan.tasks, plan.nchunks, WB, gdim())
    };
    #[cfg(moe4_exp = "w6")]
    let ks = if WB == 6 { split.ks } else { 1u32 << (split.ks.trailing_zeros() & 3) };
    let (q, kp) = (warp / ks, warp % ks);
    // This warp's first task and step in each phase.
    let (first1, step1) = (bid() * WB + warp, gdim() * WB);
    let (first2, step2) = (split.split_from + bid() * (WB / ks) + q, gdim() * (WB / ks));
    if FC1 {
        griddep_launch_dependents();
    }
    if plan.tasks == 0 {
        trace::exit(kind::<FC1>());
        return;
    }
    // The whole rounds see only their own tasks.
    let whole = Plan { tasks: split.split_from, ..plan };
    // (The last argument: the phase is the kernel's first, whose first
    // chunk the timeline notes; a constant in other builds, whose code
    // then stays as it was.)
    #[cfg(moe4_exp = "trace")]
    let first_is_split = split.whole == 0;
    #[cfg(not(moe4_exp = "trace"))]
    let first_is_split = true;
    if FC1 {
        if split.whole > 0 {
            phase::<FC1, BF16, NT, MT, WB, S, LD, RT, false, G>(p, g, &whole, first1, warp, 0, 1, step1, true);
        }
        phase::<FC1, BF16, NT, MT, WB, S, LD, RT, false, G>(p, g, &plan, first2, q, kp, ks, step2, first_is_split);
    } else if split.whole > 0 {
        // FC2 waits for FC1 in its first phase (`PRE`), after copying the
        // weights of its first chunks.
        phase::<FC1, BF16, NT, MT, WB, S, LD, RT, true, G>(p, g, &whole, first1, warp, 0, 1, step1, true);
        phase::<FC1, BF16, NT, MT, WB, S, LD, RT, false, G>(p, g, &plan, first2, q, kp, ks, step2, false);
    } else {
        phase::<FC1, BF16, NT, MT, WB, S, LD, RT, true, G>(p, g, &plan, first2, q, kp, ks, step2, true);
    }
    trace::exit(kind::<FC1>());
}

/// One phase of the kernel: this warp (warp `kp` of group `q` of its block,
/// groups of `ks`) takes tasks `first, first + tstep, ...` below
/// `plan.tasks`, in each the chunks `kp, kp + ks, ...`; with `ks > 1` the
/// group's partial tiles are summed in shared memory in `kp` order (a fixed
/// order) and its warp 0 runs the epilogue. Starts and ends with this
/// warp's ring empty (every copy it issues is of a chunk it reads). `PRE`
/// (FC2's first phase): the kernel's wait for FC1 happens here, between
/// the copies of the first chunks' weights and those of their h.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn phase<
    const FC1: bool,
    const BF16: bool,
    const NT: usize,
    const MT: usize,
    const WB: u32,
    const S: u32,
    const LD: bool,
    const RT: bool,
    const PRE: bool,
    G: GroupWait,
>(
    p: &FcParams,
    mut g: G,
    plan: &Plan,
    first: u32,
    q: u32,
    kp: u32,
    ks: u32,
    tstep: u32,
    traced: bool,
) {
    const { assert!(S >= 2 && S <= 4) };
    let plan = *plan;
    // Again here: the caller's hint does not always carry through (without
    // it the 8-warp FC2 kernels spill).
    #[cfg(not(moe4_exp = "w6"))]
    let ks = 1u32 << (ks.trailing_zeros() & 3);
    #[cfg(moe4_exp = "w6")]
    let ks = if WB == 6 { ks } else { 1u32 << (ks.trailing_zeros() & 3) };
    let (warp, lane) = (tid() / 32, tid() % 32);
    let slot_bytes = fc_slot_bytes(NT as u32, MT as u32);
    // The `_rt` kernels' routing tables come first.
    let base = smem() + if RT { FC_ROUTE_BYTES } else { 0 };
    let red = base + WB * S * slot_bytes;
    let ring = base + warp * S * slot_bytes;
    let (dst, dst_s) = (ring + 16 * lane, ring + slot_scales(MT) + 4 * lane);
    let mut pf = Producer::<NT, MT, RT>::start::<FC1>(p, &plan, first, kp, ks, tstep);
    #[cfg(moe4_exp = "cbulk")]
    {
        pf.bk = Bulk::init::<S>(warp, lane, dst);
    }
    if G::ON && !FC1 && pf.valid(&plan) {
        g.set(plan.group(pf.task));
    }
    if PRE {
        // FC2's first phase: the weights of the first S - 1 chunks (inputs
        // of the layer) are copied before the wait for FC1, h (FC1's output)
        // after it. Those weight copies join copy group 0 (the first
        // chunk's), so each chunk's data is complete when its group is, as
        // in the plain prologue. (`unroll!` type-checks indices up to 7:
        // `d.min(2)` is `d` here.) The `_dp` FC2 waits for each chunk's
        // column group (FC1 done with it) instead of for all of FC1.
        let mut xs = [[(0u64, 1u32); NT]; 3];
        let mut ok = [false; 3];
        let mut gis = [GATE_NONE; 3];
        unroll!((S - 1) as usize, |d| {
            if pf.valid(&plan) {
                ok[d.min(2)] = true;
                xs[d.min(2)] = pf.x_src();
                if G::ON {
                    gis[d.min(2)] = plan.group(pf.task);
                }
                pf.copy_weights::<FC1>(&plan, dst + d as u32 * slot_bytes, dst_s + d as u32 * slot_bytes);
                pf.advance::<FC1>(p, &plan);
            }
        });
        if !G::ON {
            griddep_wait();
            trace::waited(TraceKernel::Fc2);
        }
        griddep_launch_dependents();
        let mut waited = GATE_NONE;
        unroll!((S - 1) as usize, |d| {
            if ok[d.min(2)] {
                let gi = gis[d.min(2)];
                if G::ON && g.get() != GATE_ALL && gi != waited {
                    if wait_ready::<RT>(p, g.ready(), gi) == GATE_ALL {
                        g.set(GATE_ALL);
                    }
                    waited = gi;
                }
                copy_x::<NT, MT>(dst + d as u32 * slot_bytes, xs[d.min(2)]);
            }
            cp_async_commit();
        });
        // The producer's task now: its group, unless waited for above.
        if G::ON && g.get() != GATE_ALL {
            let now = if pf.valid(&plan) { plan.group(pf.task) } else { GATE_NONE };
            g.set(if now == waited { GATE_NONE } else { now });
        }
    } else {
        let mut d = 0;
        while d < S - 1 {
            pf.refill::<FC1, G>(p, &plan, dst + d * slot_bytes, dst_s + d * slot_bytes, &mut g);
            d += 1;
        }
    }
    // Slot to read next, and the one read last (refilled next).
    let (mut rd, mut wr) = (0, S - 1);
    let n_my = if kp < plan.nchunks { (plan.nchunks - kp).div_ceil(ks) } else { 0 };
    let nacc = fc_partial_words(NT as u32, MT as u32);
    // Partial tile of group q's warp kp (1..ks): [q * (ks - 1) + kp - 1][acc][lane].
    let at = |kp: u32, i: u32| red + 4 * (((q * (ks - 1) + kp - 1) * nacc + i) * 32 + lane);
    let mut task = first;
    // `trace` builds: when the first chunk's data has landed (the wait the
    // chunk loop's first step makes).
    #[cfg(moe4_exp = "trace")]
    if traced && first < plan.tasks && n_my > 0 {
        cp_async_wait_dyn(S - 2);
        trace::first_data(kind::<FC1>());
    }
    #[cfg(not(moe4_exp = "trace"))]
    let _ = traced;
    // Block-uniform: the block has a task in this round.
    while task - q < plan.tasks {
        // Only a group's first warp runs the epilogue.
        let epi = load_epi::<FC1, NT, RT>(p, &plan, if kp == 0 { task } else { u32::MAX });
        let mut acc = [[[0f32; 4]; NT]; MT];
        // Only the column tiles that hold pairs (the group's pair count, in
        // tiles of 8; warp-uniform) are read and multiplied: the chunk loop
        // with that count built in, one copy per count, chosen once per
        // task (run 78: Mixtral M = 32 -4 %, where a group of NT = 2 tiles
        // often holds 8 pairs or fewer; a runtime test per tile, or a
        // branch per chunk, cost the loop 6-67 registers).
        if task < plan.tasks {
            let used = if NT > 1 {
                let gi = plan.group(task);
                table::<RT>(p.groups + 16 * gi as u64 + 8, FC_RT_GROUPS + 16 * gi + 8).div_ceil(8)
            } else {
                NT as u32
            };
            let ring = (dst, dst_s, slot_bytes);
            macro_rules! run_chunks {
                ($used:tt) => {
                    chunks::<FC1, BF16, NT, MT, S, LD, RT, $used, G>(
                        p,
                        &plan,
                        &mut pf,
                        &mut acc,
                        ring,
                        (&mut rd, &mut wr),
                        n_my,
                        &mut g,
                    )
                };
            }
            if NT > 1 && used <= 1 {
                run_chunks!(1)
            } else if NT > 2 && used == 2 {
                run_chunks!(2)
            } else if NT > 3 && used == 3 {
                run_chunks!(3)
            } else {
                run_chunks!(NT)
            }
        }
        if ks == 1 {
            if task < plan.tasks {
                finish::<FC1, BF16, NT, MT, G>(p, &g, &plan, &acc, task, &epi);
            }
        } else {
            // This warp's partial tile into the reduction area (`kp > 0`),
            // and warp 0's sum of the others' in `kp` order. (An experiment
            // handed the tiles over through named barriers of the group
            // instead of the two block barriers: equal bits, no faster;
            // run 118, commit 7fc36e2.)
            if kp != 0 {
                unroll!(MT, |mt| unroll!(NT, |j| unroll!(4, |c| {
                    sts(at(kp, ((mt * NT + j) * 4 + c) as u32), acc[mt][j][c].to_bits())
                })));
            }
            sync();
            if kp == 0 && task < plan.tasks {
                let mut w = 1;
                while w < ks {
                    unroll!(MT, |mt| unroll!(NT, |j| unroll!(4, |c| {
                        acc[mt][j][c] += f32::from_bits(lds(at(w, ((mt * NT + j) * 4 + c) as u32)))
                    })));
                    w += 1;
                }
                finish::<FC1, BF16, NT, MT, G>(p, &g, &plan, &acc, task, &epi);
            }
            sync();
        }
        task = task.saturating_add(tstep);
    }
    #[cfg(moe4_exp = "cbulk")]
    pf.bk.release::<S>(lane);
}

/// [`phase`]'s chunk loop on the first `USED` column tiles: `n_my` chunks
/// through the ring at `ring = (dst, dst_s, slot_bytes)` from slot `rd`,
/// refilling `wr`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn chunks<
    const FC1: bool,
    const BF16: bool,
    const NT: usize,
    const MT: usize,
    const S: u32,
    const LD: bool,
    const RT: bool,
    const USED: usize,
    G: GroupWait,
>(
    p: &FcParams,
    plan: &Plan,
    pf: &mut Producer<NT, MT, RT>,
    acc: &mut Acc<NT, MT>,
    (dst, dst_s, slot_bytes): (u32, u32, u32),
    (rd, wr): (&mut u32, &mut u32),
    n_my: u32,
    g: &mut G,
) {
    let mut i = 0;
    while i < n_my {
        cp_async_wait_dyn(S - 2);
        #[cfg(moe4_exp = "cbulk")]
        pf.bk.wait(*rd);
        pf.refill::<FC1, G>(p, plan, dst + *wr * slot_bytes, dst_s + *wr * slot_bytes, g);
        compute::<BF16, NT, MT, LD, USED>(acc, dst + *rd * slot_bytes, dst_s + *rd * slot_bytes);
        *wr = *rd;
        *rd = if *rd + 1 == S { 0 } else { *rd + 1 };
        i += 1;
    }
}

/// FC2 in slices of y (the `moe4_exp = "fc2sl"` build's `_sl` kernels):
/// the grid's warps form groups of `n = p.slices` (clamped to 1..=chunks);
/// warp `kp` of group `q` takes the group's tasks `q, q + groups, ...`, in
/// each the chunks `kp, kp + n, ...`, and writes its partial tile as y row
/// `pair * n + kp` (`moe_combine_sl_*` sums a pair's `n` rows in order).
/// No K split bound to a block, no reduction in shared memory, no barrier:
/// a task's shares may sit in any blocks, so the grid's warps divide the
/// work in units of `1 / n` task. The warps past the last whole group do
/// nothing. Otherwise [`phase`]'s pipeline as in its `PRE` form (weights
/// of the first chunks before the wait for FC1). A copy of [`phase`]'s
/// loop kept apart so the default build's kernels stay as measured.
#[cfg(moe4_exp = "fc2sl")]
#[inline(always)]
unsafe fn fc2_sliced<
    const BF16: bool,
    const NT: usize,
    const MT: usize,
    const WB: u32,
    const S: u32,
    const RT: bool,
>(
    p: &FcParams,
) {
    const { assert!(S >= 2 && S <= 4) };
    if RT {
        route_in_block(p, false);
    }
    let (warp, lane) = (tid() / 32, tid() % 32);
    let groups = table::<RT>(p.n_active + 4, FC_RT_COUNTS + 4);
    let tpe = p.rows / (TASK_ROWS * MT / 2) as u32;
    let plan = Plan::new(tpe, p.k / KCHUNK as u32, groups * tpe, p.topk);
    let n = p.slices.clamp(1, plan.nchunks.max(1));
    let used = gdim() * WB / n * n;
    let gw = bid() * WB + warp;
    if plan.tasks == 0 || gw >= used {
        return;
    }
    let (first, kp, tstep) = (gw / n, gw % n, used / n);
    let slot_bytes = fc_slot_bytes(NT as u32, MT as u32);
    let base = smem() + if RT { FC_ROUTE_BYTES } else { 0 };
    let ring = base + warp * S * slot_bytes;
    let (dst, dst_s) = (ring + 16 * lane, ring + slot_scales(MT) + 4 * lane);
    let mut pf = Producer::<NT, MT, RT>::start::<false>(p, &plan, first, kp, n, tstep);
    // The weights of the first S - 1 chunks before the wait for FC1, their
    // h after it (as `phase::<PRE>`).
    let mut xs = [[(0u64, 1u32); NT]; 3];
    let mut ok = [false; 3];
    unroll!((S - 1) as usize, |d| {
        if pf.valid(&plan) {
            ok[d.min(2)] = true;
            xs[d.min(2)] = pf.x_src();
            pf.copy_weights::<false>(&plan, dst + d as u32 * slot_bytes, dst_s + d as u32 * slot_bytes);
            pf.advance::<false>(p, &plan);
        }
    });
    griddep_wait();
    griddep_launch_dependents();
    unroll!((S - 1) as usize, |d| {
        if ok[d.min(2)] {
            copy_x::<NT, MT>(dst + d as u32 * slot_bytes, xs[d.min(2)]);
        }
        cp_async_commit();
    });
    let (mut rd, mut wr) = (0, S - 1);
    let n_my = (plan.nchunks - kp).div_ceil(n);
    let mut task = first;
    while task < plan.tasks {
        let mut epi = load_epi::<false, NT, RT>(p, &plan, task);
        let mut acc = [[[0f32; 4]; NT]; MT];
        let ring = (dst, dst_s, slot_bytes);
        chunks::<false, BF16, NT, MT, S, false, RT, NT, NoGate>(
            p,
            &plan,
            &mut pf,
            &mut acc,
            ring,
            (&mut rd, &mut wr),
            n_my,
            &mut NoGate,
        );
        // This warp's share: y row `pair * n + kp`.
        unroll!(NT, |j| unroll!(2, |u| if epi.pair[j][u] != u32::MAX {
            epi.pair[j][u] = epi.pair[j][u] * n + kp
        }));
        finish::<false, BF16, NT, MT, NoGate>(p, &NoGate, &plan, &acc, task, &epi);
        task += tstep;
    }
}

/// FC1 epilogue of one warp's `MT` 16-row tiles (from layout task `r`) x
/// `8 NT` pairs, global scales (times the decode offset)
/// `ag`/`au` given: gated activation, h rows `hrow0 + column` (decode: the
/// group's position; prefill: the slot); `PERM`: each row stored in the
/// [`wgmma_permuted`] k order (for the `wgmma` FC2).
#[inline(always)]
pub(super) unsafe fn store_h<const BF16: bool, const NT: usize, const MT: usize, const PERM: bool>(
    p: &FcParams,
    acc: &Acc<NT, MT>,
    ag: f32,
    au: f32,
    r: u32,
    hrow0: u32,
    n_grp: u32,
) {
    let lane = tid() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let inter = p.rows / 2;
    let gate = Gate::of(p);
    unroll!(MT, |mt| {
        let ch = 16 * r + 8 * mt as u32 + g;
        unroll16!(NT, |j| {
            unroll!(2, |u| {
                let col = 8 * j as u32 + 2 * t + u as u32;
                // (A branch, not a predicated store: computing every output
                // first let ptxas hold all 64 store addresses at once and
                // spill the `wgmma` kernels.)
                if col < n_grp {
                    let h = gate.apply(acc[mt][j][u] * ag, acc[mt][j][2 + u] * au);
                    let row = (hrow0 + col) as u64;
                    // PERM: h in the wgmma k order of each 64-channel chunk.
                    let at = if PERM { (ch & !63) + wgmma_permuted((ch & 63) as usize) as u32 } else { ch };
                    stg_u16(p.output + 2 * (row * inter as u64 + at as u64), to_half_bits::<BF16>(h));
                }
            })
        })
    });
}

/// FC1 epilogue with the expert's global scales loaded here (prefill):
/// [`store_h`] of task `r`.
#[inline(always)]
pub(super) unsafe fn epilogue_fc1<const BF16: bool, const NT: usize, const PERM: bool>(
    p: &FcParams,
    acc: &Acc<NT, MTILES>,
    e: u32,
    r: u32,
    hrow0: u32,
    n_grp: u32,
    post: f32,
) {
    let (ag, au) = global_scales::<true>(p, e);
    store_h::<BF16, NT, MTILES, PERM>(p, acc, ag * post, au * post, r, hrow0, n_grp);
}

/// FC1 epilogue into a shared staging tile (the `wgmma` prefill):
/// task `r`'s outputs (channels `16 (r - r0) ..` of the block
/// from task `r0`) as 16-bit values at `stage +`
/// [`fc1_stage_at`]`(column, channel, stride)`: the block's h row piece.
#[cfg(moe4_arch = "sm_90a")]
#[inline(always)]
pub(super) unsafe fn stage_fc1<const BF16: bool, const NT: usize>(
    p: &FcParams,
    acc: &Acc<NT, MTILES>,
    (alpha_g, alpha_u): (f32, f32),
    (r, r0): (u32, u32),
    post: f32,
    (stage, stride): (u32, u32),
) {
    // The expert's global scales (`alpha_*`, [`global_scales`]) come loaded
    // by the caller before its last `wgmma`s drain (runs 107 and 109).
    let (ag, au) = (alpha_g * post, alpha_u * post);
    let lane = tid() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let gate = Gate::of(p);
    macro_rules! store_with {
        ($act:expr) => {
            unroll!(MTILES, |mt| {
                // The channel in the block's piece (whose first, 16 r0, is a
                // multiple of 128: blocks of 8 tasks).
                let ch = 16 * (r - r0) + 8 * mt as u32 + g;
                let at = fc1_stage_at(0, ch, stride);
                unroll16!(NT, |j| {
                    unroll!(2, |u| {
                        let col = 8 * j as u32 + 2 * t + u as u32;
                        // Every column of the tile is stored (those past the
                        // group's pairs are never copied out): no branch per
                        // output.
                        let h = $act(acc[mt][j][u] * ag, acc[mt][j][2 + u] * au);
                        sts_u16(stage + col * stride + at, to_half_bits::<BF16>(h));
                    })
                })
            })
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

/// FC2 epilogue into a shared staging tile (prefill with 16-bit y):
/// `alpha2 x w(column) x acc` of the warp's 32
/// rows (block rows `32 w ..`), each column's 16-bit values at `stage +
/// column x stride + 2 x` the block row: a column of the tile is the y row
/// piece of its pair. One `stmatrix .trans` per 8 columns, at
/// [`fc2_stage_row`].
#[cfg(moe4_arch = "sm_90a")]
#[inline(always)]
pub(super) unsafe fn stage_fc2<const BF16: bool, const NT: usize>(
    acc: &Acc<NT, MTILES>,
    alpha2: f32,
    w: u32,
    post: f32,
    weight: impl Fn(u32) -> f32,
    (stage, stride): (u32, u32),
) {
    const { assert!(MTILES == 2) };
    let lane = tid() % 32;
    let t = lane % 4;
    // (`alpha2` loaded ahead, as in [`stage_fc1`].)
    let a2 = alpha2 * post;
    let pack = |lo: f32, hi: f32| if BF16 { pack_bf16x2(lo, hi) } else { pack_f16x2(lo, hi) };
    unroll16!(NT, |j| {
        let c = 8 * j as u32 + 2 * t;
        let (s0, s1) = (weight(c) * a2, weight(c + 1) * a2);
        // Matrix q = (16-row tile q / 2, rows 8 (q % 2) ..): block rows
        // 32 w + 8 q ..; lane 8q + i addresses its column 8j + i.
        let v = [
            pack(acc[0][j][0] * s0, acc[0][j][1] * s1),
            pack(acc[0][j][2] * s0, acc[0][j][3] * s1),
            pack(acc[1][j][0] * s0, acc[1][j][1] * s1),
            pack(acc[1][j][2] * s0, acc[1][j][3] * s1),
        ];
        stmatrix_x4_trans(stage + fc2_stage_row(lane, j as u32, w, stride), v);
    });
}

/// FC2 epilogue of one warp's `16 MT` rows (from layout task `r`) x `8 NT`
/// pairs: `y[pair] = scale * acc` (f32) for this lane's output columns
/// `(j, u)`; `u32::MAX` pairs are empty columns.
#[inline(always)]
pub(super) unsafe fn store_y<const NT: usize, const MT: usize>(
    p: &FcParams,
    acc: &Acc<NT, MT>,
    r: u32,
    pair: &[[u32; 2]; NT],
    scale: &[[f32; 2]; NT],
) {
    let g = (tid() % 32) / 4;
    unroll!(NT, |j| {
        unroll!(2, |u| {
            if pair[j][u] != u32::MAX {
                let (w, y) = (scale[j][u], p.output + 4 * pair[j][u] as u64 * p.rows as u64);
                unroll!(MT, |mt| {
                    let row = (TASK_ROWS as u32 * r + 16 * mt as u32 + g) as u64;
                    stg_u32(y + 4 * row, (acc[mt][j][u] * w).to_bits());
                    stg_u32(y + 4 * (row + 8), (acc[mt][j][2 + u] * w).to_bits());
                });
            }
        })
    });
}

/// FC2 epilogue with the pairs and routing weights loaded here from the
/// group's slots (prefill), for up to 8 column tiles at a time (the
/// `wgmma` kernels' 16 would not fit in registers beside the accumulators).
#[inline(always)]
pub(super) unsafe fn epilogue_fc2<const BF16: bool, const NT: usize>(
    p: &FcParams,
    acc: &Acc<NT, MTILES>,
    e: u32,
    r: u32,
    slot0: u32,
    n_grp: u32,
    post: f32,
) {
    let pair_w = |col: u32| {
        let pair = ldg_u32_coherent(p.sorted_pairs + 4 * (slot0 + col) as u64);
        (pair, ldg_f32(p.topk_weights + 4 * pair as u64))
    };
    epilogue_fc2_with::<BF16, NT>(p, acc, e, r, n_grp, post, pair_w);
}

/// FC2 epilogue with each column's (pair, routing weight) from `pair_w`:
/// `y[pair, row] = alpha2 * w * acc`, in f32, or (`p.y16 != 0`) in the
/// activation's 16-bit format (the prefill path: half of y's traffic).
#[inline(always)]
pub(super) unsafe fn epilogue_fc2_with<const BF16: bool, const NT: usize>(
    p: &FcParams,
    acc: &Acc<NT, MTILES>,
    e: u32,
    r: u32,
    n_grp: u32,
    post: f32,
    pair_w: impl Fn(u32) -> (u32, f32),
) {
    let lane = tid() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let a2 = global_scales::<false>(p, e).0 * post;
    let y16 = p.y16 != 0;
    unroll!(NT.div_ceil(8), |h| {
        let mut pair = [[u32::MAX; 2]; 8];
        let mut scale = [[0f32; 2]; 8];
        unroll!(8, |jj| unroll!(2, |u| {
            let col = 8 * (8 * h + jj) as u32 + 2 * t + u as u32;
            if 8 * h + jj < NT && col < n_grp {
                let (pr, w) = pair_w(col);
                pair[jj][u] = pr;
                scale[jj][u] = w * a2;
            }
        }));
        unroll!(8, |jj| unroll!(2, |u| {
            let j = 8 * h + jj;
            if j < NT && pair[jj][u] != u32::MAX {
                let (w, pr) = (scale[jj][u], pair[jj][u] as u64 * p.rows as u64);
                unroll!(MTILES, |mt| {
                    let row = (TASK_ROWS as u32 * r + 16 * mt as u32 + g) as u64;
                    let (v0, v8) = (acc[mt][j][u] * w, acc[mt][j][2 + u] * w);
                    if y16 {
                        let y = p.output + 2 * pr;
                        stg_u16(y + 2 * row, to_half_bits::<BF16>(v0));
                        stg_u16(y + 2 * (row + 8), to_half_bits::<BF16>(v8));
                    } else {
                        let y = p.output + 4 * pr;
                        stg_u32(y + 4 * row, v0.to_bits());
                        stg_u32(y + 4 * (row + 8), v8.to_bits());
                    }
                });
            }
        }));
    });
}

macro_rules! fc_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal, $nt:literal, $mt:literal, $wb:literal, $s:literal, $ld:literal, $rt:literal;)*) => {$(
        /// FC kernel instance `(FC1?, bf16?, column tiles, 16-row tiles per
        /// task, warps per block, pipeline slots per warp, loads only (a
        /// benchmark variant, wrong results)?, routes the pairs itself?)`.
        ///
        /// # Safety
        /// `p` must describe device buffers as [`FcParams`] documents, from
        /// a routing run over the same ids with `group = 8 * NT` (or, for
        /// the `_rt` kernels, `route_pairs` at most `FC_ROUTE_MAX_PAIRS`);
        /// `32 WB` threads per block, `fc_smem_bytes(NT, WB, S, MT)` (plus
        /// `FC_ROUTE_BYTES` for the `_rt` kernels) of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            fc::<$fc1, $bf16, $nt, $mt, $wb, $s, $ld, $rt, NoGate>(&p, NoGate)
        }
    )*};
}

/// The `_dp` instances (`moe4_exp = "deps"` builds): the kernels of the
/// same name without `_dp`, with FC1 counting its finished rows per column
/// group and FC2 reading each group's h once FC1 is done with it
/// ([`crate::params::FcDpParams`]) instead of waiting for all of FC1.
#[cfg(moe4_exp = "deps")]
macro_rules! fc_dp_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal, $nt:literal, $mt:literal, $wb:literal, $s:literal, $rt:literal;)*) => {$(
        /// A per-group-wait instance `(FC1?, bf16?, column tiles, 16-row
        /// tiles per task, warps per block, pipeline slots per warp,
        /// routes the pairs itself?)` of the decode FC kernels.
        ///
        /// # Safety
        /// As the instance without `_dp`, with `p.fc`; `p.ready` as
        /// [`crate::params::FcDpParams`] documents, for FC1 and FC2 of one
        /// call alike.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: crate::params::FcDpParams) {
            fc::<$fc1, $bf16, $nt, $mt, $wb, $s, false, $rt, DpGate>(&p.fc, DpGate { ready: p.ready, gate: GATE_NONE })
        }
    )*};
}

#[cfg(moe4_exp = "deps")]
fc_dp_kernels! {
    moe_fc1_bf16_nt1_dp: true, true, 1, 2, 4, 4, false;
    moe_fc1_bf16_nt2_dp: true, true, 2, 2, 4, 3, false;
    moe_fc1_bf16_nt4_dp: true, true, 4, 2, 4, 3, false;
    moe_fc1_f16_nt1_dp: true, false, 1, 2, 4, 4, false;
    moe_fc1_f16_nt2_dp: true, false, 2, 2, 4, 3, false;
    moe_fc1_f16_nt4_dp: true, false, 4, 2, 4, 3, false;
    moe_fc2_bf16_nt1_dp: false, true, 1, 2, 4, 4, false;
    moe_fc2_bf16_nt2_dp: false, true, 2, 2, 4, 3, false;
    moe_fc2_bf16_nt4_dp: false, true, 4, 2, 4, 3, false;
    moe_fc2_f16_nt1_dp: false, false, 1, 2, 4, 4, false;
    moe_fc2_f16_nt2_dp: false, false, 2, 2, 4, 3, false;
    moe_fc2_f16_nt4_dp: false, false, 4, 2, 4, 3, false;
    moe_fc1_bf16_nt2_r64_dp: true, true, 2, 4, 4, 3, false;
    moe_fc1_bf16_nt4_r64_dp: true, true, 4, 4, 4, 3, false;
    moe_fc1_f16_nt2_r64_dp: true, false, 2, 4, 4, 3, false;
    moe_fc1_f16_nt4_r64_dp: true, false, 4, 4, 4, 3, false;
    moe_fc2_bf16_nt2_r64_dp: false, true, 2, 4, 4, 3, false;
    moe_fc2_bf16_nt4_r64_dp: false, true, 4, 4, 4, 3, false;
    moe_fc2_f16_nt2_r64_dp: false, false, 2, 4, 4, 3, false;
    moe_fc2_f16_nt4_r64_dp: false, false, 4, 4, 4, 3, false;
    moe_fc1_bf16_nt1_w8_dp: true, true, 1, 2, 8, 3, false;
    moe_fc1_f16_nt1_w8_dp: true, false, 1, 2, 8, 3, false;
    moe_fc2_bf16_nt1_w8_dp: false, true, 1, 2, 8, 3, false;
    moe_fc2_f16_nt1_w8_dp: false, false, 1, 2, 8, 3, false;
    moe_fc1_bf16_nt1_rt_dp: true, true, 1, 2, 4, 4, true;
    moe_fc1_f16_nt1_rt_dp: true, false, 1, 2, 4, 4, true;
    moe_fc2_bf16_nt1_rt_dp: false, true, 1, 2, 4, 4, true;
    moe_fc2_f16_nt1_rt_dp: false, false, 1, 2, 4, 4, true;
    moe_fc1_bf16_nt1_w8_rt_dp: true, true, 1, 2, 8, 3, true;
    moe_fc1_f16_nt1_w8_rt_dp: true, false, 1, 2, 8, 3, true;
    moe_fc2_bf16_nt1_w8_rt_dp: false, true, 1, 2, 8, 3, true;
    moe_fc2_f16_nt1_w8_rt_dp: false, false, 1, 2, 8, 3, true;
}

// Warps and depth as `launch::fc_stages` says; `_w8`: the 8-warp kernels
// for small batches (a task's K split up to 8 ways); `_ld`: the loads-only
// variant the benchmark measures the memory side with; `_r64`: 64-row
// tasks (each warp two tasks of the layout, one read of the activations
// for both); `_rt`: one column tile, routing the pairs in the block's own
// shared memory (small batches: no routing launch).
fc_kernels! {
    moe_fc1_bf16_nt1: true, true, 1, 2, 4, 4, false, false;
    moe_fc1_bf16_nt2: true, true, 2, 2, 4, 3, false, false;
    moe_fc1_bf16_nt4: true, true, 4, 2, 4, 3, false, false;
    moe_fc1_f16_nt1: true, false, 1, 2, 4, 4, false, false;
    moe_fc1_f16_nt2: true, false, 2, 2, 4, 3, false, false;
    moe_fc1_f16_nt4: true, false, 4, 2, 4, 3, false, false;
    moe_fc2_bf16_nt1: false, true, 1, 2, 4, 4, false, false;
    moe_fc2_bf16_nt2: false, true, 2, 2, 4, 3, false, false;
    moe_fc2_bf16_nt4: false, true, 4, 2, 4, 3, false, false;
    moe_fc2_f16_nt1: false, false, 1, 2, 4, 4, false, false;
    moe_fc2_f16_nt2: false, false, 2, 2, 4, 3, false, false;
    moe_fc2_f16_nt4: false, false, 4, 2, 4, 3, false, false;
    moe_fc1_bf16_nt2_r64: true, true, 2, 4, 4, 3, false, false;
    moe_fc1_bf16_nt4_r64: true, true, 4, 4, 4, 3, false, false;
    moe_fc1_f16_nt2_r64: true, false, 2, 4, 4, 3, false, false;
    moe_fc1_f16_nt4_r64: true, false, 4, 4, 4, 3, false, false;
    moe_fc2_bf16_nt2_r64: false, true, 2, 4, 4, 3, false, false;
    moe_fc2_bf16_nt4_r64: false, true, 4, 4, 4, 3, false, false;
    moe_fc2_f16_nt2_r64: false, false, 2, 4, 4, 3, false, false;
    moe_fc2_f16_nt4_r64: false, false, 4, 4, 4, 3, false, false;
    moe_fc1_bf16_nt1_w8: true, true, 1, 2, 8, 3, false, false;
    moe_fc1_f16_nt1_w8: true, false, 1, 2, 8, 3, false, false;
    moe_fc2_bf16_nt1_w8: false, true, 1, 2, 8, 3, false, false;
    moe_fc2_f16_nt1_w8: false, false, 1, 2, 8, 3, false, false;
    moe_fc1_bf16_nt1_ld: true, true, 1, 2, 4, 4, true, false;
    moe_fc2_bf16_nt1_ld: false, true, 1, 2, 4, 4, true, false;
    moe_fc1_bf16_nt1_rt: true, true, 1, 2, 4, 4, false, true;
    moe_fc1_f16_nt1_rt: true, false, 1, 2, 4, 4, false, true;
    moe_fc2_bf16_nt1_rt: false, true, 1, 2, 4, 4, false, true;
    moe_fc2_f16_nt1_rt: false, false, 1, 2, 4, 4, false, true;
    moe_fc1_bf16_nt1_w8_rt: true, true, 1, 2, 8, 3, false, true;
    moe_fc1_f16_nt1_w8_rt: true, false, 1, 2, 8, 3, false, true;
    moe_fc2_bf16_nt1_w8_rt: false, true, 1, 2, 8, 3, false, true;
    moe_fc2_f16_nt1_w8_rt: false, false, 1, 2, 8, 3, false, true;
    moe_fc1_bf16_nt1_ld_rt: true, true, 1, 2, 4, 4, true, true;
    moe_fc2_bf16_nt1_ld_rt: false, true, 1, 2, 4, 4, true, true;
}

// Sliced FC2 kernel instances `(bf16?, routes the pairs itself?)`
// (`moe4_exp = "fc2sl"`): [`fc2_sliced`] with one column tile, 32-row
// tasks, 4 warps, 4 slots per warp.
#[cfg(moe4_exp = "fc2sl")]
macro_rules! fc2_sliced_kernels {
    ($($name:ident: $bf16:literal, $rt:literal;)*) => {$(
        /// Sliced FC2 (see [`fc2_sliced`]).
        ///
        /// # Safety
        /// As the `moe_fc2_*_nt1` kernels, with `p.slices` set and y
        /// holding `pairs * slices` rows.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            fc2_sliced::<$bf16, 1, 2, 4, 4, $rt>(&p)
        }
    )*};
}

#[cfg(moe4_exp = "fc2sl")]
fc2_sliced_kernels! {
    moe_fc2_bf16_nt1_sl: true, false;
    moe_fc2_f16_nt1_sl: false, false;
    moe_fc2_bf16_nt1_sl_rt: true, true;
    moe_fc2_f16_nt1_sl_rt: false, true;
}

// Blocks of 6 warps (`moe4_exp = "w6"`): a task's K split 1, 2, 3 or 6
// ways ([`crate::launch::fc_split_div`]), 4 blocks (24 warps) per SM, 3
// slots per warp, for FC1 where the task count fits neither 4- nor 8-warp
// splits (DeepSeek-V3 at M = 1 and 2: 1024 and 2048 tasks of 112 chunks).
// Not built: the FC2 variants, which spill at the 80 registers 4 blocks
// allow.
#[cfg(moe4_exp = "w6")]
fc_kernels! {
    moe_fc1_bf16_nt1_w6: true, true, 1, 2, 6, 3, false, false;
    moe_fc1_f16_nt1_w6: true, false, 1, 2, 6, 3, false, false;
    moe_fc1_bf16_nt1_w6_rt: true, true, 1, 2, 6, 3, false, true;
    moe_fc1_f16_nt1_w6_rt: true, false, 1, 2, 6, 3, false, true;
}
