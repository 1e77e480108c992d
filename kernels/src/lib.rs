//! moe4's kernels and the formats they read.
//!
//! Built for `nvptx64-nvidia-cuda` (by `cargo xtask build-ptx`) this crate is
//! the GPU code: the modules under `device` hold the `ptx-kernel` entry
//! points. Built for the host it is the single source of truth for the
//! formats and index math the kernels use, so the CPU reference, the
//! quantizers and the weight converters in the `moe4` crate call exactly the
//! functions the kernels were written against:
//!
//! | what | where |
//! |---|---|
//! | E2M1 (FP4) table, encode, decode | [`e2m1`] |
//! | E4M3 / UE4M3 encode, decode | [`e4m3`] |
//! | 128x4 scale swizzle, u32-packed scales | [`scale_layout`] |
//! | signed INT4 packing | [`int4`] |
//! | in-register E2M1 decode (bit layout of a packed word) | [`decode`] |
//! | the kernels' weight tile layout (who holds which k) | [`tile`] |
//! | column groups: wide and narrow, their table offsets | [`groups`] |
//! | division by a kernel-wide divisor (reciprocal, multiply-high) | [`fastdiv`] |
//! | kernel parameter structs shared with the host | [`params`] |
//! | launch geometry (threads, shared memory) | [`launch`] |
//! | the timeline buffer of `trace` builds | [`trace`] |
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch, stdarch_nvptx))]
#![deny(missing_docs)]

pub mod decode;
pub mod e2m1;
pub mod e4m3;
pub mod fastdiv;
pub mod groups;
pub mod int4;
pub mod launch;
pub mod params;
pub mod scale_layout;
pub mod tile;
pub mod trace;

#[cfg(target_arch = "nvptx64")]
pub mod device;

#[cfg(all(target_arch = "nvptx64", not(test)))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; there is nothing to unwind to.
    unsafe { core::arch::nvptx::trap() }
}
