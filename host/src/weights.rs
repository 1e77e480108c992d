//! [`MoeWeights`]: a quantized MoE layer on the GPU, converted once at load
//! time from any supported layout into the decode kernels' tile layout
//! (`moe4_kernels::tile`), with the codes of zero-scale blocks cleared (so
//! the bf16 path's scale trick stays exact, see `moe4_kernels::decode`).

use crate::error::{unsupported, Error, Result};
use crate::gpu::Gpu;
use crate::nvfp4::{Nvfp4Moe, Nvfp4Weight, W13Order};
use crate::reference::Activation;
use cudarc::driver::{CudaSlice, CudaStream};
use moe4_kernels::decode::pack_word;
use moe4_kernels::tile::{
    code_offset, element, fc1_row, fc2_row, scale_element, scale_offset, CHUNK_CODE_BYTES, CHUNK_SCALE_BYTES, KCHUNK,
    KSTEPS, K_MULTIPLE, MTILES, TASK_ROWS,
};
use std::sync::Arc;

/// Largest number of experts the routing kernel handles.
pub const MAX_EXPERTS: usize = 1024;

/// The limits the decode kernels take, checked by [`MoeWeights::new`].
pub fn check_dims(experts: usize, hidden: usize, inter: usize) -> Result<()> {
    if experts == 0 || experts > MAX_EXPERTS {
        return Err(unsupported("experts", experts, format!("must be 1..={MAX_EXPERTS}")));
    }
    if hidden == 0 || !hidden.is_multiple_of(K_MULTIPLE) {
        return Err(unsupported("hidden size H", hidden, format!("must be a positive multiple of {K_MULTIPLE}")));
    }
    if inter == 0 || !inter.is_multiple_of(K_MULTIPLE) {
        return Err(unsupported("intermediate size I", inter, format!("must be a positive multiple of {K_MULTIPLE}")));
    }
    if hidden > (1 << 20) || inter > (1 << 20) {
        return Err(unsupported("H or I", hidden.max(inter), "must be at most 2^20"));
    }
    Ok(())
}

/// Kernel-layout bytes of one weight matrix (all experts): (codes, scales).
/// `row_of(task, mtile, tile_row)` names the source tensor and row.
fn pack<'a>(
    experts: usize,
    rows: usize,
    k: usize,
    row_of: impl Fn(usize, usize, usize) -> (&'a Nvfp4Weight, usize) + Sync,
) -> (Vec<u8>, Vec<u8>) {
    let tasks = rows / TASK_ROWS;
    let chunks = k / KCHUNK;
    let per_codes = tasks * chunks * CHUNK_CODE_BYTES;
    let per_scales = tasks * chunks * CHUNK_SCALE_BYTES;
    let mut codes = vec![0u8; experts * per_codes];
    let mut scales = vec![0u8; experts * per_scales];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_thread = experts.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (ci, (cc, sc)) in
            codes.chunks_mut(per_thread * per_codes).zip(scales.chunks_mut(per_thread * per_scales)).enumerate()
        {
            let row_of = &row_of;
            s.spawn(move || {
                for j in 0..cc.len() / per_codes {
                    let e = ci * per_thread + j;
                    for task in 0..tasks {
                        for chunk in 0..chunks {
                            let co = code_offset(j, task, chunk, tasks, chunks);
                            let so = scale_offset(j, task, chunk, tasks, chunks);
                            for mt in 0..MTILES {
                                for lane in 0..32 {
                                    for step in 0..KSTEPS {
                                        let mut c8 = [0u8; 8];
                                        for o in 0..4 {
                                            for h in 0..2 {
                                                let (ri, kk) = element(lane, step, o, h);
                                                let (w, row) = row_of(task, mt, ri);
                                                let kabs = chunk * KCHUNK + kk;
                                                // A zero (or -0) scale zeroes the block.
                                                if w.scale(e, row, kabs / 16) & 0x7F != 0 {
                                                    c8[2 * o + h] = w.code(e, row, kabs);
                                                }
                                            }
                                        }
                                        let word = pack_word(c8);
                                        let at = co + mt * 512 + lane * 16 + step * 4;
                                        cc[at..at + 4].copy_from_slice(&word.to_le_bytes());
                                    }
                                }
                            }
                            for lane in 0..32 {
                                for jb in 0..4 {
                                    let (mt, ri, blk) = scale_element(lane, jb);
                                    let (w, row) = row_of(task, mt, ri);
                                    let s = w.scale(e, row, chunk * KCHUNK / 16 + blk);
                                    sc[so + lane * 4 + jb] = if s == 0x80 { 0 } else { s };
                                }
                            }
                        }
                    }
                }
            });
        }
    });
    (codes, scales)
}

/// Host bytes of a layer in the decode kernels' layout.
pub(crate) struct PackedLayer {
    pub fc1_codes: Vec<u8>,
    pub fc1_scales: Vec<u8>,
    pub fc2_codes: Vec<u8>,
    pub fc2_scales: Vec<u8>,
}

