//! The decode kernels' timeline notes (`moe4_exp = "trace"` builds; the
//! buffer's layout is [`crate::trace`]). In every other build these
//! functions are empty, and the kernels' code is what it is without them.
//!
//! A note's clock read follows the event in the warp's instruction stream
//! (a `griddepcontrol.wait` or `cp.async.wait_group` that returned, a
//! barrier passed), and a warp issues in order, so it reads the time the
//! event was over for that warp.
#![allow(unused_variables)]

#[cfg(moe4_exp = "trace")]
use super::arch::*;
use crate::trace::TraceKernel;
#[cfg(moe4_exp = "trace")]
use crate::trace::{trace_index, word, TRACE_BLOCKS, TRACE_LEN};

/// The buffer (`crate::trace::TRACE_SYMBOL`; [`trace_base`] names it in
/// its `asm!`).
#[cfg(moe4_exp = "trace")]
#[no_mangle]
pub static mut MOE4_TRACE: [u64; TRACE_LEN] = [0; TRACE_LEN];

/// The address of this block's word `w` of kernel `k`'s section, if this
/// block is one that is noted.
#[cfg(moe4_exp = "trace")]
#[inline(always)]
fn at(k: TraceKernel, w: usize) -> Option<u64> {
    // Read here, not kept from the kernel's start (registers).
    let b = bid_here() as usize;
    (b < TRACE_BLOCKS).then(|| trace_base() + 8 * trace_index(k, b, w) as u64)
}

/// The block's start (thread 0): its SM, both clocks; the words the
/// block's warps later raise with an atomic max are reset (a block of the
/// same index in an earlier call may have run on another SM, whose clock
/// is not this one's). The warps' notes come a memory round trip or more
/// after this one.
#[inline(always)]
pub fn entry(k: TraceKernel) {
    #[cfg(moe4_exp = "trace")]
    if tid() == 0 {
        if let (Some(sm), Some(gt), Some(c)) = (at(k, word::SM), at(k, word::GT_ENTRY), at(k, word::ENTRY)) {
            // SAFETY: words of this block inside the buffer.
            unsafe {
                st_u64(sm, smid() as u64 + 1);
                st_u64(gt, globaltimer());
                st_u64(c, clock64());
                for w in [word::WAITED, word::PLANNED, word::FIRST_MIN_NOT, word::FIRST_MAX, word::EXIT, word::GT_EXIT]
                {
                    st_u64(c + 8 * (w - word::ENTRY) as u64, 0);
                }
            }
        }
    }
}

/// The launch dependency met (thread 0, after `griddep_wait`).
#[inline(always)]
pub fn waited(k: TraceKernel) {
    #[cfg(moe4_exp = "trace")]
    if tid() == 0 {
        if let Some(c) = at(k, word::WAITED) {
            // SAFETY: a word of this block inside the buffer.
            unsafe { st_u64(c, clock64()) };
        }
    }
}

/// The block's plan known (thread 0): `tasks` tasks in all. Storing
/// `tasks` first makes the clock read wait for its load.
#[inline(always)]
pub fn planned(k: TraceKernel, tasks: u32) {
    #[cfg(moe4_exp = "trace")]
    if tid() == 0 {
        if let (Some(t), Some(c)) = (at(k, word::TASKS), at(k, word::PLANNED)) {
            // SAFETY: words of this block inside the buffer.
            unsafe {
                st_u64(t, tasks as u64);
                st_u64(c, clock64());
            }
        }
    }
}

/// A warp's first chunk's data landed (lane 0 of each warp with a task).
#[inline(always)]
pub fn first_data(k: TraceKernel) {
    #[cfg(moe4_exp = "trace")]
    if tid() % 32 == 0 {
        if let (Some(lo), Some(hi)) = (at(k, word::FIRST_MIN_NOT), at(k, word::FIRST_MAX)) {
            let t = clock64();
            // SAFETY: words of this block inside the buffer.
            unsafe {
                red_max_u64(lo, !t);
                red_max_u64(hi, t);
            }
        }
    }
}

/// A warp done (lane 0 of each warp; the block's last one sets the words).
#[inline(always)]
pub fn exit(k: TraceKernel) {
    #[cfg(moe4_exp = "trace")]
    if tid() % 32 == 0 {
        if let (Some(c), Some(gt)) = (at(k, word::EXIT), at(k, word::GT_EXIT)) {
            // SAFETY: words of this block inside the buffer.
            unsafe {
                red_max_u64(c, clock64());
                red_max_u64(gt, globaltimer());
            }
        }
    }
}
