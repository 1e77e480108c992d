//! Kernel parameter structs, `#[repr(C)]`, shared by the kernels and the
//! host launches: a launch passes one of these by value, so both sides agree
//! on every field's type and place. Device addresses are `u64`.

/// One expert that received at least one (token, k) pair, written by the
/// routing kernel in ascending expert order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActiveExpert {
    /// Expert id.
    pub expert: u32,
    /// First slot of its pairs in `sorted_pairs`.
    pub start: u32,
    /// Number of its pairs.
    pub count: u32,
    /// Index of its first column group (groups of `8 * nt` pairs) among all
    /// active experts' groups.
    pub group_start: u32,
}

/// The gated activation applied after FC1 (DESIGN.md §4).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActKind {
    /// `silu(g) * u`.
    Silu = 0,
    /// `silu(min(g, limit)) * clamp(u, -limit, limit)`.
    ClampedSilu = 1,
    /// GPT-OSS: `g' * sigmoid(alpha g') * (u' + 1)`, `g' = min(g, limit)`,
    /// `u' = clamp(u, -limit, limit)`.
    GptOss = 2,
}

/// Routing: group the (token, k) pairs by expert.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RouteParams {
    /// `i32 [pairs]` expert ids (row-major `[M, topk]`).
    pub topk_ids: u64,
    /// `f32 [pairs]` routing weights.
    pub topk_weights: u64,
    /// `u32 [pairs]` out: pair indices grouped by expert (ascending
    /// expert; within an expert in no particular order).
    pub sorted_pairs: u64,
    /// `ActiveExpert [n_experts]` out.
    pub active: u64,
    /// `u32 [3]` out: number of active experts, `group`-wide column groups
    /// (all of them without `narrow`), narrow column groups.
    pub n_active: u64,
    /// `u32` in/out: running count of out-of-range ids (not -1).
    pub invalid_count: u64,
    /// `u32 [4 * groups]` out: per column group (expert, first slot, pairs,
    /// offset of its first column in `group_rows` and `group_w`).
    pub groups: u64,
    /// `u32 [groups * group]` out: per column group and column, the pair
    /// there (`u32::MAX` past the group's last pair); a group's columns start
    /// at its record's offset ([`crate::groups`]).
    pub group_rows: u64,
    /// `f32 [groups * group]` out: the routing weight of that pair (0 past
    /// the last).
    pub group_w: u64,
    /// M * topk.
    pub pairs: u32,
    /// Number of experts.
    pub n_experts: u32,
    /// Pairs per column group of the FC kernels (`8 * NT`, or the prefill
    /// tile's 64).
    pub group: u32,
    /// Nonzero: an expert's last group of at most this many pairs is a
    /// narrow group ([`crate::groups`]), listed after all the `group`-wide
    /// ones; `n_active[2]` counts them. Zero: every group is `group` wide.
    pub narrow: u32,
    /// Pairs per block of the multi-block routing (`moe_route_count`,
    /// `moe_route_scatter`: block `b` takes pairs `b * chunk ..`); unused
    /// by the one-block `moe_route`.
    pub chunk: u32,
    /// `u32 [blocks * n_experts + 3 * n_experts]` scratch of the
    /// multi-block routing: per block and expert a count, then that
    /// block's first slot of the expert (from the expert's first); then per expert (first slot, first column
    /// group, count). Unused by `moe_route`.
    pub hist: u64,
}

