//! The MoE layer's forward pass on the GPU, and its [`Workspace`].
//!
//! `forward` is four launches (three for up to [`FC_ROUTE_MAX_PAIRS`]
//! pairs on one column tile, two more for the many-block routing, one more
//! on the `wgmma` prefill path) on the caller's stream, nothing else:
//! no allocation, no host synchronization, no device-to-host copy, so a
//! server can capture it in a CUDA graph (with cudarc's event tracking
//! off, as for any capture):
//!
//! 1. `moe_route` — pairs grouped by expert, on the device (counting, any
//!    number of pairs; from [`ROUTE_BLOCKS_FROM`] pairs on many blocks:
//!    `moe_route_count`, `_scan`, `_scatter`); on the `wgmma` prefill path
//!    also `moe_permute_x` (x in the k order that kernel reads); skipped
//!    for small batches (up to [`FC_ROUTE_MAX_PAIRS`] pairs, one column
//!    tile), where every block of the `_rt` FC kernels routes the pairs
//!    itself in shared memory (no atomics: slots by expert and pair index);
//! 2. FC1 + the gated activation into `h` (16-bit);
//! 3. FC2 x alpha2 x routing weight into `y` (f32 on the decode path; on
//!    the prefill path the activation's 16-bit format unless
//!    [`Tuning::y16`] is off: half of y's traffic there);
//! 4. `moe_combine_*` — `out[m] = sum over k of y`, in k order.
//!
//! Steps 2-3 run the **decode** kernels (`moe_fc*`: a few pairs per expert,
//! bandwidth-bound) or the **prefill** kernels (tensor-core bound), chosen
//! from the mean number of pairs per expert against a measured crossover
//! ([`PREFILL_CROSSOVER`]); [`Workspace::set_path`] overrides it.
//! The prefill kernels are `moe_pfw*` on sm_90a (`wgmma`, 256 weight rows x
//! 64 or 128 pairs per tile, 128 from [`WIDE_PREFILL_PAIRS`] mean pairs per
//! expert; with 128, an expert's last group of at most 64 pairs takes a
//! 64-pair tile, [`Tuning::narrow_tail`]; 128 rows x 256 pairs from
//! [`N256_PREFILL_PAIRS`], an expert's last 1-128 pairs on one or two
//! 64-pair tiles) and `moe_pf*` elsewhere
//! (`mma.sync`, 128 x 64). All read the same copy of the weights.

use crate::dtype::Half;
use crate::error::{shape, unsupported, Error, Result};
use crate::reference::Activation;
use crate::weights::MoeWeights;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};
use moe4_kernels::launch::{
    combine_outputs_per_thread, fc_kernel_smem_bytes, fc_slices, fc_split, fc_split_div, pf_smem_bytes,
    pfw256_mix_smem_bytes, pfw256_smem_bytes, pfw_smem_bytes, ready_bytes, route_hist_words, route_smem_bytes,
    route_split, FC_ROUTE_BYTES, FC_ROUTE_MAX_PAIRS, FC_SLICES_MAX, FC_WARPS, FC_WARPS_SIX, FC_WARPS_WIDE, PFW256_COLS,
    PFW256_NARROW_COLS, PFW_NARROW_COLS, PFW_THREADS, PF_COLS, PF_THREADS, ROUTE_BLOCK_THREADS, ROUTE_THREADS,
};
use moe4_kernels::params::{ActKind, CombineDpParams, CombineParams, FcDpParams, FcParams, PermuteParams, RouteParams};
use std::sync::Arc;

/// Most (token, k) pairs one forward call may route.
pub const MAX_PAIRS: usize = 1 << 20;
/// Mean pairs per active expert from which `forward` takes the prefill
/// kernels. Measured by `moe4 bench prefill` (which times both paths) on
/// an H100, runs 110-111 (docs/gpu-results.md): at 24 and 26 the decode
/// kernels are 7-20 % faster on all five model shapes; at 28 prefill wins
/// on Mixtral (-8 %) and DeepSeek-V3 (-3.5 %), ties on DeepSeek-V4-Flash
/// and loses on Qwen3 (+10 %) and GPT-OSS (+4 %); from 30 prefill wins or
/// ties everywhere. (Run 23's 24, on an H200, predates the `wgmma` prefill
/// and the decode kernels' later changes; the H200's higher bandwidth
/// favours decode, so its crossover is likely no lower.)
pub const PREFILL_CROSSOVER: f64 = 28.0;
/// Mean pairs per active expert from which the `wgmma` prefill kernels
/// take 128 pairs per tile instead of 64. Measured on the H200 (runs 51 and
/// 56, docs/gpu-results.md): at a mean of 64 (DeepSeek-V3 and GPT-OSS at
/// M = 2048) 128 pairs per tile are 5-8 % faster, at 48 (V4-Flash) 64
/// pairs are 37-38 % faster.
pub const WIDE_PREFILL_PAIRS: f64 = 64.0;
/// Mean pairs per active expert from which the `wgmma` prefill kernels
/// take 128 weight rows x 256 pairs per tile (with each expert's last 1-128
/// pairs on one or two 64-pair tiles). Measured on the H100 (run 87,
/// docs/gpu-results.md): at means of 256 or more 4-12 % faster than 128
/// pairs with 64-pair tails (Qwen3-30B-A3B, DeepSeek-V3, GPT-OSS-120B at
/// M = 8192, Mixtral at M = 2048 and 8192); at 192 (V4-Flash, M = 8192) 1 %
/// slower, at 128 (V4-Pro at M = 8192, Qwen3 at M = 2048) 11-17 % slower.
pub const N256_PREFILL_PAIRS: f64 = 256.0;
/// Widest column group any prefill kernel routes (pairs per tile: the
/// 128-row `wgmma` kernels' 256).
const MAX_GROUP: usize = PFW256_COLS as usize;
// The routing packs an expert's wide and narrow group counts in one word
// (moe4_kernels::groups), which holds while the wide groups (at least 128
// pairs wide where there are narrow ones) stay below 2^NARROW_SHIFT and
// the narrow ones below 2^(32 - NARROW_SHIFT).
const _: () = {
    use moe4_kernels::groups::{narrow_max, NARROW_SHIFT};
    // Wide groups with narrow ones: 128 (`_mix`) or 256 pairs wide.
    assert!(MAX_PAIRS / 128 < 1 << NARROW_SHIFT);
    let limit = 1 << (32 - NARROW_SHIFT);
    assert!(crate::weights::MAX_EXPERTS * (narrow_max(PFW256_COLS, PFW256_NARROW_COLS) as usize) < limit);
    assert!(crate::weights::MAX_EXPERTS * (narrow_max(128, PFW_NARROW_COLS) as usize) < limit);
};

