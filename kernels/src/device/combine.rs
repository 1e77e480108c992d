//! `moe_combine_*`: `out[m] = sum over j of y[m * topk + j]`, in j order,
//! over the pairs whose id is an expert (0..E); one thread per 16 bytes of
//! each y row (8 outputs with 16-bit y, 4 with f32).
//! y is f32 (decode) or the output's 16-bit format (prefill, `y16`); the
//! sum is f32 either way.
//! No atomics: the sum order is fixed, so the output is bit-reproducible.

use super::arch::*;
use super::route::expert;
use super::trace;
use crate::launch::{combine_outputs_per_thread, ready_counter};
use crate::params::CombineParams;
use crate::trace::TraceKernel;

/// Pairs per batch of [`combine`]: their loads are issued together.
const BATCH: usize = 8;

/// The combine: each thread's loads go out `BATCH` pairs at a time (the
/// ids of a batch, then its y pieces, all in flight together) rather than
/// one pair's id, then its y, before the next pair's, which would spend
/// top-k memory latencies in a row (run 79: Qwen3 decode M = 1 -7 %).
/// One 16-byte piece of y per pair per thread, summed in k order.
/// Threads past `m * h / per` return at once.
///
/// The ids are read before the wait for FC2: they are inputs of the layer,
/// complete before FC1 began (FC1 waited for them, FC2 for FC1, and FC2 let
/// this kernel launch only after its wait), and the kernel starts 1-2 µs
/// before FC2 ends at small batches (run 136's timeline), so after the wait
/// only y's loads stand between FC2's end and the output (one memory
/// latency instead of two).
#[inline(always)]
unsafe fn combine<const BF16: bool>(p: &CombineParams, ready: u64) {
    let y16 = p.y16 != 0;
    let per = combine_outputs_per_thread(y16);
    let hq = p.h / per;
    let i = bid() * bdim() + tid();
    let live = i < p.m * hq;
    let (m, c) = if live { (i / hq, per * (i % hq)) } else { (0, 0) };
    // Bit j: pair (m, j) has an expert (top-k <= 64, the host's limit).
    let mut valid = 0u64;
    if live {
        let mut j0 = 0;
        while j0 < p.topk {
            let mut ok = [false; BATCH];
            unroll!(BATCH, |b| {
                let j = j0 + b as u32;
                if j < p.topk {
                    ok[b] = expert(ldg_u32(p.topk_ids + 4 * (m * p.topk + j) as u64) as i32, p.n_experts).is_ok();
                }
            });
            unroll!(BATCH, |b| valid |= (ok[b] as u64) << ((j0 + b as u32) & 63));
            j0 += BATCH as u32;
        }
    }
    griddep_wait();
    trace::waited(TraceKernel::Combine);
    griddep_launch_dependents();
    if ready != 0 {
        // FC2 is complete: no thread reads the counters any more; the next
        // call's FC1 adds to them only after this kernel (its wait).
        let mut g = i;
        while g <= p.m * p.topk {
            stg_u32(ready_counter(ready, g), 0);
            g += gdim() * bdim();
        }
    }
    if !live {
        return;
    }
    let mut acc = [0f32; 8];
    let mut j0 = 0;
    while j0 < p.topk {
        let mut v = [[0u32; 4]; BATCH];
        let ok = |b: usize| (valid >> ((j0 + b as u32) & 63)) & 1 != 0 && j0 + (b as u32) < p.topk;
        unroll!(BATCH, |b| {
            if ok(b) {
                let at = (m * p.topk + j0 + b as u32) as u64 * p.h as u64 + c as u64;
                v[b] = ldg_v4(p.y + if y16 { 2 * at } else { 4 * at });
            }
        });
        unroll!(BATCH, |b| {
            if ok(b) {
                if y16 {
                    unroll!(4, |w| {
                        acc[2 * w] += from_half_bits::<BF16>(v[b][w]);
                        acc[2 * w + 1] += from_half_bits::<BF16>(v[b][w] >> 16);
                    });
                } else {
                    unroll!(4, |q| acc[q] += f32::from_bits(v[b][q]));
                }
            }
        });
        j0 += BATCH as u32;
    }
    let pack = |lo: f32, hi: f32| if BF16 { pack_bf16x2(lo, hi) } else { pack_f16x2(lo, hi) };
    let out = p.out + 2 * (m as u64 * p.h as u64 + c as u64);
    stg_v2(out, pack(acc[0], acc[1]), pack(acc[2], acc[3]));
    if y16 {
        stg_v2(out + 8, pack(acc[4], acc[5]), pack(acc[6], acc[7]));
    }
}

