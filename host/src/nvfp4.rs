//! NVFP4 weights on the host: stacked `[E, rows, K]` tensors with their
//! block scales in any of the layouts met in the wild, the w13 orders, and
//! conversions to moe4's canonical form (linear scales, separate gate / up /
//! down tensors).

use crate::error::{shape, unsupported, Error, Result};
use moe4_kernels::e2m1::{code_at, e2m1_to_f32};
use moe4_kernels::e4m3::{e4m3_is_nan, e4m3_to_f32};
use moe4_kernels::scale_layout::{packed_get, packed_words, swizzle_offset, swizzled_len};

/// How a tensor's E4M3 block scales (one per 16 k) are stored.
#[derive(Clone, Debug, PartialEq)]
pub enum BlockScales {
    /// `[E, rows, K/16]` bytes (ModelOpt checkpoints).
    Linear(Vec<u8>),
    /// `[E, rows, ceil(K/64)]` little-endian u32, four scales per word (seed 003).
    PackedU32(Vec<u32>),
    /// FlashInfer / CUTLASS 128x4 swizzle per expert, rows padded to 128 and
    /// scale columns to 4 (seed 004).
    Swizzled(Vec<u8>),
}

/// The order of the rows of a fused gate/up (`w13`) tensor `[E, 2I, H]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum W13Order {
    /// Rows `0..I` gate, `I..2I` up (vLLM).
    GateUp,
    /// Rows `0..I` up, `I..2I` gate (FlashInfer / CUTLASS, seed 004).
    UpGate,
    /// Row `2i` gate, `2i + 1` up (GPT-OSS).
    Interleaved,
}

/// One stacked NVFP4 weight `[experts, rows, k]`: E2M1 codes, block scales
/// and a global scale per expert; `value = e2m1 * scale * global_scale`.
#[derive(Clone, Debug, PartialEq)]
pub struct Nvfp4Weight {
    /// Number of experts.
    pub experts: usize,
    /// Rows (output channels) per expert.
    pub rows: usize,
    /// Columns (the reduction length K).
    pub k: usize,
    /// `[E, rows, k/2]` packed codes, element `2i` in the low nibble.
    pub codes: Vec<u8>,
    /// Block scales.
    pub scales: BlockScales,
    /// `[E]` per-expert global scale (ModelOpt's `weight_scale_2`, or alpha).
    pub global_scale: Vec<f32>,
}

impl Nvfp4Weight {
    /// Checks that every buffer's length matches `(experts, rows, k)` and
    /// that `k` is a multiple of 16.
    pub fn validate(&self, name: &str) -> Result<()> {
        if self.k == 0 || !self.k.is_multiple_of(16) {
            return Err(unsupported(format!("{name}: K"), self.k, "must be a positive multiple of 16 (NVFP4 blocks)"));
        }
        let (e, r, c) = (self.experts, self.rows, self.k / 16);
        shape(format!("{name}.codes ([{e}, {r}, {}] bytes)", self.k / 2), e * r * self.k / 2, self.codes.len())?;
        match &self.scales {
            BlockScales::Linear(s) => shape(format!("{name}.scales (linear [{e}, {r}, {c}])"), e * r * c, s.len())?,
            BlockScales::PackedU32(s) => shape(
                format!("{name}.scales (u32-packed [{e}, {r}, {}])", packed_words(c)),
                e * r * packed_words(c),
                s.len(),
            )?,
            BlockScales::Swizzled(s) => {
                shape(format!("{name}.scales (128x4 swizzled)"), e * swizzled_len(r, c), s.len())?
            }
        }
        shape(format!("{name}.global_scale"), e, self.global_scale.len())
    }

    /// Scale columns (`k / 16`).
    pub fn scale_cols(&self) -> usize {
        self.k / 16
    }

    /// The E4M3 scale of `(expert, row, block)`, whatever the layout.
    pub fn scale(&self, e: usize, r: usize, c: usize) -> u8 {
        let cols = self.scale_cols();
        match &self.scales {
            BlockScales::Linear(s) => s[(e * self.rows + r) * cols + c],
            BlockScales::PackedU32(s) => {
                let w = packed_words(cols);
                packed_get(&s[(e * self.rows + r) * w..][..w], c)
            }
            BlockScales::Swizzled(s) => s[e * swizzled_len(self.rows, cols) + swizzle_offset(r, c, cols)],
        }
    }

    /// The E2M1 code of `(expert, row, k)`.
    pub fn code(&self, e: usize, r: usize, k: usize) -> u8 {
        code_at(&self.codes[(e * self.rows + r) * self.k / 2..], k)
    }

