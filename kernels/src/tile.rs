//! The NVFP4 weight layout the decode kernels stream, and who holds what.
//!
//! A weight matrix `[rows, K]` (rows = output channels) is cut into *tasks*
//! of [`TASK_ROWS`] = 32 rows (two 16-row `mma` tiles) and, along K, into
//! *chunks* of [`KCHUNK`] = 64. One chunk of one task is 1 KiB of codes and
//! 128 bytes of scales, contiguous, so a warp reads each with one 16-byte
//! (codes) and one 4-byte (scales) load per lane, fully coalesced:
//!
//! ```text
//! codes:  [expert][task][chunk][mtile 0..2][lane 0..32][step 0..4] u32
//! scales: [expert][task][chunk][lane 0..32][byte 0..4]             u8 (E4M3)
//! ```
//!
//! Lane `(g, t)` (`g = lane / 4`, `t = lane % 4`) of a warp owns, in every
//! chunk, tile rows `g` and `g + 8` and the 16 consecutive k
//! `16t .. 16t + 16`: exactly one scale block per row. The four `mma` k-steps
//! of the chunk take k `16t + 4s .. 16t + 4s + 4` (step `s`) from each lane;
//! the k order inside an `mma` is a permutation that the activations
//! (`B`) follow too, so the lane's activations for a chunk are the 32
//! contiguous bytes `x[16t .. 16t + 16]`.
//!
//! Word `s` of a lane's 16 bytes packs ([`crate::decode::pack_word`]) the
//! fragment registers of step `s`: `a0` = row g, k+0/k+1; `a1` = row g+8,
//! k+0/k+1; `a2` = row g, k+2/k+3; `a3` = row g+8, k+2/k+3 (k = 16t + 4s).
//! Scale byte `j` of the lane is (mtile `j / 2`, row `g + 8 * (j % 2)`).

/// K per chunk (one pass of a warp over its 16-byte lane vector).
pub const KCHUNK: usize = 64;
/// `mma.m16n8k16` steps per chunk.
pub const KSTEPS: usize = 4;
/// 16-row `mma` tiles per task.
pub const MTILES: usize = 2;
/// Rows per task.
pub const TASK_ROWS: usize = 16 * MTILES;
/// Code bytes of one chunk of one task.
pub const CHUNK_CODE_BYTES: usize = MTILES * 32 * 16;
/// Scale bytes of one chunk of one task.
pub const CHUNK_SCALE_BYTES: usize = 32 * 4;
/// K must be a multiple of this.
pub const K_MULTIPLE: usize = KCHUNK;

/// Where weight `(o, h)` of word `step` of `lane` sits: (row within the
/// 16-row tile, k within the chunk).
#[inline]
pub const fn element(lane: usize, step: usize, o: usize, h: usize) -> (usize, usize) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (o & 1), 16 * t + 4 * step + 2 * (o >> 1) + h)
}

/// (mtile, row within the tile, scale block within the chunk) of scale byte
/// `j` of `lane`.
#[inline]
pub const fn scale_element(lane: usize, j: usize) -> (usize, usize, usize) {
    (j / 2, lane / 4 + 8 * (j % 2), lane % 4)
}

/// Byte offset of `(expert, task, chunk)`'s codes.
#[inline]
pub const fn code_offset(expert: usize, task: usize, chunk: usize, tasks: usize, chunks: usize) -> usize {
    ((expert * tasks + task) * chunks + chunk) * CHUNK_CODE_BYTES
}

/// Byte offset of `(expert, task, chunk)`'s scales.
#[inline]
pub const fn scale_offset(expert: usize, task: usize, chunk: usize, tasks: usize, chunks: usize) -> usize {
    ((expert * tasks + task) * chunks + chunk) * CHUNK_SCALE_BYTES
}

/// Which row of the fused gate/up matrix tile row `i` of mtile `mt` of FC1
/// task `task` is: `(is_up, channel)`. Rows 0..8 of a tile are gate rows and
/// 8..16 the up rows of the same 8 channels, so the thread that holds a
/// gate accumulator also holds the matching up one (`c0/c1` vs `c2/c3`).
#[inline]
pub const fn fc1_row(task: usize, mt: usize, i: usize) -> (bool, usize) {
    (i >= 8, 16 * task + 8 * mt + (i % 8))
}