/// Which kernels `forward` runs for FC1/FC2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForwardPath {
    /// Decode below [`PREFILL_CROSSOVER`] pairs per expert, prefill above.
    Auto,
    /// Always the decode kernels.
    Decode,
    /// Always the prefill kernels.
    Prefill,
}
/// Largest top-k.
pub const MAX_TOPK: usize = 64;
/// Weight rows per task of the decode FC kernels by default
/// ([`Tuning::task_rows`]), for `nt` column tiles and `experts` experts:
/// 64 with four column tiles, and with two on layers of more than
/// [`FEW_EXPERTS`] experts; 32 otherwise. Measured on the H200 (run 30 in
/// docs/gpu-results.md, `moe4 bench tune`): 64-row tasks read the
/// activations from shared memory once for two layout tasks, which was
/// what bound the four-column kernels (Mixtral at M = 64: 444 -> 367 µs,
/// DeepSeek-V3 at M = 512: 3238 -> 2719 µs) and still gains 5-6 % with
/// two (Qwen3 at M = 128, DeepSeek-V3 and GPT-OSS at M = 256). With two
/// column tiles on Mixtral (8 experts) they were 5-7 % slower: a 64-row
/// task's registers leave 3 blocks per SM instead of 4, and there the
/// shared memory was not the bound.
pub fn decode_task_rows(nt: usize, experts: usize) -> u32 {
    if nt >= 4 || (nt == 2 && experts > FEW_EXPERTS) {
        64
    } else {
        32
    }
}
/// Pairs (M x top-k) from which `forward` routes on many blocks by
/// default ([`Tuning::route_blocks_from`]) for layers of more than
/// [`FEW_EXPERTS`] experts. Measured by `moe4 bench route` on the H200
/// (docs/gpu-results.md, runs 22 and 24): with 128-384 experts the two
/// ways tie at ~2048 pairs (14.0 vs 14.4 µs), many blocks win from 3072
/// (17.8 vs 20.6) and by far at 65 536 (18-21 vs 217-243 µs).
pub const ROUTE_BLOCKS_FROM: usize = 2560;
/// Estimated weight bytes a decode call streams (active experts x
/// 3 H I / 2) up to which `forward` lets the FC kernels route the pairs
/// themselves (the `_rt` kernels; also at most [`FC_ROUTE_MAX_PAIRS`]
/// pairs on one column tile). Their routing tables cost the 4-warp kernels
/// a resident block per SM (5 instead of 6), which the saved launch
/// outweighs only on small layers. Measured on an H200 (run 108, three
/// alternating rounds against the routing kernel, `--tuning
/// fc_route_pairs=0`): the FC kernels' routing is faster at Qwen3 M = 1-4
/// (19-67 MB by this estimate; 1.0-2.3 %) and ties at GPT-OSS M = 1 (50 MB);
/// the routing kernel is faster from DeepSeek-V4-Flash M = 1 (75 MB:
/// -12.5 %), GPT-OSS M = 2 (98 MB: -7.3 %) and M = 4 (-2.5 %), Qwen3 M = 8
/// (124 MB: -1.5 %), DeepSeek-V3 and Mixtral M = 1 (176 MB: -3.2, -2.6 %).
/// (Run 41's 256 MB predates the 8-warp FC kernels' rules and `fdiv`.)
pub const FC_ROUTE_MAX_BYTES: f64 = 72e6;
/// FC1 of the `_rt` kernels (layers of at most [`FC_ROUTE_MAX_BYTES`]) with
/// at most this many pairs (one token of top-8) runs on the 4-warp kernel
/// and [`FC1_FEW_BLOCKS_PER_SM`] blocks per SM; FC2 too where its tasks
/// are short ([`FC2_FEW_MAX_CHUNKS`]).
///
/// Measured (runs 122-123, H100, three alternating rounds; against FC1 on
/// the 8-warp kernel at its 3 resident blocks per SM, the rule of run 63
/// that this replaces): Qwen3-30B-A3B M = 1 -9.4 / -9.7 %, Qwen1.5-MoE
/// (2048:1408:60:4) M = 1 / 2 -5.0 / -3.8 %, Qwen3 at top-4 M = 2 -9.2 %,
/// OLMoE (2048:1024:64:8) M = 1 -5.2 %, a 1024:512:32:8 layer -1.8 %, and
/// within 0.5 % at GPT-OSS-120B M = 1, DeepSeek-V2-Lite (2048:1408:64:6)
/// M = 1 and Qwen3 top-4 M = 1. On every resident 4-warp block (5 per SM)
/// the gain was about half (Qwen3 M = 1 -4.2 %) and GPT-OSS M = 1 lost
/// 1.7 %. Verified against the old rule (run 124, another H100, three
/// rounds): Qwen3 M = 1 -9.8 % (17.6 -> 15.9 µs), OLMoE -4.4 %, Qwen1.5
/// -4.7 / -3.5 %, Qwen3 top-4 M = 2 -9.3 %, the rest within 0.8 %. Why
/// fewer blocks help is not isolated (perf-notes, fourteenth session: not
/// room for FC2's blocks alone).
pub const FC1_FEW_PAIRS: usize = 8;
/// FC1's blocks per SM under [`FC1_FEW_PAIRS`] (of the 4-warp `_rt`
/// kernel's 5 resident): at Qwen3 M = 1, 2 / 3 / 4 / 5 / 6 per SM measured
/// 16.4 / 15.1 / 15.9 / 16.5 / 16.5 µs (run 120, FC2 on the same grid).
/// FC2 under [`FC2_FEW_MAX_CHUNKS`] takes the same.
pub const FC1_FEW_BLOCKS_PER_SM: u32 = 3;
/// FC2 joins FC1's rule ([`FC1_FEW_PAIRS`]: the `_rt` kernels, at most
/// that many pairs; the 4-warp kernel at [`FC1_FEW_BLOCKS_PER_SM`] blocks
/// per SM) where its tasks have at most this many 64-k chunks (I <= 1536).
///
/// Measured (run 126, H100, three alternating rounds at M = 1, FC2 on 4
/// warps x 396 blocks against its own rules, FC1 the same in both):
/// 1024:512:32:8 (8 chunks) -5.2 %, Qwen3-30B-A3B (12) -3.6 % (15.7 ->
/// 15.1 µs), OLMoE 2048:1024:64:8 (16) -1.1 %, Qwen1.5-MoE 2048:1408:60:4
/// (22) -4.4 %; from 28 chunks it costs or ties: 2048:1792:64:8 (28) +1.0 %,
/// 2048:2048:64:6 (32) +5.7 %, 2048:2560:64:4 (40) -0.3 %, GPT-OSS-120B (45)
/// +10 %, 1024:3072:64:4 (48) +2.7 % (run 123 had GPT-OSS +9 % and the
/// small layers -0.5 to -5 %).
pub const FC2_FEW_MAX_CHUNKS: u32 = 24;

/// The few-pairs rule's reach, for FC`fc` of a call in the `_rt` kernels:
/// at most [`FC1_FEW_PAIRS`] `pairs`, and for FC2 tasks of at most
/// [`FC2_FEW_MAX_CHUNKS`] chunks (`nchunks`). Both halves of the rule ask
/// it: the warp count ([`MoeWeights::wide_is_better`]) and the grid
/// ([`few_pairs_blocks`]).
fn few_pairs(fc: &str, pairs: usize, nchunks: u32) -> bool {
    pairs <= FC1_FEW_PAIRS && (fc == "1" || nchunks <= FC2_FEW_MAX_CHUNKS)
}

/// FC`fc`'s grid where the few-pairs rule ([`few_pairs`]) governs it: a
/// call whose FC kernel is the 4-warp `_rt` one (`four_warp_rt`; the rule
/// picks it there unless a tuning forces another) gets
/// [`FC1_FEW_BLOCKS_PER_SM`] blocks per SM; `None`: every resident block.
fn few_pairs_blocks(four_warp_rt: bool, fc: &str, pairs: usize, nchunks: u32, sm_count: u32) -> Option<u32> {
    (four_warp_rt && few_pairs(fc, pairs, nchunks)).then_some(FC1_FEW_BLOCKS_PER_SM * sm_count)
}
/// Layers of at most this many experts route on one block up to
/// [`ROUTE_BLOCKS_FROM_FEW_EXPERTS`] pairs: its per-expert scan is short.
pub const FEW_EXPERTS: usize = 16;
/// The many-block threshold for layers of at most [`FEW_EXPERTS`]
/// experts: Mixtral (8 experts) routes 4096 pairs in 9.5 µs on one block vs
/// 10.8 on many, 6144 in 11.1 vs 10.3, 16 384 in 20.5 vs 11.3 (run 25).
pub const ROUTE_BLOCKS_FROM_FEW_EXPERTS: usize = 5120;

/// The default many-block routing threshold for a layer of `experts`.
pub fn route_blocks_from(experts: usize) -> usize {
    if experts <= FEW_EXPERTS {
        ROUTE_BLOCKS_FROM_FEW_EXPERTS
    } else {
        ROUTE_BLOCKS_FROM
    }
}

