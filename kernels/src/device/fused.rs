//! `moe_fused_*` (`moe4_exp = "fused"` builds): the whole decode layer of
//! a small batch in one launch. Every block routes the pairs in its own
//! shared memory (as the `_rt` FC kernels do), runs FC1's tasks, copies
//! the weights of its first FC2 chunks, meets the other blocks at a grid
//! barrier (h complete), runs FC2's tasks, meets them again (y complete)
//! and sums y over k in k order into the output (the combine). One launch
//! instead of three dependent ones: what a small layer (Qwen3 at M = 1:
//! 21 MB, 5 µs of bytes) loses between launches is most of its time.
//!
//! The barrier needs every block resident at once: the host launches as
//! many blocks as fit (`cuOccupancy`) with the cooperative launch
//! attribute, which makes the driver refuse a grid that cannot be
//! resident rather than let it hang.

use super::arch::*;
use super::fc::fc_routed;
use super::route::{expert, route_in_block};
use crate::params::FusedParams;
use core::arch::asm;

/// A grid-wide barrier on `bar` (`u32 [2]`: arrivals, generation; zero at
/// rest, and zero again after each use). Every thread of every block of
/// the grid must call it, all blocks resident. Writes before it (any
/// thread of the grid) are visible to reads after it. The last block to
/// arrive resets the count, then moves the generation on; the others wait
/// for the generation to move past the one they read before arriving
/// (which cannot move before they arrive).
#[inline(always)]
pub(super) unsafe fn grid_sync(bar: u64) {
    sync_divergent();
    if tid() == 0 {
        let gen: u32;
        asm!("ld.relaxed.gpu.global.u32 {g}, [{p}];", g = out(reg32) gen, p = in(reg64) bar + 4, options(nostack));
        // The block's writes (ordered before thread 0 by the barrier) are
        // released with the arrival.
        let old: u32;
        asm!("atom.acq_rel.gpu.global.add.u32 {o}, [{p}], 1;", o = out(reg32) old, p = in(reg64) bar, options(nostack));
        if old + 1 == gdim() {
            asm!("st.relaxed.gpu.global.u32 [{p}], 0;", p = in(reg64) bar, options(nostack));
            asm!("st.release.gpu.global.u32 [{p}], {g};", p = in(reg64) bar + 4, g = in(reg32) gen.wrapping_add(1), options(nostack));
        } else {
            loop {
                let now: u32;
                asm!("ld.acquire.gpu.global.u32 {g}, [{p}];", g = out(reg32) now, p = in(reg64) bar + 4, options(nostack));
                if now != gen {
                    break;
                }
                asm!("nanosleep.u32 32;", options(nostack));
            }
        }
        asm!("fence.acq_rel.gpu;", options(nostack));
    }
    sync_divergent();
}

/// The layer: route, FC1 (8-warp blocks, 3 slots, one column tile, 32-row
/// tasks, as `moe_fc1_*_nt1_w8_rt`), FC2 (the same, waiting at the grid
/// barrier in `p.fc2.barrier`), barrier, combine (f32 y; the same sum in
/// the same order as `moe_combine_*`).
#[inline(always)]
unsafe fn fused<const BF16: bool>(p: &FusedParams) {
    griddep_wait();
    route_in_block(&p.fc1, bid() == 0);
    fc_routed::<true, BF16, 1, 2, 8, 3, false, true>(&p.fc1);
    fc_routed::<false, BF16, 1, 2, 8, 3, false, true>(&p.fc2);
    grid_sync(p.fc2.barrier);
    let c = &p.comb;
    let h4 = c.h / 4;
    let mut i = bid() * bdim() + tid();
    while i < c.m * h4 {
        let (m, col) = (i / h4, 4 * (i % h4));
        let mut acc = [0f32; 4];
        let mut j = 0;
        while j < c.topk {
            let pair = (m * c.topk + j) as u64;
            if expert(ldg_u32(c.topk_ids + 4 * pair) as i32, c.n_experts).is_ok() {
                let v = ldg_v4_cg(c.y + 4 * (pair * c.h as u64 + col as u64)).map(f32::from_bits);
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
        stg_v2(c.out + 2 * (m as u64 * c.h as u64 + col as u64), lo, hi);
        i += gdim() * bdim();
    }
}

/// The fused decode layer in bf16.
///
/// # Safety
/// `p.fc1` and `p.fc2` as for `moe_fc1_bf16_nt1_w8_rt` and
/// `moe_fc2_bf16_nt1_w8_rt` (same routing fields), `p.fc2.barrier` a
/// zeroed `u32 [2]` no other launch uses meanwhile, `p.comb` as for
/// `moe_combine_bf16` (f32 y); 256 threads, every block resident at once,
/// `fc_smem_bytes(1, 8, 3, 2) + FC_ROUTE_BYTES` of shared memory.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_fused_bf16(p: FusedParams) {
    fused::<true>(&p)
}

/// The fused decode layer in f16 (see [`moe_fused_bf16`]).
///
/// # Safety
/// As [`moe_fused_bf16`], for the f16 kernels.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_fused_f16(p: FusedParams) {
    fused::<false>(&p)
}
