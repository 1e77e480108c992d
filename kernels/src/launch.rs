//! Launch geometry the kernels assume and the host uses: one definition.

/// Threads of the routing block.
pub const ROUTE_THREADS: u32 = 1024;
/// Warps per decode FC block with `nt` column tiles (its warps split a
/// task's K up to this many ways).
pub const fn fc_warps(nt: u32) -> u32 {
    if nt == 1 {
        8
    } else {
        4
    }
}
/// Threads per decode FC block with `nt` column tiles.
pub const fn fc_threads(nt: u32) -> u32 {
    32 * fc_warps(nt)
}
/// Threads per W4A4 GEMM block (8 warps).
pub const GEMM_THREADS: u32 = 256;
/// Output columns per W4A4 GEMM tile.
pub const GEMM_BN: u32 = 128;
/// K per W4A4 GEMM pipeline stage.
pub const GEMM_BK: u32 = 256;
/// W4A4 GEMM pipeline stages.
pub const GEMM_STAGES: u32 = 4;
/// Most experts the W4A4 schedule holds in shared memory.
pub const GEMM_MAX_EXPERTS: u32 = 1024;

/// Dynamic shared memory of a W4A4 GEMM with `bm`-row tiles: the stages,
/// then per-expert tile prefix, segment starts and ends, then 32 words.
pub const fn gemm_smem_bytes(bm: u32) -> u32 {
    GEMM_STAGES * (bm + GEMM_BN) * (GEMM_BK / 2) + 3 * 4 * (GEMM_MAX_EXPERTS + 1) + 4 * 32
}

/// Bytes of one decode pipeline slot of one warp, `nt` column tiles: a
/// chunk's codes (1 KiB), its scales (128 B) and its activations (`nt` KiB),
/// each lane's pieces where that lane reads them back.
pub const fn fc_slot_bytes(nt: u32) -> u32 {
    1024 + 128 + 1024 * nt
}

/// Default pipeline depth (slots per warp) of the decode FC kernels with
/// `nt` column tiles: 3 blocks of 8 warps (NT = 1), 4 of 4 (NT = 2, by
/// registers) or 3 of 4 (NT = 4) stay resident per SM, with room left in
/// the 228 KiB for L1.
pub const fn fc_stages(_nt: u32) -> u32 {
    3
}

/// Dynamic shared memory of an FC kernel with `nt` column tiles and
/// `stages` slots per warp: each warp's ring of slots, then the reduction
/// area (the partial tiles of all warps but one).
pub const fn fc_smem_bytes(nt: u32, stages: u32) -> u32 {
    fc_warps(nt) * stages * fc_slot_bytes(nt) + fc_red_bytes(nt)
}

/// Words of one warp's partial tile per lane (2 row tiles x `nt` column
/// tiles x 4 accumulators).
pub const fn fc_partial_words(nt: u32) -> u32 {
    2 * nt * 4
}

/// The reduction area: per warp but the first, its partial tile (2 row
/// tiles x `nt` column tiles x 4 accumulators x 32 lanes, f32).
pub const fn fc_red_bytes(nt: u32) -> u32 {
    (fc_warps(nt) - 1) * 2 * nt * 4 * 32 * 4
}

/// Dynamic shared memory of the routing kernel: counts, first slots,
/// cursors and first groups per expert, then the scan's 96 words.
pub const fn route_smem_bytes(experts: u32) -> u32 {
    4 * (4 * experts + 96)
}

/// Threads per prefill GEMM block (4 warps, one 32-row task each).
pub const PF_THREADS: u32 = 128;
/// Pairs per prefill tile.
pub const PF_COLS: u32 = 64;
/// Prefill pipeline stages.
pub const PF_STAGES: u32 = 4;
/// Dynamic shared memory of a prefill GEMM block: per stage 4 KiB of codes,
/// 512 B of scales, 8 KiB of activations.
pub const fn pf_smem_bytes() -> u32 {
    PF_STAGES * (4 * 1024 + 512 + PF_COLS * 2 * 64)
}