/// Scratch for [`MoeWeights::forward`], allocated once for at most
/// `max_tokens` tokens, so the forward pass allocates nothing (and a CUDA
/// graph can own it). Also holds the device counter of out-of-range expert
/// ids.
pub struct Workspace {
    max_tokens: usize,
    topk: usize,
    experts: usize,
    sorted_pairs: CudaSlice<u32>,
    active: CudaSlice<u32>,
    n_active: CudaSlice<u32>,
    invalid: CudaSlice<u32>,
    h: CudaSlice<u16>,
    y: CudaSlice<f32>,
    groups: CudaSlice<u32>,
    group_rows: CudaSlice<u32>,
    group_w: CudaSlice<f32>,
    route_hist: CudaSlice<u32>,
    /// The `_dp` decode FC kernels' readiness counters
    /// ([`moe4_kernels::params::FcDpParams::ready`]): zero between calls.
    ready: CudaSlice<u32>,
    /// The TMA-fed prefill FC2's tensor map over `h` for rows of the
    /// weights' I (its row stride), in device memory (sm_90a builds with
    /// the `_tma` kernels; `None` elsewhere, or where the driver could not
    /// encode it).
    h_map: Option<(usize, CudaSlice<u64>)>,
    path: ForwardPath,
    tuning: Tuning,
}

/// Knobs the benchmark turns to compare kernel variants in one run; the
/// defaults are what `forward` is meant to run.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Launch the layer's kernels as programmatic dependents (Hopper+).
    pub pdl: bool,
    /// With one column tile, the 8-warp decode FC kernels (`Some(true)`),
    /// the 4-warp ones (`Some(false)`), or whichever the task estimate
    /// favours (`None`).
    pub wide: Option<bool>,
    /// [`Tuning::wide`] for FC1 alone (`None`: as `wide`): to time FC1's
    /// warp count with FC2's left to its rule.
    pub wide1: Option<bool>,
    /// Run the decode FC kernels' loads-only variant (wrong results; bf16,
    /// one column tile, default depth): the memory side alone.
    pub load_only: bool,
    /// Column tiles of the decode FC kernels, 1, 2 or 4 (`None`: from the
    /// mean pairs per expert; another value is an error).
    pub nt: Option<usize>,
    /// Weight rows per decode task with two or four column tiles: 32, or
    /// 64 (each warp two tasks of the layout, whose activations it reads
    /// from shared memory once: half the shared-memory traffic per weight).
    /// `None`: [`decode_task_rows`]. One column tile always takes 32.
    pub task_rows: Option<u32>,
    /// Stop after this many of the four launches (route, FC1, FC2,
    /// combine): 4 = the whole layer.
    pub launches: u32,
    /// Prefill on the `wgmma` kernels where the build has them (sm_90a);
    /// `false`: the `mma.sync` ones.
    pub wgmma: bool,
    /// Pairs per tile of the `wgmma` prefill kernels, 64, 128 or 256 (128
    /// weight rows x 256 pairs; the others 256 rows) (`None`: from the mean
    /// pairs per expert, [`WIDE_PREFILL_PAIRS`], [`N256_PREFILL_PAIRS`]).
    pub wgmma_cols: Option<u32>,
    /// With 128-pair `wgmma` prefill tiles, an expert's last group of at
    /// most 64 pairs runs as a 64-pair tile (the `_mix` kernels; the
    /// routing's narrow groups, `moe4_kernels::groups`) instead of a
    /// 128-pair tile that is mostly empty (measured on the H200, run 71,
    /// two benches in one call: 2-6 % faster at M = 8192 on the five
    /// many-expert shapes, Mixtral 0-1 %, 4-14 % at M = 2048 where 128
    /// pairs per tile is chosen); with 256-pair tiles, an expert's last
    /// 1-128 pairs run as one or two 64-pair tiles (`_mix256`).
    pub narrow_tail: bool,
    /// Pairs (M x top-k) from which the routing runs on many blocks
    /// (`moe_route_count`, `_scan`, `_scatter`) instead of one (`moe_route`);
    /// `None`: [`route_blocks_from`] of the layer's expert count.
    pub route_blocks_from: Option<usize>,
    /// Blocks of the FC grids (`None`: as many as stay resident on the
    /// GPU, but [`FC1_FEW_BLOCKS_PER_SM`] per SM for FC1 under
    /// [`FC1_FEW_PAIRS`], and FC2 under [`FC2_FEW_MAX_CHUNKS`]). A small
    /// grid makes a small layer take several rounds per warp
    /// (decode: whole rounds, then split ones, [`fc_split`]; prefill: more
    /// tiles per block), which the tests use to reach those paths without a
    /// full-size layer.
    pub fc_blocks: Option<u32>,
    /// [`Tuning::fc_blocks`] for FC1 alone (`None`: as `fc_blocks`): to
    /// time FC1's grid with FC2's left as it is.
    pub fc1_blocks: Option<u32>,
    /// Most pairs (M x top-k) the decode FC kernels route themselves, in
    /// each block's shared memory, instead of after a routing launch (one
    /// column tile only); `None`: up to [`FC_ROUTE_MAX_PAIRS`] where the
    /// layer streams at most [`FC_ROUTE_MAX_BYTES`]; `Some(0)`: never.
    pub fc_route_pairs: Option<u32>,
    /// On the prefill path, FC2 writes y (one row per (token, expert) pair)
    /// in the activation's 16-bit format instead of f32, and the combine
    /// reads it so: half of y's memory traffic, at one more rounding of each
    /// pair's term (the combine still sums in f32, in k order; with f16
    /// activations a term beyond ±65504 becomes ±inf, as `h` already can).
    /// The decode path always writes f32 (its y is small beside the
    /// weights).
    pub y16: bool,
    /// Slices of the decode FC2 (builds with the `_sl` kernels, `moe4_exp =
    /// "fc2sl"`): each task's chunks cut into this many strided shares
    /// over any warps of the grid, each written as its own partial y row
    /// and summed by the combine. `None`: where [`fc_slices`] gives a
    /// queue at least 10 % shorter than the in-block split's (one column
    /// tile; never where the build lacks the kernels); `Some(1)`: never;
    /// `Some(n)`: `n` (an error where the build lacks the kernels).
    pub fc2_slices: Option<u32>,
    /// FC1 on blocks of 6 warps (builds with the `_w6` kernels, `moe4_exp =
    /// "w6"`): a task's K split 1, 2, 3 or 6 ways
    /// ([`moe4_kernels::launch::fc_split_div`]). `None`: where its queue is
    /// at least 5 % shorter than the 4- or 8-warp kernel's (one column
    /// tile; never where the build lacks the kernels); `Some(true)`: always
    /// there (an error elsewhere); `Some(false)`: never.
    pub w6: Option<bool>,
    /// The decode FC2 reads each column group's h as soon as FC1 has
    /// finished that group (per-group readiness counters: the `_dp` kernel
    /// instances of builds with `moe4_exp = "deps"`) instead of waiting for
    /// all of FC1. `None`: where the build has those kernels and FC1 has
    /// more tasks than the grid has warps (its last round leaves a tail for
    /// FC2 to overlap; in one round the counters' atomics and loads only add
    /// latency: runs 84-86); `Some(true)`: always (an error where the build
    /// lacks the kernels); `Some(false)`: never.
    pub deps: Option<bool>,
    /// The prefill FC2 on the 128-row kernels loads its stages by TMA
    /// (the `_tma` kernels of builds with `moe4_exp = "tma"`): h's rows as
    /// 2-D boxes from the workspace's tensor map, codes and scales as bulk
    /// copies, all issued by one thread and completed on `mbarrier`s
    /// (6-17 % slower than the default kernels in run 132: an experiment).
    /// `None`: wherever the build has the kernels and the workspace the map
    /// (made for these weights' I); `Some(true)`: the same, an error where
    /// either is missing; `Some(false)`: never.
    pub tma: Option<bool>,
}

impl Tuning {
    /// The settings [`Tuning::with`] takes: the fields' names.
    pub const KEYS: [&'static str; 19] = [
        "pdl",
        "wide",
        "wide1",
        "load_only",
        "nt",
        "task_rows",
        "launches",
        "wgmma",
        "wgmma_cols",
        "narrow_tail",
        "route_blocks_from",
        "fc_blocks",
        "fc1_blocks",
        "fc_route_pairs",
        "y16",
        "fc2_slices",
        "w6",
        "deps",
        "tma",
    ];

