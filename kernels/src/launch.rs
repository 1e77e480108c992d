//! Launch geometry the kernels assume and the host uses: one definition.

/// Threads of the routing block.
pub const ROUTE_THREADS: u32 = 1024;
/// Threads per FC block (4 warps, each on its own share of the work).
pub const FC_THREADS: u32 = 128;
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
/// `nt` column tiles: as deep as lets 24 (NT = 1), 20 (NT = 2) or 12
/// (NT = 4) warps stay resident per SM in 228 KiB of shared memory.
pub const fn fc_stages(nt: u32) -> u32 {
    if nt == 1 {
        4
    } else {
        3
    }
}

/// Dynamic shared memory of an FC kernel with `nt` column tiles and
/// `stages` slots per warp: each warp's ring of slots.
pub const fn fc_smem_bytes(nt: u32, stages: u32) -> u32 {
    (FC_THREADS / 32) * stages * fc_slot_bytes(nt)
}

/// Words of one warp's partial tile of a split task (per lane: 2 row tiles
/// x `nt` column tiles x 4 accumulators).
pub const fn fc_partial_words(nt: u32) -> u32 {
    2 * nt * 4
}

/// Dynamic shared memory of the routing kernel: counts, first slots,
/// cursors and first groups per expert, then the scan's 96 words.
pub const fn route_smem_bytes(experts: u32) -> u32 {
    4 * (4 * experts + 96)
}

/// Pairs per prefill tile.
pub const PF_COLS: u32 = 64;
/// Prefill pipeline stages.
pub const PF_STAGES: u32 = 4;
/// Dynamic shared memory of a prefill GEMM block: per stage 4 KiB of codes,
/// 512 B of scales, 8 KiB of activations.
pub const fn pf_smem_bytes() -> u32 {
    PF_STAGES * (4 * 1024 + 512 + PF_COLS * 2 * 64)
}
