//! The GPU side: `ptx-kernel` entry points and the intrinsics they use.
//! Built only for `nvptx64-nvidia-cuda`.
//!
//! | module | kernels |
//! |---|---|
//! | [`route`] | `moe_route`: group (token, k) pairs by expert |
//! | [`fc`] | `moe_fc1_*`, `moe_fc2_*`: NVFP4 streaming GEMMs (decode path) |
//! | [`combine`] | `moe_combine_*`: deterministic sum over k |
//! | [`w4a4`] | `w4a4_gemm_*`, `w4a4_quantize_*`, baseline `w4a4_dequant_*` |
//! | [`smoke`] | `smoke_*`: single-instruction checks against the CPU |
//! | [`peak`] | `peak_*`: tensor-core rate microbenchmarks |
//! | [`util`] | `moe4_fill`: device-side random fill for benchmarks |

pub mod arch;
pub mod combine;
pub mod fc;
pub mod peak;
pub mod route;
pub mod smoke;
pub mod util;
pub mod w4a4;
