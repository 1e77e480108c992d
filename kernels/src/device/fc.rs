//! `moe_fc1_*` and `moe_fc2_*`: the NVFP4 W4A16 streaming GEMMs of the
//! decode path (few tokens per expert, bandwidth-bound).
//!
//! **Work.** A *task* is (active expert, 32 weight rows). Blocks are
//! persistent: block `b` takes tasks `b, b + grid, ...`; the number of tasks
//! (`n_active * rows / 32`) is read on the device, so nothing waits for the
//! host. Within a task the block's 4 warps split K: warp `w` takes chunks
//! `w, w + 4, ...` of 64 k, then the four partial tiles are summed through
//! shared memory and warp 0 runs the epilogue.
//!
//! **What a lane loads per chunk** (see [`crate::tile`]): 2 x 16 bytes of
//! codes (its rows `g`, `g + 8` of both 16-row tiles, k `16t..16t+16`), 4
//! bytes of E4M3 scales (one per row: the 16 k are one scale block), and
//! for each 8-token column tile 32 bytes of activations `x[tok][16t..16t+16]`
//! where `tok` is the tile's column `g`. Codes stream past L1; activations
//! are read through L1/L2 (every task of the expert reads them).
//! `D` chunks are in flight per warp (a register ring), so with 4+ blocks
//! per SM tens of KiB per SM are in flight.
//!
//! **Math per chunk and 16-row tile:** 4 k-steps, each one packed word
//! decoded ([`crate::decode`]) to four 16x2 registers, multiplied by the
//! row's block scale (one `fma/mul .x2` per register), and one
//! `mma.m16n8k16` per 8-token column tile. The epilogue multiplies by the
//! expert's global scale (and `2^7` / `2^14`, the decode's offset).
//!
//! **Token groups.** An expert's pairs are taken `8 * NT` at a time; an
//! expert with more pairs repeats the task for the next group (its weights
//! then come from L2).
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