/// Converts a canonical layer to the kernels' layout (pure, on the CPU).
pub(crate) fn pack_layer(w: &Nvfp4Moe) -> Result<PackedLayer> {
    w.validate()?;
    let (e, h, i) = (w.experts(), w.hidden(), w.intermediate());
    check_dims(e, h, i)?;
    let (gate, up, down) = (w.gate.to_linear(), w.up.to_linear(), w.down.to_linear());
    let (fc1_codes, fc1_scales) = pack(e, 2 * i, h, |task, mt, ri| {
        let (is_up, ch) = fc1_row(task, mt, ri);
        (if is_up { &up } else { &gate }, ch)
    });
    let (fc2_codes, fc2_scales) = pack(e, h, i, |task, mt, ri| (&down, fc2_row(task, mt, ri)));
    Ok(PackedLayer { fc1_codes, fc1_scales, fc2_codes, fc2_scales })
}

/// A quantized MoE layer resident on the GPU, ready for
/// [`MoeWeights::forward`].
pub struct MoeWeights {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) experts: usize,
    pub(crate) hidden: usize,
    pub(crate) inter: usize,
    pub(crate) activation: Activation,
    pub(crate) fc1_codes: CudaSlice<u8>,
    pub(crate) fc1_scales: CudaSlice<u8>,
    pub(crate) fc2_codes: CudaSlice<u8>,
    pub(crate) fc2_scales: CudaSlice<u8>,
    pub(crate) alpha_gate: CudaSlice<f32>,
    pub(crate) alpha_up: CudaSlice<f32>,
    pub(crate) alpha_down: CudaSlice<f32>,
}

impl std::fmt::Debug for MoeWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MoeWeights")
            .field("experts", &self.experts)
            .field("hidden", &self.hidden)
            .field("intermediate", &self.inter)
            .field("activation", &self.activation)
            .finish()
    }
}

impl MoeWeights {
    /// Uploads a layer given as separate gate / up / down tensors (any scale
    /// layout; gate and up may have different global scales: each is applied
    /// exactly to its own half).
    pub fn new(gpu: &Arc<Gpu>, stream: &Arc<CudaStream>, w: &Nvfp4Moe, activation: Activation) -> Result<MoeWeights> {
        let packed = pack_layer(w)?;
        Self::upload(
            gpu,
            stream,
            &packed,
            w.experts(),
            w.hidden(),
            w.intermediate(),
            activation,
            [&w.gate.global_scale, &w.up.global_scale, &w.down.global_scale],
        )
    }

