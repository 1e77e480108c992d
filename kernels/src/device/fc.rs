//! `moe_fc1_*` and `moe_fc2_*`: the NVFP4 W4A16 streaming GEMMs of the
//! decode path (few tokens per expert, bandwidth-bound).
//!
//! **Work.** A *task* is (active expert, column group of up to `8 * NT` of
//! its pairs, 32 weight rows); the number of tasks is read on the device
//! from the routing output, so nothing waits for the host. Two schedules,
//! chosen per launch on the device:
//! - fewer tasks than warps in the grid (small batches): a block takes a
//!   task and its 4 warps split K, summing their partial tiles in shared
//!   memory in a fixed order ([`fc_block`]);
//! - otherwise every warp works alone: warp `w` takes tasks `w, w + W, ...`
//!   (W = warps in the grid), streaming the chunks of all its tasks as one
//!   sequence, so the next task's loads are in flight while the last chunks
//!   of this one are computed (a register ring `D` chunks deep); blocks
//!   never synchronize.
//!
//! **What a lane loads per chunk** (see [`crate::tile`]): 2 x 16 bytes of
//! codes (its rows `g`, `g + 8` of both 16-row tiles, k `16t..16t+16`), 4
//! bytes of E4M3 scales (one per row), and for each 8-pair column tile 32
//! bytes of activations `x[tok][16t..16t+16]` (`tok` the tile's column `g`).
//! Codes stream past L1; activations go through L1/L2 (every task of the
//! expert reads them).
//!
//! **Math per chunk and 16-row tile:** 4 k-steps, each one packed word
//! decoded ([`crate::decode`]) to four 16x2 registers, multiplied by the
//! row's block scale (one `fma/mul .x2` per register), one `mma.m16n8k16`
//! per live column tile. The epilogue multiplies by the expert's global
//! scale (and `2^7` / `2^14`, the decode's offset).
//!
//! FC1's rows are gate/up interleaved per 8 channels ([`crate::tile::fc1_row`])
//! so each thread holds both halves of its outputs and applies the gated
//! activation in registers, writing h `[slot, I]` (16-bit). FC2 writes
//! `y[pair, H] = alpha2 * w_pair * acc` in f32 for the combine kernel.

use super::arch::*;
use crate::decode::{bf16_scale_from_f16x2, decode_bf16, decode_f16, BF16_POST_LOG2, F16_POST_LOG2};
use crate::params::{ActKind, FcParams};
use crate::tile::{CHUNK_CODE_BYTES, CHUNK_SCALE_BYTES, KCHUNK, KSTEPS, MTILES, TASK_ROWS};

/// Warps per block.
pub const WARPS: u32 = crate::launch::FC_THREADS / 32;

#[derive(Clone, Copy)]
struct Stage<const NT: usize> {
    a: [[u32; 4]; MTILES],
    s: u32,
    b: [[u32; 8]; NT],
}

impl<const NT: usize> Stage<NT> {
    const ZERO: Self = Stage { a: [[0; 4]; MTILES], s: 0, b: [[0; 8]; NT] };
}

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