/// FC2 tile row `i` of mtile `mt` of task `task` is output row
/// `32 task + 16 mt + i`.
#[inline]
pub const fn fc2_row(task: usize, mt: usize, i: usize) -> usize {
    TASK_ROWS * task + 16 * mt + i
}

/// The `wgmma` k order (sm_90a prefill): where natural element `k` of a
/// 64-k chunk goes in the chunk's *permuted* layout, in which the 32 bytes
/// of `mma` k-step `s` are bytes `32 s .. 32 s + 32` in the order the
/// step's A fragments ([`element`]) hold their k: 4-byte word `8t + m`
/// (k `16t + 2m`, `+1`) moves to word `4m + t`. `wgmma` reads B in that
/// order from shared memory, so rows stored permuted in global memory copy
/// with plain 16-byte copies.
#[inline]
pub const fn wgmma_permuted(k: usize) -> usize {
    let (w, u) = (k / 2, k % 2);
    let (t, m) = (w / 8, w % 8);
    2 * (4 * m + t) + u
}

/// Byte offset of block-local FC1 channel `ch` (0..128: task `ch / 16` of
/// the block's 8) in column `col`'s row of the `wgmma` prefill epilogue's
/// staging tile (the `wgmma` prefill epilogue), rows `stride` bytes
/// apart: the h row piece in the [`wgmma_permuted`] order of each 64-channel
/// chunk. A block's first channel is a multiple of 128, so the piece's
/// permutation is the h row's.
#[inline]
pub const fn fc1_stage_at(col: u32, ch: u32, stride: u32) -> u32 {
    col * stride + 2 * ((ch & !63) + wgmma_permuted((ch & 63) as usize) as u32)
}