#[inline(always)]
unsafe fn load_stage<const NT: usize>(code: u64, scale: u64, brow: &[u64; NT], chunk: u32) -> Stage<NT> {
    let mut st = Stage::<NT>::ZERO;
    let c = code + chunk as u64 * CHUNK_CODE_BYTES as u64;
    st.a[0] = ldg_stream_v4(c);
    st.a[1] = ldg_stream_v4(c + 512);
    st.s = ldg_u32(scale + chunk as u64 * CHUNK_SCALE_BYTES as u64);
    unroll::<NT>(|j| {
        if brow[j] != 0 {
            let x = brow[j] + chunk as u64 * (2 * KCHUNK) as u64;
            let lo = ldg_v4(x);
            let hi = ldg_v4(x + 16);
            st.b[j] = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
        }
    });
    st
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

#[inline(always)]
fn mma<const BF16: bool>(d: &mut [f32; 4], a: [u32; 4], b0: u32, b1: u32) {
    if BF16 {
        mma_bf16(d, a, b0, b1)
    } else {
        mma_f16(d, a, b0, b1)
    }
}

#[inline(always)]
fn compute<const BF16: bool, const NT: usize>(acc: &mut [[[f32; 4]; NT]; MTILES], st: &Stage<NT>, nt_active: u32) {
    let sc = lane_scales::<BF16>(st.s);
    unroll::<KSTEPS>(|step| {
        unroll::<MTILES>(|mt| {
            let a = dequant_step::<BF16>(st.a[mt][step], sc[mt][0], sc[mt][1]);
            unroll::<NT>(|j| {
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

#[inline(always)]
unsafe fn fc<const FC1: bool, const BF16: bool, const NT: usize, const D: usize>(p: &FcParams) {
    let t0 = tid();
    let (warp, lane) = (t0 / 32, t0 % 32);
    let (g, t) = (lane / 4, lane % 4);
    let n_active = ldg_u32_coherent(p.n_active);
    let tpe = p.rows / TASK_ROWS as u32;
    let nchunks = p.k / KCHUNK as u32;
    let total = n_active * tpe;
    let n_my = if warp < nchunks { (nchunks - warp).div_ceil(WARPS) } else { 0 };
    let nacc = (MTILES * NT * 4) as u32;
    let red = smem();
    let post = f32::from_bits(((if BF16 { BF16_POST_LOG2 } else { F16_POST_LOG2 } + 127) as u32) << 23);

    let mut task = bid();
    while task < total {
        let (ai, r) = (task / tpe, task % tpe);
        let rec = p.active + 16 * ai as u64;
        let e = ldg_u32_coherent(rec);
        let start = ldg_u32_coherent(rec + 4);
        let count = ldg_u32_coherent(rec + 8);
        let tglob = (e * tpe + r) as u64 * nchunks as u64;
        let code = p.codes + tglob * CHUNK_CODE_BYTES as u64 + 16 * lane as u64;
        let scale = p.scales + tglob * CHUNK_SCALE_BYTES as u64 + 4 * lane as u64;
        let mut g0 = 0;
        while g0 < count {
            let n_grp = if count - g0 < 8 * NT as u32 { count - g0 } else { 8 * NT as u32 };
            let nt_active = n_grp.div_ceil(8);
            // This lane's activation row for each column tile (0 = none).
            let mut brow = [0u64; NT];
            unroll::<NT>(|j| {
                let col = 8 * j as u32 + g;
                if col < n_grp {
                    let slot = start + g0 + col;
                    let row = if FC1 { ldg_u32_coherent(p.sorted_pairs + 4 * slot as u64) / p.topk } else { slot };
                    brow[j] = p.input + 2 * (row as u64 * p.k as u64 + 16 * t as u64);
                }
            });

            let mut acc = [[[0f32; 4]; NT]; MTILES];
            let mut ring = [Stage::<NT>::ZERO; D];
            unroll::<D>(|d| {
                if (d as u32) < n_my {
                    ring[d] = load_stage(code, scale, &brow, warp + WARPS * d as u32);
                }
            });
            let mut i = 0;
            while i < n_my {
                unroll::<D>(|d| {
                    let idx = i + d as u32;
                    if idx < n_my {
                        let st = ring[d];
                        if idx + (D as u32) < n_my {
                            ring[d] = load_stage(code, scale, &brow, warp + WARPS * (idx + D as u32));
                        }
                        compute::<BF16, NT>(&mut acc, &st, nt_active);
                    }
                });
                i += D as u32;
            }

            // Sum the warps' partial tiles: [warp-1][accumulator][lane] in shared memory.
            let at = |w: u32, mt: usize, j: usize, c: usize| {
                red + 4 * ((w * nacc + ((mt * NT + j) * 4 + c) as u32) * 32 + lane)
            };
            if warp != 0 {
                unroll::<MTILES>(|mt| {
                    unroll::<NT>(|j| unroll::<4>(|c| sts(at(warp - 1, mt, j, c), acc[mt][j][c].to_bits())))
                });
            }
            sync();
            if warp == 0 {
                unroll::<MTILES>(|mt| {
                    unroll::<NT>(|j| {
                        unroll::<4>(|c| {
                            let mut w = 0;
                            while w < WARPS - 1 {
                                acc[mt][j][c] += f32::from_bits(lds(at(w, mt, j, c)));
                                w += 1;
                            }
                        })
                    })
                });
                if FC1 {
                    epilogue_fc1::<BF16, NT>(p, &acc, e, r, start + g0, n_grp, post);
                } else {
                    epilogue_fc2::<NT>(p, &acc, e, r, start + g0, n_grp, post);
                }
            }
            sync();
            g0 += 8 * NT as u32;
        }
        task += gdim();
    }
}

#[inline(always)]
unsafe fn epilogue_fc1<const BF16: bool, const NT: usize>(
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
    let inter = p.rows / 2;
    let ag = ldg_f32(p.alpha_a + 4 * e as u64) * post;
    let au = ldg_f32(p.alpha_b + 4 * e as u64) * post;
    unroll::<MTILES>(|mt| {
        let ch = 16 * r + 8 * mt as u32 + g;
        unroll::<NT>(|j| {
            unroll::<2>(|u| {
                let col = 8 * j as u32 + 2 * t + u as u32;
                if col < n_grp {
                    let h = activation(p.act, acc[mt][j][u] * ag, acc[mt][j][2 + u] * au, p.limit, p.act_alpha);
                    let slot = (slot0 + col) as u64;
                    stg_u16(p.output + 2 * (slot * inter as u64 + ch as u64), to_half_bits::<BF16>(h));
                }
            })
        })
    });
}

#[inline(always)]
unsafe fn epilogue_fc2<const NT: usize>(
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
    unroll::<NT>(|j| {
        unroll::<2>(|u| {
            let col = 8 * j as u32 + 2 * t + u as u32;
            if col < n_grp {
                let pair = ldg_u32_coherent(p.sorted_pairs + 4 * (slot0 + col) as u64);
                let w = ldg_f32(p.topk_weights + 4 * pair as u64) * a2;
                let y = p.output + 4 * pair as u64 * p.rows as u64;
                unroll::<MTILES>(|mt| {
                    let row = (TASK_ROWS as u32 * r + 16 * mt as u32 + g) as u64;
                    stg_u32(y + 4 * row, (acc[mt][j][u] * w).to_bits());
                    stg_u32(y + 4 * (row + 8), (acc[mt][j][2 + u] * w).to_bits());
                });
            }
        })
    });
}

macro_rules! fc_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal, $nt:literal, $d:literal;)*) => {$(
        /// FC kernel instance `(FC1?, bf16?, column tiles, pipeline depth)`.
        ///
        /// # Safety
        /// `p` must describe device buffers as [`FcParams`] documents, from
        /// a routing run over the same ids; 128 threads per block and
        /// `4 * 3 * 32 * 8 * NT` bytes of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            fc::<$fc1, $bf16, $nt, $d>(&p)
        }
    )*};
}

fc_kernels! {
    moe_fc1_bf16_nt1: true, true, 1, 4;
    moe_fc1_bf16_nt2: true, true, 2, 3;
    moe_fc1_bf16_nt4: true, true, 4, 2;
    moe_fc1_f16_nt1: true, false, 1, 4;
    moe_fc1_f16_nt2: true, false, 2, 3;
    moe_fc1_f16_nt4: true, false, 4, 2;
    moe_fc2_bf16_nt1: false, true, 1, 4;
    moe_fc2_bf16_nt2: false, true, 2, 3;
    moe_fc2_bf16_nt4: false, true, 4, 2;
    moe_fc2_f16_nt1: false, false, 1, 4;
    moe_fc2_f16_nt2: false, false, 2, 3;
    moe_fc2_f16_nt4: false, false, 4, 2;
}