    /// The exact value of one weight.
    pub fn value(&self, e: usize, r: usize, k: usize) -> f64 {
        e2m1_to_f32(self.code(e, r, k)) as f64
            * e4m3_to_f32(self.scale(e, r, k / 16)) as f64
            * self.global_scale[e] as f64
    }

    /// One dequantized row, exactly (`value` for every k).
    pub fn row_f64(&self, e: usize, r: usize, out: &mut [f64]) {
        let g = self.global_scale[e] as f64;
        for (b, chunk) in out[..self.k].chunks_mut(16).enumerate() {
            let s = e4m3_to_f32(self.scale(e, r, b)) as f64;
            for (i, o) in chunk.iter_mut().enumerate() {
                *o = e2m1_to_f32(self.code(e, r, 16 * b + i)) as f64 * s * g;
            }
        }
    }

    /// The same weight with linear scales.
    pub fn to_linear(&self) -> Nvfp4Weight {
        let cols = self.scale_cols();
        let mut s = vec![0u8; self.experts * self.rows * cols];
        for e in 0..self.experts {
            for r in 0..self.rows {
                for c in 0..cols {
                    s[(e * self.rows + r) * cols + c] = self.scale(e, r, c);
                }
            }
        }
        Nvfp4Weight { scales: BlockScales::Linear(s), ..self.clone_without_scales() }
    }

    /// The same weight with u32-packed scales (padding bytes zero).
    pub fn to_packed_u32(&self) -> Nvfp4Weight {
        let cols = self.scale_cols();
        let w = packed_words(cols);
        let mut s = vec![0u32; self.experts * self.rows * w];
        for e in 0..self.experts {
            for r in 0..self.rows {
                for c in 0..cols {
                    s[(e * self.rows + r) * w + c / 4] |= (self.scale(e, r, c) as u32) << (8 * (c % 4));
                }
            }
        }
        Nvfp4Weight { scales: BlockScales::PackedU32(s), ..self.clone_without_scales() }
    }

    /// The same weight with 128x4-swizzled scales (padding entries zero).
    pub fn to_swizzled(&self) -> Nvfp4Weight {
        let cols = self.scale_cols();
        let per = swizzled_len(self.rows, cols);
        let mut s = vec![0u8; self.experts * per];
        for e in 0..self.experts {
            for r in 0..self.rows {
                for c in 0..cols {
                    s[e * per + swizzle_offset(r, c, cols)] = self.scale(e, r, c);
                }
            }
        }
        Nvfp4Weight { scales: BlockScales::Swizzled(s), ..self.clone_without_scales() }
    }

    fn clone_without_scales(&self) -> Nvfp4Weight {
        Nvfp4Weight {
            experts: self.experts,
            rows: self.rows,
            k: self.k,
            codes: self.codes.clone(),
            scales: BlockScales::Linear(Vec::new()),
            global_scale: self.global_scale.clone(),
        }
    }

    /// Rows `rows` (in this order) of every expert, as a new tensor with
    /// linear scales.
    pub fn select_rows(&self, rows: &[usize]) -> Nvfp4Weight {
        let (kb, cols) = (self.k / 2, self.scale_cols());
        let mut codes = Vec::with_capacity(self.experts * rows.len() * kb);
        let mut scales = Vec::with_capacity(self.experts * rows.len() * cols);
        for e in 0..self.experts {
            for &r in rows {
                codes.extend_from_slice(&self.codes[(e * self.rows + r) * kb..][..kb]);
                scales.extend((0..cols).map(|c| self.scale(e, r, c)));
            }
        }
        Nvfp4Weight {
            experts: self.experts,
            rows: rows.len(),
            k: self.k,
            codes,
            scales: BlockScales::Linear(scales),
            global_scale: self.global_scale.clone(),
        }
    }