/// Byte offset in the FC2 staging tile of the 16 bytes lane `lane` of warp
/// `w` addresses in the `stmatrix .x4 .trans` of column tile `j`: matrix
/// `q = lane / 8` is 16-row tile `q / 2`, rows `8 (q % 2) ..` of the warp's
/// task (block rows `32 w + 8 q ..`), and its column `i = lane % 8` (pair
/// column `8 j + i`) goes to that column's row, 8 rows in order.
#[inline]
pub const fn fc2_stage_row(lane: u32, j: u32, w: u32, stride: u32) -> u32 {
    (8 * j + lane % 8) * stride + 2 * (32 * w + 8 * (lane / 8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::{PFW_OUT_STRIDE_FC1, PFW_OUT_STRIDE_FC2};

    #[test]
    fn fc1_staging_is_the_h_row_piece() {
        // Every block channel of a column lands once, where the global h
        // row has it, counted from the block's first channel.
        for rb in 0..3u32 {
            let mut seen = [false; 128];
            for ch in 0..128u32 {
                let at = fc1_stage_at(5, ch, PFW_OUT_STRIDE_FC1) - 5 * PFW_OUT_STRIDE_FC1;
                assert_eq!(at % 2, 0);
                let pos = (at / 2) as usize;
                assert!(!seen[pos]);
                seen[pos] = true;
                let global = 128 * rb + ch;
                let want = (global & !63) + wgmma_permuted((global & 63) as usize) as u32;
                assert_eq!(128 * rb + pos as u32, want, "block {rb} channel {ch}");
            }
            // The first 4 or 8 tasks (what a block holds: I is a multiple
            // of 64) fill the first 64 or 128 positions: the bulk copy's
            // 32 x ntask bytes.
            for ntask in [4u32, 8] {
                let mut got: [bool; 128] = [false; 128];
                for ch in 0..16 * ntask {
                    got[(fc1_stage_at(0, ch, PFW_OUT_STRIDE_FC1) / 2) as usize] = true;
                }
                assert!(got.iter().enumerate().all(|(i, &g)| g == (i < (16 * ntask) as usize)));
            }
        }
        const { assert!(2 * 128 <= PFW_OUT_STRIDE_FC1) };
    }

    #[test]
    fn fc2_stmatrix_rows_put_each_output_in_its_pair_row() {
        // stmatrix .trans: register q of lane (g, t) holds matrix q's row g,
        // columns 2t, 2t + 1; the 16 bytes lane 8q + i addresses receive
        // column i, rows 0..8. With the FC2 fragment (row g of matrix q =
        // block row 32 w + 8 q + g), output (row, column) must land at
        // column x stride + 2 row.
        let s = PFW_OUT_STRIDE_FC2;
        for w in 0..8u32 {
            for j in 0..16u32 {
                for q in 0..4u32 {
                    let mut groups = [false; 8];
                    for i in 0..8u32 {
                        let at = fc2_stage_row(8 * q + i, j, w, s);
                        assert_eq!(at % 16, 0, "16-byte aligned");
                        for r in 0..8u32 {
                            let (row, col) = (32 * w + 8 * q + r, 8 * j + i);
                            assert_eq!(at + 2 * r, col * s + 2 * row);
                        }
                        // The 8 rows of one matrix hit 8 different 16-byte
                        // bank groups.
                        let bank_group = ((at / 16) % 8) as usize;
                        assert!(!groups[bank_group], "bank conflict w {w} j {j} q {q}");
                        groups[bank_group] = true;
                    }
                }
            }
        }
        const { assert!(2 * 256 <= PFW_OUT_STRIDE_FC2) };
    }

    #[test]
    fn wgmma_order_matches_the_a_fragments() {
        // A bijection on 0..64 ...
        let mut seen = [false; KCHUNK];
        for k in 0..KCHUNK {
            assert!(!seen[wgmma_permuted(k)]);
            seen[wgmma_permuted(k)] = true;
        }
        // ... under which k-step s's 16 k (in wgmma's order: k' = 2t + h for
        // fragment word o = 0/1, 2t + 8 + h for o = 2/3) are bytes 32s..32s+32.
        for lane in 0..4 {
            for step in 0..KSTEPS {
                for o in [0, 2] {
                    for h in 0..2 {
                        let (_, k) = element(lane, step, o, h);
                        let kp = 2 * lane + 8 * (o >> 1) + h;
                        assert_eq!(wgmma_permuted(k), 16 * step + kp, "lane {lane} step {step} o {o} h {h}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_chunk_covers_every_row_and_k_once() {
        let mut seen = [[false; KCHUNK]; 16];
        for lane in 0..32 {
            for step in 0..KSTEPS {
                for o in 0..4 {
                    for h in 0..2 {
                        let (r, k) = element(lane, step, o, h);
                        assert!(!seen[r][k]);
                        seen[r][k] = true;
                    }
                }
            }
        }
        assert!(seen.iter().all(|r| r.iter().all(|&x| x)));
    }

    #[test]
    fn each_lane_row_sees_one_scale_block() {
        for lane in 0..32 {
            for step in 0..KSTEPS {
                for o in 0..4 {
                    for h in 0..2 {
                        let (r, k) = element(lane, step, o, h);
                        for mt in 0..MTILES {
                            let (smt, sr, blk) = scale_element(lane, 2 * mt + (o & 1));
                            assert_eq!((smt, sr, blk), (mt, r, k / 16));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fc1_tasks_pair_gate_and_up_rows() {
        let mut gate = [false; 64];
        let mut up = [false; 64];
        for task in 0..4 {
            for mt in 0..MTILES {
                for i in 0..16 {
                    let (is_up, ch) = fc1_row(task, mt, i);
                    let v = if is_up { &mut up } else { &mut gate };
                    assert!(!v[ch]);
                    v[ch] = true;
                    if i < 8 {
                        assert_eq!(fc1_row(task, mt, i + 8), (true, ch));
                    }
                }
            }
        }
        assert!(gate.iter().chain(up.iter()).all(|&x| x));
        assert_eq!(fc2_row(1, 1, 3), 32 + 16 + 3);
    }
}
