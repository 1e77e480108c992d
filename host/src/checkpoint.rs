//! One MoE layer of an NVFP4 safetensors checkpoint, straight into moe4's
//! canonical [`Nvfp4Moe`]: the file is memory-mapped (only the layer's
//! tensors are read, never the whole file), and every missing, mis-typed,
//! mis-shaped or truncated tensor is an error naming it and what was
//! expected.
//!
//! Layouts ([`CheckpointLayout`]):
//! - **ModelOpt** (NVIDIA TensorRT Model Optimizer's HF export), per expert:
//!   `{prefix}.experts.{e}.{gate_proj,up_proj,down_proj}.weight` (U8
//!   `[rows, K/2]`), `.weight_scale` (F8_E4M3 `[rows, K/16]`),
//!   `.weight_scale_2` (F32 scalar), optionally `.input_scale` (F32 scalar,
//!   unused by W4A16).
//! - **Fused** (vLLM / FlashInfer processed weights): `{prefix}.w13_weight`
//!   U8 `[E, 2I, H/2]`, `{prefix}.w13_weight_scale` F8_E4M3/U8 `[E, 2I, H/16]`
//!   (linear) or the 128x4 swizzle flattened per expert, `{prefix}.w13_weight_scale_2`
//!   F32 `[E]` or `[E, 2]`, and the same for `w2` (`[E, H, I/2]`, `[E, H, I/16]`,
//!   `[E]`), w13 rows in the [`W13Order`] the caller names.
//!
//! Gate and up with different global scales (`weight_scale_2`) are kept
//! exactly: moe4 applies each half's own scale (no averaging, no refusal).

use crate::error::{Error, Result};
use crate::nvfp4::{BlockScales, Nvfp4Moe, Nvfp4Weight, W13Order};
use memmap2::Mmap;
use moe4_kernels::scale_layout::swizzled_len;
use safetensors::tensor::{Dtype, Metadata, TensorView, View};
use safetensors::SafeTensors;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

/// How a layer's tensors are named and shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointLayout {
    /// ModelOpt per-expert tensors.
    ModelOpt,
    /// Fused `w13` / `w2` tensors with linear block scales.
    Fused(W13Order),
    /// Fused tensors with 128x4-swizzled block scales (FlashInfer / CUTLASS).
    FusedSwizzled(W13Order),
}

/// A memory-mapped safetensors file.
pub struct Checkpoint {
    path: String,
    map: Mmap,
}

fn ckpt_err(tensor: &str, detail: impl Into<String>) -> Error {
    Error::Checkpoint { tensor: tensor.to_string(), detail: detail.into() }
}

impl Checkpoint {
    /// Maps `path` and checks its header: every tensor's bytes must lie in
    /// the file (a truncated tensor is reported by name).
    pub fn open(path: impl AsRef<Path>) -> Result<Checkpoint> {
        let p = path.as_ref();
        let io = |e| Error::Io { path: p.display().to_string(), source: e };
        let file = File::open(p).map_err(io)?;
        // SAFETY: the map is read-only; moe4 assumes no other process
        // truncates the file while it is mapped (as every mmap reader does).
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let ck = Checkpoint { path: p.display().to_string(), map };
        let (start, meta) = ck.header()?;
        let avail = ck.map.len().saturating_sub(start);
        for (name, info) in meta.tensors() {
            let (a, b) = info.data_offsets;
            if b > avail || a > b {
                return Err(ckpt_err(
                    &name,
                    format!(
                        "is truncated: its bytes {a}..{b} lie past the end of the data ({avail} bytes) in {}",
                        ck.path
                    ),
                ));
            }
        }
        Ok(ck)
    }

    fn header(&self) -> Result<(usize, Metadata)> {
        let (n, meta) = SafeTensors::read_metadata(&self.map[..])
            .map_err(|e| ckpt_err("<header>", format!("{} is not a valid safetensors file: {e:?}", self.path)))?;
        Ok((8 + n, meta))
    }