    /// These settings with some changed by `spec`: `key=value` pairs,
    /// comma-separated, a key being a field's name (`nt=2,wide=false`).
    /// Values: `true`/`false` for the flags, a number for the counts, and
    /// for the `Option` fields also `auto` (`None`: the rule the field's
    /// documentation gives). For a benchmark's command line (`moe4 bench
    /// decode --tuning ...`): one program can then time two settings
    /// against each other.
    pub fn with(mut self, spec: &str) -> Result<Tuning> {
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) =
                item.split_once('=').ok_or_else(|| unsupported("tuning setting", item, "must be key=value"))?;
            let bad = |limit: &str| unsupported(format!("tuning value of {key}"), value, limit.to_string());
            let flag = || match value {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad("must be true or false")),
            };
            let num = || value.parse::<u32>().map_err(|_| bad("must be a whole number"));
            let opt_flag = || if value == "auto" { Ok(None) } else { flag().map(Some) };
            let opt_num = || if value == "auto" { Ok(None) } else { num().map(Some) };
            match key {
                "pdl" => self.pdl = flag()?,
                "wide" => self.wide = opt_flag()?,
                "wide1" => self.wide1 = opt_flag()?,
                "load_only" => self.load_only = flag()?,
                "nt" => self.nt = opt_num()?.map(|n| n as usize),
                "task_rows" => self.task_rows = opt_num()?,
                "launches" => self.launches = num()?,
                "wgmma" => self.wgmma = flag()?,
                "wgmma_cols" => self.wgmma_cols = opt_num()?,
                "narrow_tail" => self.narrow_tail = flag()?,
                "route_blocks_from" => self.route_blocks_from = opt_num()?.map(|n| n as usize),
                "fc_blocks" => self.fc_blocks = opt_num()?,
                "fc1_blocks" => self.fc1_blocks = opt_num()?,
                "fc_route_pairs" => self.fc_route_pairs = opt_num()?,
                "y16" => self.y16 = flag()?,
                "fc2_slices" => self.fc2_slices = opt_num()?,
                "w6" => self.w6 = opt_flag()?,
                "deps" => self.deps = opt_flag()?,
                "tma" => self.tma = opt_flag()?,
                _ => {
                    return Err(unsupported(
                        "tuning setting",
                        key,
                        format!("is not one of {}", Tuning::KEYS.join(", ")),
                    ))
                }
            }
        }
        Ok(self)
    }

    /// What `forward` runs on `gpu` unless told otherwise.
    pub fn defaults(gpu: &crate::Gpu) -> Tuning {
        Tuning {
            pdl: gpu.programmatic_launch(),
            wide: None,
            wide1: None,
            load_only: false,
            nt: None,
            task_rows: None,
            launches: 4,
            wgmma: gpu.arch().has_wgmma(),
            wgmma_cols: None,
            narrow_tail: true,
            route_blocks_from: None,
            fc_blocks: None,
            fc1_blocks: None,
            fc_route_pairs: None,
            y16: true,
            fc2_slices: None,
            w6: None,
            deps: None,
            tma: None,
        }
    }
}

/// The kernels count their tasks (column group x weight rows) in 32 bits,
/// with room above for a step past the last one: at most 2^31 for a call
/// of `pairs` (token, expert) pairs. A decode call has at most `pairs +
/// experts` column groups (each expert's last one may be partly empty) of
/// 32-row tasks over FC1's 2 I rows or FC2's H; the prefill tiles are
/// larger. Reached only with layers far beyond today's models (I of 32768
/// at 2^20 pairs) and workspaces of hundreds of GB; an error, not a wrap.
pub fn check_task_count(pairs: usize, experts: usize, hidden: usize, inter: usize) -> Result<()> {
    let groups = (pairs + experts) as u64;
    let tasks = groups * ((2 * inter).max(hidden) / 32) as u64;
    if tasks >= 1 << 31 {
        return Err(unsupported(
            "(max_tokens * top-k + experts) x weight rows / 32",
            tasks,
            "must be below 2^31 (the kernels' 32-bit task indices)",
        ));
    }
    Ok(())
}

impl Workspace {
    /// Scratch for `weights` and calls of up to `max_tokens` tokens with
    /// `topk` experts each.
    pub fn new(weights: &MoeWeights, stream: &Arc<CudaStream>, max_tokens: usize, topk: usize) -> Result<Workspace> {
        if topk == 0 || topk > MAX_TOPK {
            return Err(unsupported("top-k", topk, format!("must be 1..={MAX_TOPK}")));
        }
        let pairs = max_tokens.max(1) * topk;
        if pairs > MAX_PAIRS {
            return Err(unsupported(
                "max_tokens * top-k",
                pairs,
                format!("one call routes at most {MAX_PAIRS} (token, expert) pairs"),
            ));
        }
        check_task_count(pairs, weights.experts, weights.hidden, weights.inter)?;
        // Column-group tables: each active expert's last group may be
        // partly empty (up to MAX_GROUP - 1 unused columns).
        let group_slots = pairs + pairs.min(weights.experts) * (MAX_GROUP - 1);
        // Decode h rows are indexed by column-group position: each active
        // expert's last group may be partly empty (up to 31 unused rows).
        let h: CudaSlice<u16> = stream.alloc_zeros((pairs + pairs.min(weights.experts) * 31) * weights.inter)?;
        // (Only where the build has the TMA-fed FC2.)
        let tma_fc2 = ["bf16", "f16"].iter().any(|t| weights.gpu.has_kernel(&format!("moe_pfw2_{t}_mix256_tma")));
        let h_map = if weights.gpu.arch().has_wgmma() && tma_fc2 {
            let (addr, _g) = h.device_ptr(stream);
            let rows = (h.len() / weights.inter) as u64;
            // (A driver that cannot encode it: the FC2 kernels that load
            // with `cp.async` instead; `tma=true` reports it.)
            match crate::tma::TensorMap2d::bf16_rows(addr, rows, weights.inter as u64) {
                Ok(map) => Some((weights.inter, stream.clone_htod(&map.0)?)),
                Err(_) => None,
            }
        } else {
            None
        };
        Ok(Workspace {
            path: ForwardPath::Auto,
            tuning: Tuning::defaults(&weights.gpu),
            max_tokens: max_tokens.max(1),
            topk,
            experts: weights.experts,
            sorted_pairs: stream.alloc_zeros(pairs)?,
            active: stream.alloc_zeros(4 * weights.experts)?,
            n_active: stream.alloc_zeros(3)?,
            invalid: stream.alloc_zeros(1)?,
            h,
            h_map,
            y: stream.alloc_zeros(pairs * weights.hidden)?,
            groups: stream.alloc_zeros(4 * pairs)?,
            group_rows: stream.alloc_zeros(group_slots)?,
            group_w: stream.alloc_zeros(group_slots)?,
            route_hist: stream.alloc_zeros(route_hist_words(weights.experts as u32) as usize)?,
            // Counter 0, then one per column group (at most one per pair).
            ready: stream.alloc_zeros(ready_bytes(pairs as u32) as usize / 4)?,
        })
    }

    /// Largest token count a call may pass.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }
    /// The top-k this workspace was made for.
    pub fn topk(&self) -> usize {
        self.topk
    }

    /// Expert ids seen so far that were neither -1 nor in `0..E` (they are
    /// skipped, like -1). Reads the device counter (synchronizes `stream`).
    pub fn invalid_id_count(&self, stream: &Arc<CudaStream>) -> Result<u64> {
        Ok(stream.clone_dtoh(&self.invalid)?[0] as u64)
    }

    /// Chooses the FC kernels (default [`ForwardPath::Auto`]).
    pub fn set_path(&mut self, path: ForwardPath) {
        self.path = path;
    }

    /// The benchmark's kernel-variant knobs.
    #[doc(hidden)]
    pub fn tuning_mut(&mut self) -> &mut Tuning {
        &mut self.tuning
    }

    /// Fills the internal scratch between the kernels (h, y) with NaN
    /// (every byte 0xFF), so that a test that runs several kernel variants
    /// on one workspace sees a write one of them skips, instead of a value
    /// an earlier variant left there.
    #[doc(hidden)]
    pub fn poison_scratch(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let (h_len, y_len) = (self.h.len() * 2, self.y.len() * 4);
        let (h, _h) = self.h.device_ptr_mut(stream);
        let (y, _y) = self.y.device_ptr_mut(stream);
        // SAFETY: each pointer covers the whole of its live allocation
        // (`len` elements of 2 or 4 bytes), used on its own stream; any bit
        // pattern is a valid u16 or f32.
        unsafe {
            cudarc::driver::result::memset_d8_async(h, 0xFF, h_len, stream.cu_stream())?;
            cudarc::driver::result::memset_d8_async(y, 0xFF, y_len, stream.cu_stream())?;
        }
        Ok(())
    }