    /// Uploads a layer given as a fused `w13 [E, 2I, H]` in `order` and
    /// `w2 [E, H, I]`.
    pub fn from_w13(
        gpu: &Arc<Gpu>,
        stream: &Arc<CudaStream>,
        w13: &Nvfp4Weight,
        order: W13Order,
        w2: &Nvfp4Weight,
        activation: Activation,
    ) -> Result<MoeWeights> {
        let moe = Nvfp4Moe::from_w13(w13, order, w2.clone())?;
        Self::new(gpu, stream, &moe, activation)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn upload(
        gpu: &Arc<Gpu>,
        stream: &Arc<CudaStream>,
        p: &PackedLayer,
        experts: usize,
        hidden: usize,
        inter: usize,
        activation: Activation,
        alphas: [&[f32]; 3],
    ) -> Result<MoeWeights> {
        check_dims(experts, hidden, inter)?;
        for a in alphas {
            if a.len() != experts {
                return Err(Error::Shape { what: "global scales".into(), expected: experts, got: a.len() });
            }
        }
        Ok(MoeWeights {
            gpu: gpu.clone(),
            experts,
            hidden,
            inter,
            activation,
            fc1_codes: stream.clone_htod(&p.fc1_codes)?,
            fc1_scales: stream.clone_htod(&p.fc1_scales)?,
            fc2_codes: stream.clone_htod(&p.fc2_codes)?,
            fc2_scales: stream.clone_htod(&p.fc2_scales)?,
            alpha_gate: stream.clone_htod(alphas[0])?,
            alpha_up: stream.clone_htod(alphas[1])?,
            alpha_down: stream.clone_htod(alphas[2])?,
        })
    }

    /// Experts.
    pub fn experts(&self) -> usize {
        self.experts
    }
    /// Hidden size H.
    pub fn hidden(&self) -> usize {
        self.hidden
    }
    /// Intermediate size I.
    pub fn intermediate(&self) -> usize {
        self.inter
    }
    /// The gated activation.
    pub fn activation(&self) -> Activation {
        self.activation
    }
    /// The GPU the weights live on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
    /// Bytes of one expert's weights and scales (FC1 + FC2).
    pub fn expert_bytes(&self) -> usize {
        3 * self.hidden * self.inter * 9 / 16
    }
}

impl MoeWeights {
    /// A layer of the given shape filled with pseudo-random codes and
    /// in-range scales directly on the GPU (for benchmarks: multi-GB layers
    /// without a host round trip). Global scales are `alpha`.
    pub fn random(
        gpu: &Arc<Gpu>,
        stream: &Arc<CudaStream>,
        experts: usize,
        hidden: usize,
        inter: usize,
        activation: Activation,
        alpha: f32,
        seed: u32,
    ) -> Result<MoeWeights> {
        check_dims(experts, hidden, inter)?;
        let n = experts * hidden * inter;
        let mut fc1_codes = stream.alloc_zeros::<u8>(n)?; // 2I x H / 2
        let mut fc2_codes = stream.alloc_zeros::<u8>(n / 2)?;
        let mut fc1_scales = stream.alloc_zeros::<u8>(n / 8)?;
        let mut fc2_scales = stream.alloc_zeros::<u8>(n / 16)?;
        // Codes: any bits; scales: E4M3 0x28..=0x47 (0.19..3.75, never 0 or NaN).
        crate::bench::fill(gpu, stream, &mut fc1_codes, seed, u32::MAX, 0)?;
        crate::bench::fill(gpu, stream, &mut fc2_codes, seed ^ 0x55, u32::MAX, 0)?;
        crate::bench::fill(gpu, stream, &mut fc1_scales, seed ^ 0xAA, 0x1F1F_1F1F, 0x2828_2828)?;
        crate::bench::fill(gpu, stream, &mut fc2_scales, seed ^ 0xFF, 0x1F1F_1F1F, 0x2828_2828)?;
        let a = vec![alpha; experts];
        Ok(MoeWeights {
            gpu: gpu.clone(),
            experts,
            hidden,
            inter,
            activation,
            fc1_codes,
            fc1_scales,
            fc2_codes,
            fc2_scales,
            alpha_gate: stream.clone_htod(&a)?,
            alpha_up: stream.clone_htod(&a)?,
            alpha_down: stream.clone_htod(&a)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::quantize_nvfp4;
    use moe4_kernels::decode::unpack_code;

    #[test]
    fn packing_puts_every_weight_where_the_kernel_reads_it() {
        let (e, h, i) = (2, 64, 128);
        let rnd = |n: usize, seed: u32| -> Vec<f32> {
            (0..n).map(|j| (((j as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0).collect()
        };
        let moe = Nvfp4Moe {
            gate: quantize_nvfp4(&rnd(e * i * h, 1), e, i, h).unwrap(),
            up: quantize_nvfp4(&rnd(e * i * h, 2), e, i, h).unwrap(),
            down: quantize_nvfp4(&rnd(e * h * i, 3), e, h, i).unwrap(),
        };
        let p = pack_layer(&moe).unwrap();
        let (tasks, chunks) = (2 * i / TASK_ROWS, h / KCHUNK);
        for ex in 0..e {
            for task in 0..tasks {
                for chunk in 0..chunks {
                    for mt in 0..MTILES {
                        for lane in 0..32 {
                            for step in 0..KSTEPS {
                                let at = code_offset(ex, task, chunk, tasks, chunks) + mt * 512 + lane * 16 + step * 4;
                                let word = u32::from_le_bytes(p.fc1_codes[at..at + 4].try_into().unwrap());
                                for o in 0..4 {
                                    for hh in 0..2 {
                                        let (ri, kk) = element(lane, step, o, hh);
                                        let (is_up, ch) = fc1_row(task, mt, ri);
                                        let w = if is_up { &moe.up } else { &moe.gate };
                                        assert_eq!(unpack_code(word, o, hh), w.code(ex, ch, chunk * 64 + kk));
                                    }
                                }
                            }
                        }
                        for lane in 0..32 {
                            for jb in 0..4 {
                                let (mt, ri, blk) = scale_element(lane, jb);
                                let (is_up, ch) = fc1_row(task, mt, ri);
                                let w = if is_up { &moe.up } else { &moe.gate };
                                let so = scale_offset(ex, task, chunk, tasks, chunks) + lane * 4 + jb;
                                assert_eq!(p.fc1_scales[so], w.scale(ex, ch, chunk * 4 + blk));
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(p.fc2_codes.len(), e * h * i / 2);
        assert_eq!(p.fc2_scales.len(), e * h * i / 16);
    }

    #[test]
    fn limits_are_named() {
        assert!(check_dims(0, 64, 64).unwrap_err().to_string().contains("experts"));
        assert!(check_dims(1025, 64, 64).unwrap_err().to_string().contains("1024"));
        let e = check_dims(8, 2880, 100).unwrap_err().to_string();
        assert!(e.contains("intermediate size I = 100") && e.contains("64"), "{e}");
        assert!(check_dims(8, 2880, 2880).is_ok());
    }
}
