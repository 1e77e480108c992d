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

#[cfg(test)]
mod tests {
    use super::*;

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