    /// Sets the out-of-range id counter back to zero.
    pub fn reset_invalid_id_count(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        stream.memset_zeros(&mut self.invalid)?;
        Ok(())
    }
}

fn act_params(a: Activation) -> (ActKind, f32, f32) {
    match a {
        Activation::Silu => (ActKind::Silu, f32::INFINITY, 0.0),
        Activation::ClampedSilu { limit } => (ActKind::ClampedSilu, limit, 0.0),
        Activation::GptOss { alpha, limit } => (ActKind::GptOss, limit, alpha),
    }
}

/// Column tiles (of 8 pairs) the FC kernels hold per pass, from the mean
/// pairs per expert: wider tiles read each expert's weights once for more
/// pairs but hold more registers (fewer warps in flight). Experts with more
/// pairs than a pass holds take several passes (correct, weights re-read
/// from L2).
fn column_tiles(pairs: usize, experts: usize) -> usize {
    let mean = pairs as f64 / experts.min(pairs).max(1) as f64;
    if mean <= 6.0 {
        1
    } else if mean <= 12.0 {
        2
    } else {
        4
    }
}

fn aligned(what: &str, addr: u64, align: usize) -> Result<()> {
    if addr.is_multiple_of(align as u64) {
        Ok(())
    } else {
        Err(Error::Alignment { what: what.into(), align, addr })
    }
}

impl MoeWeights {
    /// True if the 8-warp FC`fc` kernel (one column tile) should run instead
    /// of the 4-warp one for `tasks` tasks of `nchunks` chunks: its warps
    /// split K 8 ways. By the longest queue ([`fc_split`]): where the two
    /// tie, the 8-warp kernel was measured 0-12 % faster on the layers that
    /// route with the routing launch (run 57, docs/gpu-results.md), while
    /// the `_rt` kernels (`rt`, small layers and batches) keep a 5 per cent
    /// preference for the 4-warp one (more chunks in flight per warp).
    /// FC1 with at most [`FC1_FEW_PAIRS`] `pairs` in the `_rt` kernels runs
    /// on 4 warps and [`FC1_FEW_BLOCKS_PER_SM`] blocks per SM (see there),
    /// and so does FC2 with at most [`FC2_FEW_MAX_CHUNKS`] chunks.
    fn wide_is_better(&self, fc: &str, tasks: u32, nchunks: u32, rt: bool, pairs: u32) -> Result<bool> {
        if rt && few_pairs(fc, pairs as usize, nchunks) {
            return Ok(false);
        }
        let gpu = &self.gpu;
        let (n4, n8) = (format!("moe_fc{fc}_bf16_nt1"), format!("moe_fc{fc}_bf16_nt1_w8"));
        let b4 = gpu.resident_blocks(&n4, 32 * FC_WARPS, fc_kernel_smem_bytes(1, FC_WARPS, 2))?;
        let b8 = gpu.resident_blocks(&n8, 32 * FC_WARPS_WIDE, fc_kernel_smem_bytes(1, FC_WARPS_WIDE, 2))?;
        let c4 = fc_split(tasks, nchunks, FC_WARPS, b4).cost as u64;
        let c8 = fc_split(tasks, nchunks, FC_WARPS_WIDE, b8).cost as u64;
        Ok(if rt { 100 * c8 < 95 * c4 } else { c8 <= c4 })
    }