/// FC1 (x -> h, with the gated activation) or FC2 (h -> y, times alpha2 and
/// the routing weight): the same streaming GEMM, different epilogues.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FcParams {
    /// Packed codes in the [`crate::tile`] layout.
    pub codes: u64,
    /// E4M3 scales in the [`crate::tile`] layout.
    pub scales: u64,
    /// `f32 [E]`: FC1 gate global scale, or FC2 alpha2.
    pub alpha_a: u64,
    /// `f32 [E]`: FC1 up global scale (unused by FC2).
    pub alpha_b: u64,
    /// FC1: x `[M, k]`; FC2: h `[pairs, k]` (16-bit).
    pub input: u64,
    /// FC1: h `[pairs, rows / 2]` (16-bit); FC2: y `[pairs, rows]`, f32
    /// or (`y16`) 16-bit.
    pub output: u64,
    /// From routing.
    pub sorted_pairs: u64,
    /// From routing.
    pub active: u64,
    /// From routing.
    pub n_active: u64,
    /// `f32 [pairs]` routing weights (FC2).
    pub topk_weights: u64,
    /// From routing: per column group (expert, first slot, pairs, table
    /// offset).
    pub groups: u64,
    /// From routing: the pair of each (group, column).
    pub group_rows: u64,
    /// From routing: the routing weight of each (group, column).
    pub group_w: u64,
    /// Reduction length (FC1: H, FC2: I).
    pub k: u32,
    /// Weight rows (FC1: 2I, FC2: H).
    pub rows: u32,
    /// top-k.
    pub topk: u32,
    /// [`ActKind`] as u32.
    pub act: u32,
    /// Activation clamp limit.
    pub limit: f32,
    /// GPT-OSS sigmoid alpha.
    pub act_alpha: f32,
    /// The `_rt` decode kernels: each block routes these (M x top-k) pairs
    /// itself (at most [`crate::launch::FC_ROUTE_MAX_PAIRS`]), from
    /// `topk_ids`, into tables in its own shared memory, and does not read
    /// `groups`, `group_rows`, `group_w`, `n_active`. Unused by the others.
    pub route_pairs: u32,
    /// `_rt` kernels: experts (ids outside `0..n_experts` are skipped).
    pub n_experts: u32,
    /// `_rt` kernels: `i32 [pairs]` expert ids.
    pub topk_ids: u64,
    /// `_rt` kernels: the counter of out-of-range ids (not -1), which
    /// FC1's block 0 adds to.
    pub invalid_count: u64,
    /// The prefill FC2 kernels: nonzero writes y in the activation's 16-bit
    /// format instead of f32 (the decode kernels always write f32).
    pub y16: u32,
    /// The `_sl` decode FC2 kernels (`moe4_exp = "fc2sl"` builds): each
    /// task's chunks are cut into this many strided shares, each written
    /// as its own partial y row (`pair * slices + share`), which
    /// `moe_combine_sl_*` sums. Unused by the others. (Placed where the
    /// struct had padding: the other kernels' parameters keep their size.)
    pub slices: u32,
    /// The `_tma` prefill FC2 kernels: the global address of a
    /// `CUtensorMap` over `input` (h, `[rows][k]` 16-bit, boxes of 64 x 256
    /// with the 128-byte swizzle; `moe4`'s `tma` module). Unused by the
    /// others.
    pub tmap: u64,
}

/// Combine: `out[m] = sum_j y[m * topk + j]` over valid ids, in j order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CombineParams {
    /// `[pairs, h]`: f32, or (`y16`) the output's 16-bit format.
    pub y: u64,
    /// `i32 [pairs]`.
    pub topk_ids: u64,
    /// `[M, h]` 16-bit out.
    pub out: u64,
    /// Tokens.
    pub m: u32,
    /// top-k.
    pub topk: u32,
    /// Hidden size.
    pub h: u32,
    /// Number of experts (ids outside 0..n are skipped).
    pub n_experts: u32,
    /// Nonzero: y holds 16-bit values (as `FcParams::y16`).
    pub y16: u32,
    /// `moe_combine_sl_*` (`moe4_exp = "fc2sl"` builds): y holds this many
    /// partial rows per pair (`pair * slices + share`, f32), summed in
    /// share order into the pair's term. Unused by the others.
    pub slices: u32,
}