/// [`combine`] of a sliced FC2 (`moe4_exp = "fc2sl"`): each pair's term is
/// the sum of its `p.slices` partial rows of f32 y (`pair * slices + s`,
/// in `s` order), added in k order as in [`combine`].
#[cfg(moe4_exp = "fc2sl")]
#[inline(always)]
unsafe fn combine_sliced<const BF16: bool>(p: &CombineParams) {
    griddep_wait();
    griddep_launch_dependents();
    let h4 = p.h / 4;
    let i = bid() * bdim() + tid();
    if i >= p.m * h4 {
        return;
    }
    let (m, c) = (i / h4, 4 * (i % h4));
    let n = p.slices.max(1);
    let mut acc = [0f32; 4];
    let mut j = 0;
    while j < p.topk {
        let pair = m * p.topk + j;
        if expert(ldg_u32(p.topk_ids + 4 * pair as u64) as i32, p.n_experts).is_ok() {
            // The slices' loads go out four at a time, then are summed in order.
            let mut t = [0f32; 4];
            let mut s0 = 0;
            while s0 < n {
                let mut v = [[0u32; 4]; 4];
                unroll!(4, |b| {
                    let s = s0 + b as u32;
                    if s < n {
                        let at = (pair * n + s) as u64 * p.h as u64 + c as u64;
                        v[b] = ldg_v4(p.y + 4 * at);
                    }
                });
                unroll!(4, |b| if s0 + (b as u32) < n {
                    unroll!(4, |q| t[q] += f32::from_bits(v[b][q]));
                });
                s0 += 4;
            }
            unroll!(4, |q| acc[q] += t[q]);
        }
        j += 1;
    }
    let (lo, hi) = if BF16 {
        (pack_bf16x2(acc[0], acc[1]), pack_bf16x2(acc[2], acc[3]))
    } else {
        (pack_f16x2(acc[0], acc[1]), pack_f16x2(acc[2], acc[3]))
    };
    stg_v2(p.out + 2 * (m as u64 * p.h as u64 + c as u64), lo, hi);
}

/// Combine of a sliced FC2's y to bf16 (`moe4_exp = "fc2sl"`).
///
/// # Safety
/// `p` must describe device buffers as [`CombineParams`] documents, y
/// holding `m * topk * slices` f32 rows.
#[cfg(moe4_exp = "fc2sl")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_combine_sl_bf16(p: CombineParams) {
    combine_sliced::<true>(&p);
}

/// Combine of a sliced FC2's y to f16 (`moe4_exp = "fc2sl"`).
///
/// # Safety
/// As [`moe_combine_sl_bf16`].
#[cfg(moe4_exp = "fc2sl")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_combine_sl_f16(p: CombineParams) {
    combine_sliced::<false>(&p);
}

/// Combine to bf16.
///
/// # Safety
/// `p` must describe device buffers as [`CombineParams`] documents.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_combine_bf16(p: CombineParams) {
    trace::entry(TraceKernel::Combine);
    combine::<true>(&p, 0);
    trace::exit(TraceKernel::Combine);
}

/// Combine to f16.
///
/// # Safety
/// `p` must describe device buffers as [`CombineParams`] documents.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_combine_f16(p: CombineParams) {
    trace::entry(TraceKernel::Combine);
    combine::<false>(&p, 0);
    trace::exit(TraceKernel::Combine);
}

/// Combine to bf16, then the readiness counters of the `_dp` FC kernels
/// set back to zero (`moe4_exp = "deps"` builds).
///
/// # Safety
/// `p.c` as [`CombineParams`] documents; `p.ready` as
/// [`crate::params::CombineDpParams`] documents.
#[cfg(moe4_exp = "deps")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_combine_dp_bf16(p: crate::params::CombineDpParams) {
    combine::<true>(&p.c, p.ready);
}

/// Combine to f16, then the readiness counters set back to zero, as
/// `moe_combine_dp_bf16`.
///
/// # Safety
/// As `moe_combine_dp_bf16`.
#[cfg(moe4_exp = "deps")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_combine_dp_f16(p: crate::params::CombineDpParams) {
    combine::<false>(&p.c, p.ready);
}