    /// `out = MoE(x)` for `x [M, H]`, `topk_ids [M, k]` (i32; -1 = no
    /// expert; other out-of-range ids are skipped and counted),
    /// `topk_weights [M, k]` (f32), `out [M, H]`, all on the GPU, `M` taken
    /// from `x`. Launches on `stream` and returns without waiting.
    ///
    /// Accumulation is f32; the gated activation `h` between FC1 and FC2 is
    /// stored in the activation's 16-bit type (as vLLM and FlashInfer do), so
    /// with f16 activations an `h` beyond ±65504 becomes ±inf; the k terms y
    /// of a token are summed in f32, in k order, and rounded once (on the
    /// prefill path each term is first stored in the 16-bit type as well,
    /// unless [`Tuning::y16`] is off). `x` must be 16-byte aligned, `out`
    /// 8-byte aligned.
    pub fn forward<T: Half>(
        &self,
        ws: &mut Workspace,
        stream: &Arc<CudaStream>,
        x: &CudaView<T>,
        topk_ids: &CudaView<i32>,
        topk_weights: &CudaView<f32>,
        out: &mut CudaViewMut<T>,
    ) -> Result<()> {
        let (h, inter, e) = (self.hidden, self.inter, self.experts);
        if ws.experts != e || ws.h.len() < ws.max_tokens * ws.topk * inter || ws.y.len() < ws.max_tokens * ws.topk * h {
            return Err(unsupported("workspace", "another layer's", "create the Workspace from these weights"));
        }
        if x.len() % h != 0 {
            return Err(Error::Shape {
                what: format!("x (a multiple of H = {h})"),
                expected: x.len().div_ceil(h) * h,
                got: x.len(),
            });
        }
        let m = x.len() / h;
        let k = ws.topk;
        if m > ws.max_tokens {
            return Err(Error::Capacity { what: "tokens".into(), value: m, capacity: ws.max_tokens });
        }
        shape(format!("topk_ids [{m}, {k}]"), m * k, topk_ids.len())?;
        shape(format!("topk_weights [{m}, {k}]"), m * k, topk_weights.len())?;
        shape(format!("out [{m}, {h}]"), m * h, out.len())?;
        if m == 0 {
            return Ok(());
        }
        // The FC kernels count (column group, 32-row task) pairs in u32.
        let tasks_max = (m * k) as u64 * (2 * inter).max(h).div_ceil(32) as u64;
        if tasks_max >= 1 << 31 {
            return Err(unsupported(
                "M x top-k x max(2I, H) / 32",
                tasks_max,
                "must stay below 2^31 (split the call into smaller batches)",
            ));
        }
        let gpu = &self.gpu;
        let tune = ws.tuning;
        let (x_ptr, _x) = x.device_ptr(stream);
        let (ids_ptr, _i) = topk_ids.device_ptr(stream);
        let (tw_ptr, _t) = topk_weights.device_ptr(stream);
        let (out_ptr, _o) = out.device_ptr_mut(stream);
        aligned("x", x_ptr, 16)?;
        aligned("out", out_ptr, 8)?;
        aligned("topk_ids", ids_ptr, 4)?;
        aligned("topk_weights", tw_ptr, 4)?;
        let (groups, _g) = ws.groups.device_ptr_mut(stream);
        let (group_rows, _gr) = ws.group_rows.device_ptr_mut(stream);
        let (group_w, _gw) = ws.group_w.device_ptr_mut(stream);
        let (sorted, _s) = ws.sorted_pairs.device_ptr_mut(stream);
        let (active, _a) = ws.active.device_ptr_mut(stream);
        let (n_active, _n) = ws.n_active.device_ptr_mut(stream);
        let (invalid, _v) = ws.invalid.device_ptr_mut(stream);
        let (route_hist, _rh) = ws.route_hist.device_ptr_mut(stream);
        let (hbuf, _h) = ws.h.device_ptr_mut(stream);
        let (ybuf, _y) = ws.y.device_ptr_mut(stream);
        let (ready, _r) = ws.ready.device_ptr_mut(stream);
        // The tensor map over h, where it was made for this layer's I.
        let h_map = ws.h_map.as_ref().filter(|(i, _)| *i == inter).map(|(_, map)| map.device_ptr(stream));
        let pairs = (m * k) as u32;
        let nt = tune.nt.unwrap_or_else(|| column_tiles(m * k, e));
        if !matches!(nt, 1 | 2 | 4) {
            return Err(unsupported("decode column tiles", nt, "must be 1, 2 or 4"));
        }
        if let Some(r) = tune.task_rows.filter(|r| *r != 32 && *r != 64) {
            return Err(unsupported("decode task rows", r, "must be 32 or 64"));
        }
        let mean = (m * k) as f64 / e.min(m * k).max(1) as f64;
        let prefill = match ws.path {
            ForwardPath::Auto => mean >= PREFILL_CROSSOVER,
            ForwardPath::Decode => false,
            ForwardPath::Prefill => true,
        };
        // y in 16 bits: the prefill path only (the decode FC2 writes f32).
        let y16 = prefill && tune.y16;
        // The wgmma prefill kernels' pairs per tile (None: mma.sync ones).
        let wg_cols = if prefill && tune.wgmma && gpu.arch().has_wgmma() {
            match tune.wgmma_cols {
                Some(c @ (64 | 128)) => Some(c),
                Some(PFW256_COLS) if gpu.has_kernel(&format!("moe_pfw1_{}_n256", T::NAME)) => Some(PFW256_COLS),
                Some(c) => {
                    return Err(unsupported(
                        "wgmma prefill pairs per tile",
                        c,
                        "must be 64, 128 or 256 (256 where the loaded PTX has the 128-row kernels)",
                    ))
                }
                None if mean >= N256_PREFILL_PAIRS && gpu.has_kernel(&format!("moe_pfw1_{}_n256", T::NAME)) => {
                    Some(PFW256_COLS)
                }
                None => Some(if mean >= WIDE_PREFILL_PAIRS { 128 } else { 64 }),
            }
        } else {
            None
        };
        // 128-pair tiles, and 64-pair ones for the experts' small remainders
        // (256 and one or two of 64 with the 128-row kernels).
        let mixed = wg_cols == Some(128) && tune.narrow_tail;
        let mixed256 = wg_cols == Some(PFW256_COLS) && tune.narrow_tail;
        // Small batches: the FC kernels route the pairs themselves (no
        // routing launch; one column tile, the decode kernels).
        // Active experts if routing is uniform: what the choices below go by.
        let active_est = e as f64 * (1.0 - (1.0 - 1.0 / e as f64).powi((m * k) as i32));
        let fc_route_max = match tune.fc_route_pairs {
            Some(n) if n > FC_ROUTE_MAX_PAIRS => {
                return Err(unsupported(
                    "pairs the FC kernels route",
                    n,
                    format!("must be at most {FC_ROUTE_MAX_PAIRS}"),
                ))
            }
            Some(n) => n,
            None if active_est * 1.5 * (h * inter) as f64 <= FC_ROUTE_MAX_BYTES => FC_ROUTE_MAX_PAIRS,
            None => 0,
        };
        let route_in_fc = !prefill && nt == 1 && pairs <= fc_route_max;
        let route = RouteParams {
            topk_ids: ids_ptr,
            topk_weights: tw_ptr,
            sorted_pairs: sorted,
            active,
            n_active,
            invalid_count: invalid,
            groups,
            group_rows,
            group_w,
            pairs,
            n_experts: e as u32,
            group: match (prefill, wg_cols) {
                (true, Some(c)) => c,
                (true, None) => PF_COLS,
                (false, _) => 8 * nt as u32,
            },
            narrow: if mixed {
                PFW_NARROW_COLS
            } else if mixed256 {
                PFW256_NARROW_COLS
            } else {
                0
            },
            chunk: 0,
            hist: 0,
        };
        let smem = route_smem_bytes(e as u32);
        if route_in_fc {
            // Routed in FC1 and FC2.
        } else if (m * k) >= tune.route_blocks_from.unwrap_or_else(|| route_blocks_from(e)) {
            let (blocks, chunk) = route_split(pairs);
            let route = RouteParams { chunk, hist: route_hist, ..route };
            // SAFETY: the buffers were checked above to hold what RouteParams
            // documents; `hist` holds route_hist_words(E) words, what
            // `blocks <= ROUTE_MAX_BLOCKS` blocks of `chunk` pairs use; the
            // shared memory matches the kernels' layouts; the three launches
            // run in stream order (each waits for the previous one).
            unsafe {
                gpu.launch_dependent(stream, "moe_route_count", blocks, ROUTE_BLOCK_THREADS, smem, route, tune.pdl)?;
                gpu.launch_dependent(stream, "moe_route_scan", 1, ROUTE_THREADS, smem, route, tune.pdl)?;
                gpu.launch_dependent(stream, "moe_route_scatter", blocks, ROUTE_BLOCK_THREADS, smem, route, tune.pdl)?;
            }
        } else {
            // SAFETY: the buffers were checked above to hold what RouteParams
            // documents; the shared memory matches the kernel's layout.
            unsafe {
                gpu.launch_dependent(stream, "moe_route", 1, ROUTE_THREADS, smem, route, tune.pdl)?;
            }
        }
        if tune.launches <= 1 {
            return Ok(());
        }

        let (kind, limit, alpha) = act_params(self.activation);
        let (c1, s1) = (self.fc1_codes.device_ptr(stream), self.fc1_scales.device_ptr(stream));
        let (c2, s2) = (self.fc2_codes.device_ptr(stream), self.fc2_scales.device_ptr(stream));
        let (ag, au, ad) =
            (self.alpha_gate.device_ptr(stream), self.alpha_up.device_ptr(stream), self.alpha_down.device_ptr(stream));
        let base = FcParams {
            sorted_pairs: sorted,
            active,
            n_active,
            topk_weights: tw_ptr,
            topk: k as u32,
            act: kind as u32,
            limit,
            act_alpha: alpha,
            groups,
            group_rows,
            group_w,
            route_pairs: if route_in_fc { pairs } else { 0 },
            n_experts: e as u32,
            topk_ids: ids_ptr,
            invalid_count: invalid,
            ..Default::default()
        };
        // The wgmma FC1 reads x in the wgmma k order: a permuted copy in y's
        // memory (y is first written by FC2, after FC1 is done with it).
        let x_in = if wg_cols.is_some() { ybuf } else { x_ptr };
        let fc1 = FcParams {
            codes: c1.0,
            scales: s1.0,
            alpha_a: ag.0,
            alpha_b: au.0,
            input: x_in,
            output: hbuf,
            k: h as u32,
            rows: 2 * inter as u32,
            ..base
        };
        let fc2 = FcParams {
            codes: c2.0,
            scales: s2.0,
            alpha_a: ad.0,
            input: hbuf,
            output: ybuf,
            k: inter as u32,
            rows: h as u32,
            y16: y16 as u32,
            tmap: h_map.as_ref().map_or(0, |m| m.0),
            ..base
        };
        // The combine's parameters (FC2 in slices sets `slices` below).
        let comb = CombineParams {
            y: ybuf,
            topk_ids: ids_ptr,
            out: out_ptr,
            m: m as u32,
            topk: k as u32,
            h: h as u32,
            n_experts: e as u32,
            y16: y16 as u32,
            slices: 1,
        };
        // The `_rt` kernels' name suffix and routing tables' shared memory.
        let (rt, routing) = if route_in_fc { ("_rt", FC_ROUTE_BYTES) } else { ("", 0) };
        // Kernel name, dynamic shared memory, threads per block of FC1 and FC2.
        let fc_kernel = |fc: &str, tasks: u32, nchunks: u32| -> Result<(String, u32, u32)> {
            if mixed {
                return Ok((format!("moe_pfw{fc}_{}_mix", T::NAME), pfw_smem_bytes(128), PFW_THREADS));
            }
            if mixed256 || wg_cols == Some(PFW256_COLS) {
                let (kind, smem) =
                    if mixed256 { ("mix256", pfw256_mix_smem_bytes()) } else { ("n256", pfw256_smem_bytes()) };
                let name = format!("moe_pfw{fc}_{}_{kind}", T::NAME);
                let tma = format!("{name}_tma");
                let has_tma = h_map.is_some() && gpu.has_kernel(&tma);
                if fc == "2" && tune.tma == Some(true) && !has_tma {
                    return Err(unsupported(
                        "TMA-fed FC2",
                        "forced",
                        "needs a prefill call on the 128-row kernels, a build with the `_tma` kernels (moe4_exp = \"tma\") and a Workspace made for these weights on sm_90a",
                    ));
                }
                if fc == "2" && has_tma && tune.tma != Some(false) {
                    return Ok((tma, smem, PFW_THREADS));
                }
                return Ok((name, smem, PFW_THREADS));
            }
            if let Some(c) = wg_cols {
                return Ok((format!("moe_pfw{fc}_{}_n{c}", T::NAME), pfw_smem_bytes(c), PFW_THREADS));
            }
            if prefill {
                return Ok((format!("moe_pf{fc}_{}", T::NAME), pf_smem_bytes(), PF_THREADS));
            }
            let wide = nt == 1
                && !tune.load_only
                && if fc == "1" { tune.wide1.or(tune.wide) } else { tune.wide }
                    .map_or_else(|| self.wide_is_better(fc, tasks, nchunks, route_in_fc, pairs), Ok)?;
            let warps = if wide { FC_WARPS_WIDE } else { FC_WARPS };
            let rows64 = nt > 1 && !tune.load_only && tune.task_rows.unwrap_or_else(|| decode_task_rows(nt, e)) == 64;
            let suffix = if tune.load_only {
                "_ld"
            } else if wide {
                "_w8"
            } else if rows64 {
                "_r64"
            } else {
                ""
            };
            let mt = if rows64 { 4 } else { 2 };
            let smem = fc_kernel_smem_bytes(nt as u32, warps, mt) + routing;
            let name = format!("moe_fc{fc}_{}_nt{nt}{suffix}{rt}", T::NAME);
            // FC1 on 6-warp blocks (builds with the `_w6` kernels, `moe4_exp
            // = "w6"`; one column tile), against the kernel chosen above.
            let name6 = format!("moe_fc1_{}_nt1_w6{rt}", T::NAME);
            let six_ok = fc == "1" && nt == 1 && !tune.load_only && gpu.has_kernel(&name6);
            if tune.w6 == Some(true) && !six_ok && fc == "1" {
                return Err(unsupported(
                    "6-warp FC1",
                    "forced",
                    "needs a decode call with one column tile and a build with the 6-warp kernels (moe4_exp = \"w6\")",
                ));
            }
            if six_ok && tune.w6 != Some(false) {
                let smem6 = fc_kernel_smem_bytes(1, FC_WARPS_SIX, 2) + routing;
                let c6 =
                    fc_split_div(tasks, nchunks, FC_WARPS_SIX, gpu.resident_blocks(&name6, 32 * FC_WARPS_SIX, smem6)?)
                        .cost;
                let c = fc_split(tasks, nchunks, warps, gpu.resident_blocks(&name, 32 * warps, smem)?).cost;
                // Unmeasured: a 5 % margin over the 4- or 8-warp kernel.
                if tune.w6 == Some(true) || (100 * c6 as u64) < 95 * c as u64 {
                    return Ok((name6, smem6, 32 * FC_WARPS_SIX));
                }
            }
            Ok((name, smem, 32 * warps))
        };
        // Tasks (column groups x 32-row blocks) if every active expert has
        // one group, with as many active experts as uniform routing gives
        // on average: the estimate the kernel choice goes by.
        let groups_est = (active_est.round() as u32).clamp(1, (m * k) as u32);
        let (n1, smem1, threads1) = fc_kernel("1", groups_est * (2 * inter as u32 / 32), h as u32 / 64)?;
        let (n2, smem2, threads2) = fc_kernel("2", groups_est * (h as u32 / 32), inter as u32 / 64)?;
        let fc_grid = |n: &str, threads: u32, smem: u32, blocks: Option<u32>| -> Result<u32> {
            let resident = gpu.resident_blocks(n, threads, smem)?;
            Ok(blocks.map_or(resident, |b| b.clamp(1, resident)))
        };
        let four_warp_rt = |n: &str, fc: &str| n == format!("moe_fc{fc}_{}_nt1_rt", T::NAME);
        let blocks1 = tune
            .fc1_blocks
            .or(tune.fc_blocks)
            .or_else(|| few_pairs_blocks(four_warp_rt(&n1, "1"), "1", pairs as usize, h as u32 / 64, gpu.sm_count()));
        let grid1 = fc_grid(&n1, threads1, smem1, blocks1)?;
        let blocks2 = tune.fc_blocks.or_else(|| {
            few_pairs_blocks(four_warp_rt(&n2, "2"), "2", pairs as usize, inter as u32 / 64, gpu.sm_count())
        });
        let grid2 = fc_grid(&n2, threads2, smem2, blocks2)?;
        // FC2 in slices (builds with the `_sl` kernels): where its queue is
        // shorter than the in-block split's, and y holds the partial rows.
        let (n2, smem2, threads2, grid2, slices) = {
            let name = format!("moe_fc2_{}_nt1_sl{rt}", T::NAME);
            let cap = (ws.max_tokens * ws.topk / (m * k)).min(FC_SLICES_MAX as usize) as u32;
            let usable = !prefill && nt == 1 && !tune.load_only && cap >= 2;
            let has = usable && gpu.has_kernel(&name);
            let forced = tune.fc2_slices.filter(|&n| n > 1);
            if let (Some(n), false) = (forced, has) {
                return Err(unsupported(
                    "FC2 slices",
                    n,
                    "needs a decode call with one column tile, y room for every pair's slices, and a build with the sliced FC2 kernels (moe4_exp = \"fc2sl\")",
                ));
            }
            let smem = fc_kernel_smem_bytes(1, FC_WARPS, 2) + routing;
            let pick = if has && tune.fc2_slices.is_none_or(|n| n > 1) {
                let grid = fc_grid(&name, 32 * FC_WARPS, smem, tune.fc_blocks)?;
                let tasks = groups_est * (h as u32 / 32);
                let nchunks = inter as u32 / 64;
                let n = match forced {
                    // The kernel takes at most one slice per chunk and
                    // needs a whole group of warps; the combine must sum
                    // what it writes.
                    Some(n) => n.min(cap).min(nchunks).min(grid * FC_WARPS),
                    None => {
                        let (n, c2) = fc_slices(tasks, nchunks, grid * FC_WARPS, cap);
                        let cur = fc_split(tasks, nchunks, threads2 / 32, grid2).cost as u64;
                        // Unmeasured: a 10 % margin over the in-block split.
                        if (c2 as u64) * 10 < 2 * cur * 9 {
                            n
                        } else {
                            1
                        }
                    }
                };
                (n > 1).then_some((name, grid, n))
            } else {
                None
            };
            match pick {
                Some((name, grid, n)) => (name, smem, 32 * FC_WARPS, grid, n),
                None => (n2, smem2, threads2, grid2, 1),
            }
        };
        // FC2 waits per column group (the decode kernels; not the sliced
        // FC2 or the loads-only variants) where FC1 has more tasks (an
        // estimate, as the kernel choice's) than warps, and the combine
        // zeroes the counters; the calls the benchmark cuts short zero them
        // below.
        let fc2 = FcParams { slices, ..fc2 };
        let (n1_dp, n2_dp) = (format!("{n1}_dp"), format!("{n2}_dp"));
        let combine_dp = format!("moe_combine_dp_{}", T::NAME);
        let dp_ok = !prefill
            && !tune.load_only
            && slices == 1
            && gpu.has_kernel(&n1_dp)
            && gpu.has_kernel(&n2_dp)
            && gpu.has_kernel(&combine_dp);
        if tune.deps == Some(true) && !dp_ok {
            return Err(unsupported(
                "FC2 waiting per column group",
                "forced",
                "needs a decode call on kernels with `_dp` instances (not sliced or loads-only) and a build with them (moe4_exp = \"deps\")",
            ));
        }
        let fc1_tasks = groups_est * (2 * inter as u32 / if n1.contains("_r64") { 64 } else { 32 });
        let dp = dp_ok && tune.deps.unwrap_or(fc1_tasks > grid1 * (threads1 / 32));
        let ready = if dp { ready } else { 0 };
        // Their grids from their own occupancy (their registers may differ).
        let (grid1, grid2) = if dp {
            (fc_grid(&n1_dp, threads1, smem1, blocks1)?, fc_grid(&n2_dp, threads2, smem2, tune.fc_blocks)?)
        } else {
            (grid1, grid2)
        };
        let zero_ready = || -> Result<()> {
            if ready != 0 {
                // SAFETY: `ready` is the workspace's counter buffer,
                // `ready_bytes(max_tokens * topk) >= ready_bytes(m * k)`
                // bytes, used on this stream.
                let bytes = ready_bytes((m * k) as u32) as usize;
                unsafe { cudarc::driver::result::memset_d8_async(ready, 0, bytes, stream.cu_stream())? };
            }
            Ok(())
        };
        if wg_cols.is_some() {
            let perm = PermuteParams { src: x_ptr, dst: ybuf, rows: m as u32, k: h as u32 };
            let grid = ((m * h / 8) as u32).div_ceil(256).min(8 * gpu.sm_count());
            // SAFETY: x holds m x H; y holds max_tokens x k x H f32, more
            // than m x H 16-bit values; H is a multiple of 64.
            unsafe { gpu.launch_dependent(stream, "moe_permute_x", grid, 256, 0, perm, tune.pdl)? };
        }
        // SAFETY: weights were packed for (E, H, I); h/y hold max_tokens*k
        // rows; x/out/ids/weights lengths were checked; the `_rt` kernels
        // get `pairs <= FC_ROUTE_MAX_PAIRS` (at most their 128 or 256
        // threads) and FC_ROUTE_BYTES more shared memory; `ready` (the `_dp`
        // kernels) is the workspace's counter buffer, `ready_bytes(max_tokens
        // * topk)` bytes, zero at the start of the call.
        unsafe {
            if dp {
                // (The `_dp` instances take the same threads and shared
                // memory as the kernels without `_dp`.)
                gpu.launch_dependent(stream, &n1_dp, grid1, threads1, smem1, FcDpParams { fc: fc1, ready }, tune.pdl)?;
            } else {
                gpu.launch_dependent(stream, &n1, grid1, threads1, smem1, fc1, tune.pdl)?;
            }
            if tune.launches <= 2 {
                return zero_ready();
            }
            if dp {
                gpu.launch_dependent(stream, &n2_dp, grid2, threads2, smem2, FcDpParams { fc: fc2, ready }, tune.pdl)?;
            } else {
                gpu.launch_dependent(stream, &n2, grid2, threads2, smem2, fc2, tune.pdl)?;
            }
        }
        if tune.launches <= 3 {
            return zero_ready();
        }
        let comb = CombineParams { slices, ..comb };
        let threads = 256u32;
        // One thread per 16 bytes of a y row (the sliced combine: per 4
        // f32 outputs).
        let per = if slices > 1 { 4 } else { combine_outputs_per_thread(y16) };
        let grid = ((m * h / per as usize) as u32).div_ceil(threads);
        let combine =
            if slices > 1 { format!("moe_combine_sl_{}", T::NAME) } else { format!("moe_combine_{}", T::NAME) };
        // SAFETY: y holds m*k rows of H (m*k*slices with slices, checked
        // above against its capacity); out holds m*H; `ready` (the `_dp`
        // path) is the workspace's counter buffer, `ready_bytes(max_tokens
        // * topk)` bytes, of which the combine zeroes the first m*k + 1
        // counters.
        unsafe {
            if dp {
                gpu.launch_dependent(
                    stream,
                    &combine_dp,
                    grid,
                    threads,
                    0,
                    CombineDpParams { c: comb, ready },
                    tune.pdl,
                )?;
            } else {
                gpu.launch_dependent(stream, &combine, grid, threads, 0, comb, tune.pdl)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_at_few_pairs() {
        // One token of top-8 on 132 SMs: 396 blocks of the 4-warp kernel
        // (FC1 whatever its chunks: Qwen3's 32).
        assert_eq!(few_pairs_blocks(true, "1", 8, 32, 132), Some(396));
        assert_eq!(few_pairs_blocks(true, "1", 1, 32, 132), Some(396));
        // More pairs, or another kernel (the routing kernel's layers,
        // a forced 8-warp one): every resident block.
        assert_eq!(few_pairs_blocks(true, "1", 9, 32, 132), None);
        assert_eq!(few_pairs_blocks(false, "1", 8, 32, 132), None);
        // FC2: Qwen3's 12 chunks (I = 768) and up to 24; not GPT-OSS's 45.
        assert_eq!(few_pairs_blocks(true, "2", 8, 12, 132), Some(396));
        assert_eq!(few_pairs_blocks(true, "2", 4, 24, 132), Some(396));
        assert_eq!(few_pairs_blocks(true, "2", 4, 25, 132), None);
        assert_eq!(few_pairs_blocks(true, "2", 4, 45, 132), None);
    }

    fn some_tuning() -> Tuning {
        Tuning {
            pdl: true,
            wide: None,
            wide1: None,
            load_only: false,
            nt: None,
            task_rows: None,
            launches: 4,
            wgmma: true,
            wgmma_cols: None,
            narrow_tail: true,
            route_blocks_from: None,
            fc_blocks: None,
            fc1_blocks: None,
            fc_route_pairs: None,
            y16: true,
            fc2_slices: None,
            w6: None,
            deps: None,
            tma: None,
        }
    }

    #[test]
    fn tuning_settings_from_text() {
        let t = some_tuning().with("nt=2, wide=false,pdl=false,fc_blocks=132,deps=auto").unwrap();
        assert_eq!(t.nt, Some(2));
        assert_eq!(t.wide, Some(false));
        assert!(!t.pdl);
        assert_eq!(t.fc_blocks, Some(132));
        assert_eq!(t.deps, None);
        assert_eq!((t.wide1, t.with("wide1=false").unwrap().wide1), (None, Some(false)));
        assert_eq!((t.fc1_blocks, t.with("fc1_blocks=396").unwrap().fc1_blocks), (None, Some(396)));
        assert_eq!(t.with("nt=auto").unwrap().nt, None);
        assert_eq!(some_tuning().with("").unwrap().launches, 4);
        for (bad, names) in
            [("nt", "nt"), ("frobs=1", "frobs"), ("pdl=yes", "yes"), ("nt=-1", "-1"), ("launches=auto", "auto")]
        {
            let e = some_tuning().with(bad).unwrap_err().to_string();
            assert!(e.contains(names), "{bad}: {e}");
        }
        // Every key is taken (with a value of its kind), and named in the
        // error for an unknown one.
        for key in Tuning::KEYS {
            let ok = ["true", "1", "auto"].iter().any(|v| some_tuning().with(&format!("{key}={v}")).is_ok());
            assert!(ok, "{key}");
        }
        assert!(some_tuning().with("x=1").unwrap_err().to_string().contains(&Tuning::KEYS.join(", ")));
    }

    #[test]
    fn task_counts_stay_in_32_bits() {
        // The largest routing with today's largest layers.
        check_task_count(MAX_PAIRS, 512, 7168, 14336).unwrap();
        check_task_count(MAX_PAIRS, 512, 32768, 16384).unwrap();
        for (h, i) in [(64, 1 << 20), (1 << 20, 64), (65536, 64)] {
            let e = check_task_count(MAX_PAIRS, 512, h, i).unwrap_err().to_string();
            assert!(e.contains("2^31"), "{e}");
        }
        // The largest sizes on a small call.
        check_task_count(64, 512, 1 << 20, 1 << 20).unwrap();
    }

    #[test]
    fn task_rows_follow_the_measurements() {
        assert_eq!(decode_task_rows(1, 256), 32);
        assert_eq!(decode_task_rows(2, 8), 32);
        assert_eq!(decode_task_rows(2, 128), 64);
        assert_eq!(decode_task_rows(4, 8), 64);
        assert_eq!(decode_task_rows(4, 256), 64);
    }

    #[test]
    fn few_experts_route_on_one_block_longer() {
        assert_eq!(route_blocks_from(8), ROUTE_BLOCKS_FROM_FEW_EXPERTS);
        assert_eq!(route_blocks_from(FEW_EXPERTS), ROUTE_BLOCKS_FROM_FEW_EXPERTS);
        assert_eq!(route_blocks_from(FEW_EXPERTS + 1), ROUTE_BLOCKS_FROM);
        assert_eq!(route_blocks_from(256), ROUTE_BLOCKS_FROM);
        const { assert!(ROUTE_BLOCKS_FROM < ROUTE_BLOCKS_FROM_FEW_EXPERTS) };
    }
}