    /// Names of all tensors.
    pub fn names(&self) -> Result<Vec<String>> {
        Ok(self.header()?.1.tensors().into_keys().collect())
    }

    /// A view of one tensor (no copy).
    pub fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let (start, meta) = self.header()?;
        let info = meta.info(name).ok_or_else(|| ckpt_err(name, format!("is missing from {}", self.path)))?;
        let (a, b) = info.data_offsets;
        let want = info.shape.iter().product::<usize>() * info.dtype.size();
        if b - a != want {
            return Err(ckpt_err(
                name,
                format!("holds {} bytes but shape {:?} of {:?} needs {want}", b - a, info.shape, info.dtype),
            ));
        }
        TensorView::new(info.dtype, info.shape.clone(), &self.map[start + a..start + b])
            .map_err(|e| ckpt_err(name, format!("{e:?}")))
    }

    fn get(&self, name: &str, dtypes: &[Dtype], shape: &[usize]) -> Result<TensorView<'_>> {
        let t = self.tensor(name)?;
        if !dtypes.contains(&t.dtype()) {
            return Err(ckpt_err(name, format!("has dtype {:?}, expected {}", t.dtype(), names(dtypes))));
        }
        if t.shape() != shape {
            return Err(ckpt_err(name, format!("has shape {:?}, expected {shape:?}", t.shape())));
        }
        Ok(t)
    }

    fn scalar_f32(&self, name: &str) -> Result<f32> {
        let t = self.tensor(name)?;
        if t.dtype() != Dtype::F32 {
            return Err(ckpt_err(name, format!("has dtype {:?}, expected F32", t.dtype())));
        }
        if t.shape().iter().product::<usize>() != 1 {
            return Err(ckpt_err(name, format!("has shape {:?}, expected a scalar ([] or [1])", t.shape())));
        }
        Ok(f32::from_le_bytes(t.data()[..4].try_into().expect("4 bytes")))
    }

    /// Loads the MoE layer under `prefix` (e.g. `model.layers.3.mlp`).
    pub fn load_moe(&self, prefix: &str, layout: CheckpointLayout) -> Result<Nvfp4Moe> {
        match layout {
            CheckpointLayout::ModelOpt => self.load_modelopt(prefix),
            CheckpointLayout::Fused(o) => self.load_fused(prefix, o, false),
            CheckpointLayout::FusedSwizzled(o) => self.load_fused(prefix, o, true),
        }
    }

    fn load_modelopt(&self, prefix: &str) -> Result<Nvfp4Moe> {
        // Experts: every e with a gate_proj weight; they must be 0..E.
        let names = self.names()?;
        let pat = format!("{prefix}.experts.");
        let mut ids: Vec<usize> = names
            .iter()
            .filter_map(|n| n.strip_prefix(&pat)?.strip_suffix(".gate_proj.weight")?.parse().ok())
            .collect();
        ids.sort_unstable();
        let experts = ids.len();
        if experts == 0 {
            return Err(ckpt_err(
                &format!("{pat}0.gate_proj.weight"),
                format!("is missing from {}: no experts under {prefix}", self.path),
            ));
        }
        for (want, &got) in ids.iter().enumerate() {
            if want != got {
                return Err(ckpt_err(
                    &format!("{pat}{want}.gate_proj.weight"),
                    format!("is missing (experts found: {} ids up to {})", experts, ids[experts - 1]),
                ));
            }
        }
        let first = self.tensor(&format!("{pat}0.gate_proj.weight"))?;
        let (i, h) = match first.shape() {
            [r, c] => (*r, 2 * c),
            s => {
                return Err(ckpt_err(
                    &format!("{pat}0.gate_proj.weight"),
                    format!("has shape {s:?}, expected [I, H/2]"),
                ))
            }
        };
        let down0 = self.tensor(&format!("{pat}0.down_proj.weight"))?;
        if down0.shape() != [h, i / 2] {
            return Err(ckpt_err(
                &format!("{pat}0.down_proj.weight"),
                format!("has shape {:?}, expected [{h}, {}]", down0.shape(), i / 2),
            ));
        }
        let proj = |name: &str, rows: usize, k: usize| -> Result<Nvfp4Weight> {
            let mut codes = Vec::with_capacity(experts * rows * k / 2);
            let mut scales = Vec::with_capacity(experts * rows * k / 16);
            let mut global = Vec::with_capacity(experts);
            for e in 0..experts {
                let base = format!("{pat}{e}.{name}");
                codes.extend_from_slice(
                    self.get(&format!("{base}.weight"), &[Dtype::U8, Dtype::I8], &[rows, k / 2])?.data(),
                );
                scales.extend_from_slice(
                    self.get(&format!("{base}.weight_scale"), &[Dtype::F8_E4M3, Dtype::U8], &[rows, k / 16])?.data(),
                );
                global.push(self.scalar_f32(&format!("{base}.weight_scale_2"))?);
            }
            Ok(Nvfp4Weight { experts, rows, k, codes, scales: BlockScales::Linear(scales), global_scale: global })
        };
        let moe =
            Nvfp4Moe { gate: proj("gate_proj", i, h)?, up: proj("up_proj", i, h)?, down: proj("down_proj", h, i)? };
        moe.validate()?;
        Ok(moe)
    }

    fn load_fused(&self, prefix: &str, order: W13Order, swizzled: bool) -> Result<Nvfp4Moe> {
        let w13n = format!("{prefix}.w13_weight");
        let (e, two_i, h) = match self.tensor(&w13n)?.shape() {
            [e, r, c] => (*e, *r, 2 * c),
            s => return Err(ckpt_err(&w13n, format!("has shape {s:?}, expected [E, 2I, H/2]"))),
        };
        let i = two_i / 2;
        let weight = |name: &str, rows: usize, k: usize| -> Result<(Vec<u8>, BlockScales, Vec<f32>)> {
            let codes = self
                .get(&format!("{prefix}.{name}_weight"), &[Dtype::U8, Dtype::I8], &[e, rows, k / 2])?
                .data()
                .to_vec();
            let sn = format!("{prefix}.{name}_weight_scale");
            let scales = if swizzled {
                let t = self.tensor(&sn)?;
                let want = e * swizzled_len(rows, k / 16);
                if t.data().len() != want || t.dtype().size() != 1 {
                    return Err(ckpt_err(
                        &sn,
                        format!("has {:?} {:?}, expected {want} one-byte 128x4-swizzled scales", t.dtype(), t.shape()),
                    ));
                }
                BlockScales::Swizzled(t.data().to_vec())
            } else {
                BlockScales::Linear(self.get(&sn, &[Dtype::F8_E4M3, Dtype::U8], &[e, rows, k / 16])?.data().to_vec())
            };
            let gn = format!("{prefix}.{name}_weight_scale_2");
            let g = self.tensor(&gn)?;
            if g.dtype() != Dtype::F32 || (g.shape() != [e] && g.shape() != [e, 2]) {
                return Err(ckpt_err(
                    &gn,
                    format!("has {:?} {:?}, expected F32 [{e}] or [{e}, 2]", g.dtype(), g.shape()),
                ));
            }
            let v: Vec<f32> = g.data().chunks(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
            Ok((codes, scales, v))
        };
        let (c13, s13, g13) = weight("w13", two_i, h)?;
        let (c2, s2, g2) = weight("w2", h, i)?;
        let per_half = |g: &[f32], half: usize| -> Vec<f32> {
            if g.len() == e {
                g.to_vec()
            } else {
                (0..e).map(|x| g[2 * x + half]).collect()
            }
        };
        let w13 =
            Nvfp4Weight { experts: e, rows: two_i, k: h, codes: c13, scales: s13, global_scale: per_half(&g13, 0) };
        if g2.len() != e {
            return Err(ckpt_err(
                &format!("{prefix}.w2_weight_scale_2"),
                format!("has {} values, expected [{e}]", g2.len()),
            ));
        }
        let w2 = Nvfp4Weight { experts: e, rows: h, k: i, codes: c2, scales: s2, global_scale: g2 };
        let mut moe = Nvfp4Moe::from_w13(&w13, order, w2)?;
        if g13.len() == 2 * e {
            // [E, 2]: column 0 belongs to the first half of the rows in this
            // order, column 1 to the second (interleaved: even / odd rows).
            let (first, second) = (per_half(&g13, 0), per_half(&g13, 1));
            let (g, u) = match order {
                W13Order::GateUp | W13Order::Interleaved => (first, second),
                W13Order::UpGate => (second, first),
            };
            moe.gate.global_scale = g;
            moe.up.global_scale = u;
        }
        Ok(moe)
    }
}