/// The `_dp` decode FC kernels (`moe4_exp = "deps"` builds): an FC kernel's
/// parameters and the readiness counters. `ready`: `u32` words
/// [`crate::launch::READY_STRIDE`] apart, zero at the start of a call;
/// counter 0 counts FC1's finished column groups, counter `1 + g` the h rows
/// FC1 has written of group `g`. FC1 adds the rows of each finished task to
/// its group's counter (after its h stores, with release semantics), and
/// the task that completes a group adds 1 to counter 0; FC2 reads a group's
/// h once its counter has reached FC1's rows (`2 k`), or once counter 0
/// holds every group, instead of waiting for all of FC1 (`griddep_wait`):
/// it works on the groups FC1 has finished while FC1's last tasks run.
/// `moe_combine_dp_*` sets the counters back to zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FcDpParams {
    /// The kernel's parameters, as the instance without `_dp` takes them.
    pub fc: FcParams,
    /// The readiness counters.
    pub ready: u64,
}

/// `moe_combine_dp_*`: the combine's parameters and the readiness counters
/// ([`FcDpParams::ready`]), the first `m x topk + 1` of which it sets to
/// zero (FC2, which reads them, is complete).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CombineDpParams {
    /// The combine's parameters.
    pub c: CombineParams,
    /// The readiness counters.
    pub ready: u64,
}

/// `moe_permute_x`: `dst [rows, k]` = `src` with each 64-element chunk of a
/// row in the `wgmma` k order ([`crate::tile::wgmma_permuted`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PermuteParams {
    /// 16-bit `[rows, k]` in.
    pub src: u64,
    /// 16-bit `[rows, k]` out.
    pub dst: u64,
    /// Rows.
    pub rows: u32,
    /// Elements per row (a multiple of 64).
    pub k: u32,
}

/// The W4A4 grouped GEMM: for the rows `m` of expert `e`'s segment,
/// `out[m, n] = s_a[m] * s_w[e][n] * row_scale[m] * sum_k a[m, k] b[e][n, k]`
/// (`row_scale` optional).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct W4A4Params {
    /// `u8 [rows, k/2]` packed INT4 activations.
    pub a: u64,
    /// `u8 [E, n, k/2]` packed INT4 weights.
    pub b: u64,
    /// `f32 [rows]` per-token scales.
    pub s_a: u64,
    /// `f32 [E, n]` per-channel scales.
    pub s_w: u64,
    /// `f32 [rows]` optional extra row scale (0 = none).
    pub row_scale: u64,
    /// `i64 [E + 1]` segment offsets (on the device).
    pub offsets: u64,
    /// Output `[rows, n]`: f16/bf16, or i32 for the unfused baseline.
    pub out: u64,
    /// `u32`: counts offsets that were not a valid non-decreasing prefix sum.
    pub error_count: u64,
    /// Total rows of `a` / `out`.
    pub rows: u32,
    /// Output columns.
    pub n: u32,
    /// Reduction length.
    pub k: u32,
    /// Experts.
    pub n_experts: u32,
}

/// Dequant kernel of the unfused baseline: `out = s_a[m] * s_w[e][n] * acc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DequantParams {
    /// `i32 [rows, n]`.
    pub acc: u64,
    /// `f32 [rows]`.
    pub s_a: u64,
    /// `f32 [E, n]`.
    pub s_w: u64,
    /// `i64 [E + 1]`.
    pub offsets: u64,
    /// 16-bit out.
    pub out: u64,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub n: u32,
    /// Experts.
    pub n_experts: u32,
    /// Padding.
    pub pad: u32,
}

/// Activation quantizer: 16-bit rows to packed INT4 + a per-row f32 scale.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct QuantParams {
    /// `[rows, k]` 16-bit input.
    pub x: u64,
    /// `u8 [rows, k/2]` out.
    pub q: u64,
    /// `f32 [rows]` out.
    pub scale: u64,
    /// Rows.
    pub rows: u32,
    /// Row length.
    pub k: u32,
}

/// `moe4_read_floor` (the decode benchmark's floor): read `n16` 16-byte
/// words from `src`, after one dependent load of `dep`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadFloorParams {
    /// The bytes to read.
    pub src: u64,
    /// How many 16-byte words.
    pub n16: u64,
    /// One u32 holding 0: the dependent load (its value offsets the reads).
    pub dep: u64,
    /// One u32, written only if the loads fold to a value a zero buffer
    /// never gives.
    pub out: u64,
}