    /// Checks every scale is a usable UE4M3: not NaN, not negative (-0 is
    /// allowed and means 0).
    pub fn check_scales(&self, name: &str) -> Result<()> {
        for e in 0..self.experts {
            if !self.global_scale[e].is_finite() {
                return Err(Error::InvalidValue {
                    what: format!("{name}.global_scale"),
                    detail: format!("expert {e} has {}", self.global_scale[e]),
                });
            }
            for r in 0..self.rows {
                for c in 0..self.scale_cols() {
                    let s = self.scale(e, r, c);
                    if e4m3_is_nan(s) || (s & 0x80 != 0 && s != 0x80) {
                        return Err(Error::InvalidValue {
                            what: format!("{name}.scales"),
                            detail: format!(
                                "expert {e} row {r} block {c} is {s:#04x} ({}); block scales must be finite and non-negative",
                                e4m3_to_f32(s)
                            ),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// A quantized MoE layer on the host in canonical form: separate gate, up
/// (`[E, I, H]`) and down (`[E, H, I]`) tensors, each with its own global
/// scales (so gate and up may differ exactly).
#[derive(Clone, Debug, PartialEq)]
pub struct Nvfp4Moe {
    /// Gate projection `[E, I, H]`.
    pub gate: Nvfp4Weight,
    /// Up projection `[E, I, H]`.
    pub up: Nvfp4Weight,
    /// Down projection `[E, H, I]`.
    pub down: Nvfp4Weight,
}

impl Nvfp4Moe {
    /// Splits a fused `w13 [E, 2I, H]` in the given row order (its global
    /// scale applies to both halves) and takes `w2 [E, H, I]` as down.
    pub fn from_w13(w13: &Nvfp4Weight, order: W13Order, w2: Nvfp4Weight) -> Result<Nvfp4Moe> {
        w13.validate("w13")?;
        w2.validate("w2")?;
        if !w13.rows.is_multiple_of(2) {
            return Err(unsupported("w13 rows", w13.rows, "must be even (2 * intermediate size)"));
        }
        let i = w13.rows / 2;
        let (gate_rows, up_rows): (Vec<usize>, Vec<usize>) = match order {
            W13Order::GateUp => ((0..i).collect(), (i..2 * i).collect()),
            W13Order::UpGate => ((i..2 * i).collect(), (0..i).collect()),
            W13Order::Interleaved => ((0..i).map(|r| 2 * r).collect(), (0..i).map(|r| 2 * r + 1).collect()),
        };
        let moe = Nvfp4Moe { gate: w13.select_rows(&gate_rows), up: w13.select_rows(&up_rows), down: w2.to_linear() };
        moe.validate()?;
        Ok(moe)
    }

    /// Fuses gate and up back into one `w13` in `order` with linear scales.
    /// Fails if gate and up have different global scales (one `w13` tensor
    /// holds one per expert).
    pub fn to_w13(&self, order: W13Order) -> Result<Nvfp4Weight> {
        if self.gate.global_scale != self.up.global_scale {
            return Err(Error::InvalidValue {
                what: "w13 global scale".into(),
                detail: "gate and up have different global scales; keep them as separate tensors".into(),
            });
        }
        let i = self.gate.rows;
        let (g, u) = (self.gate.to_linear(), self.up.to_linear());
        let (kb, cols) = (self.gate.k / 2, self.gate.k / 16);
        let mut codes = Vec::with_capacity(2 * g.codes.len());
        let mut scales = Vec::with_capacity(2 * i * cols * g.experts);
        let (BlockScales::Linear(gs), BlockScales::Linear(us)) = (&g.scales, &u.scales) else { unreachable!() };
        for e in 0..g.experts {
            for r in 0..2 * i {
                let (src, row) = match order {
                    W13Order::GateUp => (if r < i { (&g, gs) } else { (&u, us) }, r % i),
                    W13Order::UpGate => (if r < i { (&u, us) } else { (&g, gs) }, r % i),
                    W13Order::Interleaved => (if r % 2 == 0 { (&g, gs) } else { (&u, us) }, r / 2),
                };
                codes.extend_from_slice(&src.0.codes[(e * i + row) * kb..][..kb]);
                scales.extend_from_slice(&src.1[(e * i + row) * cols..][..cols]);
            }
        }
        Ok(Nvfp4Weight {
            experts: g.experts,
            rows: 2 * i,
            k: g.k,
            codes,
            scales: BlockScales::Linear(scales),
            global_scale: g.global_scale.clone(),
        })
    }

    /// Experts.
    pub fn experts(&self) -> usize {
        self.gate.experts
    }
    /// Hidden size H.
    pub fn hidden(&self) -> usize {
        self.gate.k
    }
    /// Intermediate size I.
    pub fn intermediate(&self) -> usize {
        self.gate.rows
    }

    /// Checks shapes agree across the three tensors and every scale is valid.
    pub fn validate(&self) -> Result<()> {
        self.gate.validate("gate")?;
        self.up.validate("up")?;
        self.down.validate("down")?;
        let (e, i, h) = (self.gate.experts, self.gate.rows, self.gate.k);
        for (name, w, rows, k) in [("up", &self.up, i, h), ("down", &self.down, h, i)] {
            if w.experts != e || w.rows != rows || w.k != k {
                return Err(Error::Shape {
                    what: format!(
                        "{name} shape [E, rows, K] = [{}, {}, {}], expected [{e}, {rows}, {k}]",
                        w.experts, w.rows, w.k
                    ),
                    expected: e * rows * k,
                    got: w.experts * w.rows * w.k,
                });
            }
        }
        self.gate.check_scales("gate")?;
        self.up.check_scales("up")?;
        self.down.check_scales("down")
    }
}