fn names(d: &[Dtype]) -> String {
    d.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(" or ")
}

struct Owned {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Owned {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Saves `moe` under `prefix` in the ModelOpt per-expert layout (linear
/// F8_E4M3 block scales, scalar F32 `weight_scale_2`), so tests and users
/// can make checkpoints from their own weights ([`crate::quant`]).
pub fn save_modelopt(path: impl AsRef<Path>, prefix: &str, moe: &Nvfp4Moe) -> Result<()> {
    moe.validate()?;
    let mut t: HashMap<String, Owned> = HashMap::new();
    for (name, w) in [("gate_proj", &moe.gate), ("up_proj", &moe.up), ("down_proj", &moe.down)] {
        let lin = w.to_linear();
        let BlockScales::Linear(sc) = &lin.scales else { unreachable!("to_linear") };
        let (rows, k) = (w.rows, w.k);
        for e in 0..w.experts {
            let base = format!("{prefix}.experts.{e}.{name}");
            let codes = w.codes[e * rows * k / 2..(e + 1) * rows * k / 2].to_vec();
            let scales = sc[e * rows * k / 16..(e + 1) * rows * k / 16].to_vec();
            t.insert(format!("{base}.weight"), Owned { dtype: Dtype::U8, shape: vec![rows, k / 2], data: codes });
            t.insert(
                format!("{base}.weight_scale"),
                Owned { dtype: Dtype::F8_E4M3, shape: vec![rows, k / 16], data: scales },
            );
            t.insert(
                format!("{base}.weight_scale_2"),
                Owned { dtype: Dtype::F32, shape: vec![], data: w.global_scale[e].to_le_bytes().to_vec() },
            );
        }
    }
    save(path, &t)
}

/// Saves named tensors (used by [`save_modelopt`] and `moe4 run`).
fn save(path: impl AsRef<Path>, t: &HashMap<String, Owned>) -> Result<()> {
    let p = path.as_ref();
    safetensors::serialize_to_file(t.iter().map(|(k, v)| (k.as_str(), v)), &None, p)
        .map_err(|e| Error::Io { path: p.display().to_string(), source: std::io::Error::other(format!("{e:?}")) })
}

/// A flat tensor to write with [`save_tensors`].
pub struct TensorData {
    /// Element type.
    pub dtype: Dtype,
    /// Shape.
    pub shape: Vec<usize>,
    /// Little-endian bytes.
    pub data: Vec<u8>,
}

/// Saves named tensors to a safetensors file.
pub fn save_tensors(path: impl AsRef<Path>, tensors: Vec<(String, TensorData)>) -> Result<()> {
    let t: HashMap<String, Owned> =
        tensors.into_iter().map(|(k, v)| (k, Owned { dtype: v.dtype, shape: v.shape, data: v.data })).collect();
    save(path, &t)
}

pub use safetensors::tensor::Dtype as SafetensorsDtype;