#[inline(always)]
fn compute<const BF16: bool, const NT: usize>(acc: &mut [[[f32; 4]; NT]; MTILES], st: &Stage<NT>, nt_active: u32) {
    let sc = lane_scales::<BF16>(st.s);
    unroll!(KSTEPS, |step| {
        unroll!(MTILES, |mt| {
            let a = dequant_step::<BF16>(st.a[mt][step], sc[mt][0], sc[mt][1]);
            unroll!(NT, |j| {
                if (j as u32) < nt_active {
                    mma::<BF16>(&mut acc[mt][j], a, st.b[j][2 * step], st.b[j][2 * step + 1]);
                }
            });
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
    tpe: u32,
    nchunks: u32,
    tasks: u32,
    nw: u32,
}

/// One task as a cursor over its chunks: where its weights and activations
/// are, and what it outputs.
#[derive(Clone, Copy)]
struct Unit<const NT: usize> {
    u: u32,
    c: u32,
    c_end: u32,
    expert: u32,
    r: u32,
    gi: u32,
    slot0: u32,
    n_grp: u32,
    code: u64,
    scale: u64,
    brow: [u64; NT],
}

impl<const NT: usize> Unit<NT> {
    #[inline(always)]
    fn valid(&self, plan: &Plan) -> bool {
        self.u < plan.tasks
    }
}

/// Fills in task `u` (or marks it past the end).
#[inline(always)]
unsafe fn unit_at<const FC1: bool, const NT: usize>(p: &FcParams, plan: &Plan, u: u32) -> Unit<NT> {
    let lane = tid() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let mut x =
        Unit { u, c: 0, c_end: 0, expert: 0, r: 0, gi: 0, slot0: 0, n_grp: 0, code: 0, scale: 0, brow: [0; NT] };
    if u >= plan.tasks {
        return x;
    }
    x.c_end = plan.nchunks;
    let (gi, r) = (u / plan.tpe, u % plan.tpe);
    let gsize = 8 * NT as u32;
    // Two independent loads: the group record (expert, first slot, pairs)
    // and this lane's column rows (u32::MAX past the group's last pair).
    let rec = p.groups + 16 * gi as u64;
    let e = ldg_u32_coherent(rec);
    x.slot0 = ldg_u32_coherent(rec + 4);
    x.n_grp = ldg_u32_coherent(rec + 8);
    x.gi = gi;
    x.expert = e;
    x.r = r;
    let tglob = (e * plan.tpe + r) as u64 * plan.nchunks as u64;
    x.code = p.codes + tglob * CHUNK_CODE_BYTES as u64 + 16 * lane as u64;
    x.scale = p.scales + tglob * CHUNK_SCALE_BYTES as u64 + 4 * lane as u64;
    unroll!(NT, |j| {
        let col = 8 * j as u32 + g;
        let tok = ldg_u32_coherent(p.group_rows + 4 * (gi * gsize + col) as u64);
        if tok != u32::MAX {
            // FC1 reads the pair's token row of x; FC2 the group's h row.
            let row = if FC1 { tok } else { gi * gsize + col };
            x.brow[j] = p.input + 2 * (row as u64 * p.k as u64 + 16 * t as u64);
        }
    });
    x
}

/// Steps a cursor to its next chunk (and next task).
#[inline(always)]
unsafe fn advance<const FC1: bool, const NT: usize>(p: &FcParams, plan: &Plan, x: &mut Unit<NT>) {
    x.c += 1;
    if x.c >= x.c_end {
        *x = unit_at::<FC1, NT>(p, plan, x.u + plan.nw);
    }
}

#[inline(always)]
unsafe fn load_stage<const NT: usize>(x: &Unit<NT>) -> Stage<NT> {
    let mut st = Stage::<NT>::ZERO;
    let c = x.code + x.c as u64 * CHUNK_CODE_BYTES as u64;
    st.a[0] = ldg_stream_v4(c);
    st.a[1] = ldg_stream_v4(c + 512);
    st.s = ldg_u32(x.scale + x.c as u64 * CHUNK_SCALE_BYTES as u64);
    unroll!(NT, |j| {
        if x.brow[j] != 0 {
            let b = x.brow[j] + x.c as u64 * (2 * KCHUNK) as u64;
            let lo = ldg_v4(b);
            let hi = ldg_v4(b + 16);
            st.b[j] = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
        }
    });
    st
}

#[inline(always)]
unsafe fn fc<const FC1: bool, const BF16: bool, const NT: usize, const D: usize, const DB: usize>(p: &FcParams) {
    let gw = bid() * WARPS + tid() / 32;
    let nw = gdim() * WARPS;
    let groups = ldg_u32_coherent(p.n_active + 4);
    let tpe = p.rows / TASK_ROWS as u32;
    let nchunks = p.k / KCHUNK as u32;
    let tasks = groups * tpe;
    if tasks == 0 {
        return;
    }
    if tasks < nw {
        // Fewer tasks than warps: a block per task, its warps splitting K
        // and summing through shared memory.
        return fc_block::<FC1, BF16, NT, DB>(p, tasks, tpe, nchunks);
    }
    let plan = Plan { tpe, nchunks, tasks, nw };
    let post = f32::from_bits(((if BF16 { BF16_POST_LOG2 } else { F16_POST_LOG2 } + 127) as u32) << 23);

    let mut pf = unit_at::<FC1, NT>(p, &plan, gw);
    let mut cc = pf;
    let mut ring = [Stage::<NT>::ZERO; D];
    unroll!(D, |d| {
        if pf.valid(&plan) {
            ring[d] = load_stage(&pf);
            advance::<FC1, NT>(p, &plan, &mut pf);
        }
    });
    let mut acc = [[[0f32; 4]; NT]; MTILES];
    while cc.valid(&plan) {
        unroll!(D, |d| {
            if cc.valid(&plan) {
                let st = ring[d];
                if pf.valid(&plan) {
                    ring[d] = load_stage(&pf);
                    advance::<FC1, NT>(p, &plan, &mut pf);
                }
                let nt_active = cc.n_grp.div_ceil(8);
                compute::<BF16, NT>(&mut acc, &st, nt_active);
                if cc.c + 1 >= cc.c_end {
                    if FC1 {
                        epilogue_fc1::<BF16, NT>(p, &acc, cc.expert, cc.r, cc.gi * 8 * NT as u32, cc.n_grp, post);
                    } else {
                        epilogue_fc2::<NT>(p, &acc, cc.expert, cc.r, cc.slot0, cc.n_grp, post);
                    }
                    acc = [[[0f32; 4]; NT]; MTILES];
                }
                advance::<FC1, NT>(p, &plan, &mut cc);
            }
        });
    }
}

/// Block-per-task schedule: block `b` takes tasks `b, b + grid, ...`; warp
/// `w` takes chunks `w, w + 4, ...` of the task's K, `D` in flight; the four
/// partial tiles are summed in shared memory and warp 0 runs the epilogue.
#[inline(always)]
unsafe fn fc_block<const FC1: bool, const BF16: bool, const NT: usize, const D: usize>(
    p: &FcParams,
    tasks: u32,
    tpe: u32,
    nchunks: u32,
) {
    let (warp, lane) = (tid() / 32, tid() % 32);
    let n_my = if warp < nchunks { (nchunks - warp).div_ceil(WARPS) } else { 0 };
    let nacc = (MTILES * NT * 4) as u32;
    let red = smem();
    let post = f32::from_bits(((if BF16 { BF16_POST_LOG2 } else { F16_POST_LOG2 } + 127) as u32) << 23);
    let mut task = bid();
    while task < tasks {
        let plan = Plan { tpe, nchunks, tasks, nw: 0 };
        let mut x = unit_at::<FC1, NT>(p, &plan, task);
        let nt_active = x.n_grp.div_ceil(8);
        let mut acc = [[[0f32; 4]; NT]; MTILES];
        let mut ring = [Stage::<NT>::ZERO; D];
        unroll!(D, |d| {
            if (d as u32) < n_my {
                x.c = warp + WARPS * d as u32;
                ring[d] = load_stage(&x);
            }
        });
        let mut i = 0;
        while i < n_my {
            unroll!(D, |d| {
                let idx = i + d as u32;
                if idx < n_my {
                    let st = ring[d];
                    if idx + (D as u32) < n_my {
                        x.c = warp + WARPS * (idx + D as u32);
                        ring[d] = load_stage(&x);
                    }
                    compute::<BF16, NT>(&mut acc, &st, nt_active);
                }
            });
            i += D as u32;
        }
        // Sum the warps' partial tiles: [warp-1][accumulator][lane].
        let at =
            |w: u32, mt: usize, j: usize, c: usize| red + 4 * ((w * nacc + ((mt * NT + j) * 4 + c) as u32) * 32 + lane);
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
            if FC1 {
                epilogue_fc1::<BF16, NT>(p, &acc, x.expert, x.r, x.gi * 8 * NT as u32, x.n_grp, post);
            } else {
                epilogue_fc2::<NT>(p, &acc, x.expert, x.r, x.slot0, x.n_grp, post);
            }
        }
        sync();
        task += gdim();
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
    ($($name:ident: $fc1:literal, $bf16:literal, $nt:literal, $d:literal, $db:literal;)*) => {$(
        /// FC kernel instance `(FC1?, bf16?, column tiles, pipeline depth of
        /// the warp path, of the block path)`.
        ///
        /// # Safety
        /// `p` must describe device buffers as [`FcParams`] documents, from
        /// a routing run over the same ids with `group = 8 * NT`; 128
        /// threads per block, `fc_smem_bytes(NT)` of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            fc::<$fc1, $bf16, $nt, $d, $db>(&p)
        }
    )*};
}

fc_kernels! {
    moe_fc1_bf16_nt1: true, true, 1, 4, 3;
    moe_fc1_bf16_nt2: true, true, 2, 3, 2;
    moe_fc1_bf16_nt4: true, true, 4, 2, 2;
    moe_fc1_f16_nt1: true, false, 1, 4, 3;
    moe_fc1_f16_nt2: true, false, 2, 3, 2;
    moe_fc1_f16_nt4: true, false, 4, 2, 2;
    moe_fc2_bf16_nt1: false, true, 1, 4, 3;
    moe_fc2_bf16_nt2: false, true, 2, 3, 2;
    moe_fc2_bf16_nt4: false, true, 4, 2, 2;
    moe_fc2_f16_nt1: false, false, 1, 4, 3;
    moe_fc2_f16_nt2: false, false, 2, 3, 2;
    moe_fc2_f16_nt4: false, false, 4, 2, 2;
}
