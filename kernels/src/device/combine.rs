//! `moe_combine_*`: `out[m] = sum over j of y[m * topk + j]`, in j order,
//! over the pairs whose id is an expert (0..E); one thread per 4 outputs.
//! y is f32 (decode) or the output's 16-bit format (prefill, `y16`); the
//! sum is f32 either way.
//! No atomics: the sum order is fixed, so the output is bit-reproducible.

use super::arch::*;
use super::route::expert;
use crate::params::CombineParams;

#[inline(always)]
unsafe fn combine<const BF16: bool>(p: &CombineParams) {
    // Programmatic dependent launch: the previous kernel in the stream is
    // complete (its writes visible) after this; then let the next launch.
    griddep_wait();
    griddep_launch_dependents();
    let h4 = p.h / 4;
    let i = bid() * bdim() + tid();
    if i >= p.m * h4 {
        return;
    }
    let (m, c) = (i / h4, 4 * (i % h4));
    let mut acc = [0f32; 4];
    let mut j = 0;
    while j < p.topk {
        let pair = (m * p.topk + j) as u64;
        if expert(ldg_u32(p.topk_ids + 4 * pair) as i32, p.n_experts).is_ok() {
            let at = pair * p.h as u64 + c as u64;
            let v = if p.y16 != 0 {
                let q = ldg_u64(p.y + 2 * at);
                let (lo, hi) = (q as u32, (q >> 32) as u32);
                [
                    from_half_bits::<BF16>(lo),
                    from_half_bits::<BF16>(lo >> 16),
                    from_half_bits::<BF16>(hi),
                    from_half_bits::<BF16>(hi >> 16),
                ]
            } else {
                ldg_v4(p.y + 4 * at).map(f32::from_bits)
            };
            let mut q = 0;
            while q < 4 {
                acc[q] += v[q];
                q += 1;
            }
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

/// Combine to bf16.
///
/// # Safety
/// `p` must describe device buffers as [`CombineParams`] documents.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_combine_bf16(p: CombineParams) {
    combine::<true>(&p)
}

/// Combine to f16.
///
/// # Safety
/// `p` must describe device buffers as [`CombineParams`] documents.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_combine_f16(p: CombineParams) {
    combine::<false>(&p)
}
