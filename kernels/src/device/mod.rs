//! The GPU side: `ptx-kernel` entry points and the intrinsics they use.
//! Built only for `nvptx64-nvidia-cuda`.
//!
//! | module | kernels |
//! |---|---|
//! | [`route`] | `moe_route`: group (token, k) pairs by expert |
//! | [`fc`] | `moe_fc1_*`, `moe_fc2_*`: NVFP4 streaming GEMMs (decode path) |
//! | [`prefill`] | `moe_pf1_*`, `moe_pf2_*`: prefill grouped GEMMs (`mma.sync`) |
//! | `prefill_wg` | `moe_pfw*`: prefill grouped GEMMs on `wgmma` (sm_90a builds) |
//! | `prefill_w256` | `moe_pfw*_n256`, `_mix256`: 128-row x 256-pair `wgmma` tiles (sm_90a builds) |
//! | `wgmma` | the `wgmma` instruction, fences, descriptors (sm_90a builds) |
//! | `tma` | `mbarrier`s, `cp.async.bulk` and `cp.async.bulk.tensor` copies (sm_90a builds) |
//! | [`combine`] | `moe_combine_*`: deterministic sum over k |
//! | [`w4a4`] | `w4a4_gemm_*`, `w4a4_quantize_*`, baseline `w4a4_dequant_*` |
//! | `w4a4_wg` | `w4a4_gemm_wg_*`: the W4A4 GEMM on `wgmma` s8 (sm_90a builds) |
//! | [`smoke`] | `smoke_*`: single-instruction checks against the CPU |
//! | [`peak`] | `peak_*`: tensor-core rate microbenchmarks |
//! | [`trace`] | (no kernels) the `moe4_exp = "trace"` builds' timeline notes |
//! | [`util`] | `moe4_fill`: device-side random fill for benchmarks; `moe4_read_floor`: the decode benchmark's floor |

/// `unroll!(N, |i| body)`: `body` for `i = 0, 1, .., N - 1` (N <= 8) as
/// straight-line code, so arrays indexed by `i` stay in registers. A macro,
/// not a closure: LLVM does not always inline a large closure called
/// several times, and an outlined body indexes its arrays in local memory.
macro_rules! unroll {
    ($n:expr, |$i:ident| $body:expr) => {{
        const { assert!($n <= 8) };
        #[allow(clippy::reversed_empty_ranges, unused_comparisons)]
        {
            if $n > 0 {
                let $i: usize = 0;
                $body;
            }
            if $n > 1 {
                let $i: usize = 1;
                $body;
            }
            if $n > 2 {
                let $i: usize = 2;
                $body;
            }
            if $n > 3 {
                let $i: usize = 3;
                $body;
            }
            if $n > 4 {
                let $i: usize = 4;
                $body;
            }
            if $n > 5 {
                let $i: usize = 5;
                $body;
            }
            if $n > 6 {
                let $i: usize = 6;
                $body;
            }
            if $n > 7 {
                let $i: usize = 7;
                $body;
            }
        }
    }};
}

/// `unroll16!(N, |i| body)`: [`unroll!`] for N <= 16 (the `wgmma` prefill
/// kernels' 16 column tiles): the body is expanded twice as often, so only
/// loops that may need it use this one.
macro_rules! unroll16 {
    ($n:expr, |$i:ident| $body:expr) => {{
        const { assert!($n <= 16) };
        unroll!(if $n < 8 { $n } else { 8 }, |$i| $body);
        unroll!(($n as usize).saturating_sub(8), |lo| {
            let $i: usize = 8 + lo;
            $body
        });
    }};
}

pub mod arch;
pub mod combine;
pub mod fc;
pub mod peak;
pub mod prefill;
#[cfg(moe4_arch = "sm_90a")]
pub mod prefill_w256;
#[cfg(moe4_arch = "sm_90a")]
pub mod prefill_wg;
pub mod route;
pub mod smoke;
#[cfg(moe4_arch = "sm_90a")]
pub mod tma;
pub mod trace;
pub mod util;
pub mod w4a4;
#[cfg(moe4_arch = "sm_90a")]
pub mod w4a4_wg;
#[cfg(moe4_arch = "sm_90a")]
pub mod wgmma;
