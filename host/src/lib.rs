//! # moe4
//!
//! 4-bit quantized Mixture-of-Experts layers for NVIDIA GPUs, in Rust: the
//! kernels are `#![no_std]` Rust compiled to PTX (crate `moe4-kernels`),
//! this crate is the host side a Rust inference server links. Buffers and
//! streams are [`cudarc`]'s.
//!
//! - [`MoeWeights`] + [`Workspace`]: NVFP4 W4A16 fused MoE (routing on the
//!   device, FC1 + gated activation, FC2 x routing weight, deterministic
//!   combine), bf16 or f16 activations.
//! - [`W4A4`]: INT4 x INT4 grouped GEMM with per-token x per-channel scales
//!   in the epilogue, offsets read on the device; and its activation
//!   quantizer.
//! - [`quant`], [`nvfp4`]: CPU quantizers and layout converters;
//!   [`mod@reference`]: the f64 CPU references every GPU result is checked
//!   against.
//! - [`mod@bench`], [`timeline`]: the benchmarks behind `moe4 bench`, and the
//!   decode call's per-kernel timeline from a `trace` build.
//!
//! ```no_run
//! use moe4::{Activation, Gpu, MoeWeights, Workspace, quant::quantize_nvfp4, nvfp4::Nvfp4Moe};
//! use half::bf16;
//! # fn main() -> moe4::Result<()> {
//! let (e, h, i, topk) = (8, 256, 128, 2);
//! let w = |rows, k| quantize_nvfp4(&vec![0.01f32; e * rows * k], e, rows, k);
//! let layer = Nvfp4Moe { gate: w(i, h)?, up: w(i, h)?, down: w(h, i)? };
//! let gpu = Gpu::new(0)?;
//! let stream = gpu.context().default_stream();
//! let weights = MoeWeights::new(&gpu, &stream, &layer, Activation::Silu)?;
//! let mut ws = Workspace::new(&weights, &stream, 64, topk)?;
//! let x = stream.clone_htod(&vec![bf16::from_f32(0.5); 4 * h])?;
//! let ids = stream.clone_htod(&[0i32, 3, 1, -1, 7, 2, 5, 5])?;
//! let tw = stream.clone_htod(&[0.6f32, 0.4, 1.0, 0.0, 0.5, 0.5, 0.9, 0.1])?;
//! let mut out = stream.alloc_zeros::<bf16>(4 * h)?;
//! weights.forward(&mut ws, &stream, &x.as_view(), &ids.as_view(), &tw.as_view(), &mut out.as_view_mut())?;
//! let y = stream.clone_dtoh(&out)?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod bench;
pub mod checkpoint;
mod dtype;
mod error;
mod gpu;
mod moe;
pub mod nvfp4;
mod ptx;
pub mod quant;
pub mod reference;
pub mod smoke;
pub mod timeline;
mod tma;
mod w4a4;
mod weights;

pub use dtype::Half;
pub use error::{Error, Result};
pub use gpu::{gpu_available, Gpu};
pub use moe::{
    check_task_count, decode_task_rows, route_blocks_from, ForwardPath, Tuning, Workspace, FC1_FEW_BLOCKS_PER_SM,
    FC1_FEW_PAIRS, FC2_FEW_MAX_CHUNKS, FC_ROUTE_MAX_BYTES, FEW_EXPERTS, MAX_PAIRS, MAX_TOPK, N256_PREFILL_PAIRS,
    PREFILL_CROSSOVER, ROUTE_BLOCKS_FROM, ROUTE_BLOCKS_FROM_FEW_EXPERTS, WIDE_PREFILL_PAIRS,
};
pub use moe4_kernels::launch::FC_ROUTE_MAX_PAIRS;
pub use ptx::Arch;
pub use reference::Activation;
pub use w4a4::{GemmArgs, W4A4};
pub use weights::{check_dims, MoeWeights, MAX_EXPERTS};
