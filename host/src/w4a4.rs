//! The W4A4 INT4 grouped GEMM on the GPU:
//! `out[m, n] = s_a[m] * s_w[e][n] * sum_k a[m, k] b[e][n, k]`
//! (times an optional per-row scale, e.g. a
//! routing weight) for every row `m` of expert `e`'s segment
//! `offsets[e]..offsets[e+1]`, with the scales applied in the GEMM's
//! epilogue and the offsets read on the device (no host copy: the call is
//! CUDA-graph capturable). Plus the activation quantizer that feeds it, so a
//! server goes from 16-bit activations to the output in two launches.
//!
//! Layouts (DESIGN.md §3): `a [rows, K/2]`, `b [E, N, K/2]` signed INT4, two
//! per byte, element `2i` low; `s_a [rows]`, `s_w [E, N]` f32;
//! `offsets [E + 1]` i64. Limits: `K` a positive multiple of 64, `N` a
//! positive multiple of 8, `1 <= E <= 1024`.
//!
//! Tiles of 128 rows (128 or more rows per expert on average) run on
//! `wgmma` s8 where the build has it (sm_90a), on `mma.sync` elsewhere.

use crate::dtype::Half;
use crate::error::{shape, unsupported, Error, Result};
use crate::gpu::Gpu;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};
use moe4_kernels::launch::{gemm_smem_bytes, gemm_wg_smem_bytes, GEMM_MAX_EXPERTS, GEMM_THREADS};
use moe4_kernels::params::{DequantParams, QuantParams, W4A4Params};
use std::sync::Arc;

/// The W4A4 kernels on one GPU, with the device counter of malformed
/// offsets.
pub struct W4A4 {
    gpu: Arc<Gpu>,
    errors: CudaSlice<u32>,
    wgmma: bool,
}

/// Operands of one grouped GEMM.
pub struct GemmArgs<'a> {
    /// `[rows, K/2]` packed INT4 activations.
    pub a: &'a CudaView<'a, u8>,
    /// `[E, N, K/2]` packed INT4 weights.
    pub b: &'a CudaView<'a, u8>,
    /// `[rows]` per-token scales.
    pub s_a: &'a CudaView<'a, f32>,
    /// `[E, N]` per-channel scales.
    pub s_w: &'a CudaView<'a, f32>,
    /// `[E + 1]` segment offsets.
    pub offsets: &'a CudaView<'a, i64>,
    /// Optional `[rows]` extra scale (e.g. the routing weight).
    pub row_scale: Option<&'a CudaView<'a, f32>>,
    /// Output columns N.
    pub n: usize,
    /// Reduction length K.
    pub k: usize,
}

fn ptr<T>(v: &CudaView<T>, s: &CudaStream) -> u64 {
    v.device_ptr(s).0
}

impl W4A4 {
    /// Loads nothing new: the kernels are in `gpu`'s module.
    pub fn new(gpu: &Arc<Gpu>, stream: &Arc<CudaStream>) -> Result<W4A4> {
        Ok(W4A4 { gpu: gpu.clone(), errors: stream.alloc_zeros(1)?, wgmma: gpu.arch().has_wgmma() })
    }

    /// Whether 128-row tiles run on the `wgmma` kernels (default where the
    /// build has them, sm_90a) or the `mma.sync` ones: for tests and the
    /// benchmark's comparison.
    #[doc(hidden)]
    pub fn set_wgmma(&mut self, on: bool) {
        self.wgmma = on && self.gpu.arch().has_wgmma();
    }

    /// How many segment bounds so far were not a valid prefix sum in
    /// `0..=rows` (they were clamped). Synchronizes `stream`.
    pub fn offset_error_count(&self, stream: &Arc<CudaStream>) -> Result<u64> {
        Ok(stream.clone_dtoh(&self.errors)?[0] as u64)
    }

    fn check(&self, g: &GemmArgs, rows: usize, out_len: usize) -> Result<u32> {
        let (n, k) = (g.n, g.k);
        if k == 0 || k % 64 != 0 {
            return Err(unsupported("K", k, "must be a positive multiple of 64"));
        }
        if n == 0 || n % 8 != 0 {
            return Err(unsupported("N", n, "must be a positive multiple of 8"));
        }
        if g.offsets.is_empty() {
            return Err(unsupported("offsets length", 0, "must be E + 1 >= 2"));
        }
        let experts = g.offsets.len() - 1;
        if experts == 0 || experts > GEMM_MAX_EXPERTS as usize {
            return Err(unsupported("experts", experts, format!("must be 1..={GEMM_MAX_EXPERTS}")));
        }
        if rows > u32::MAX as usize / 2 || n * k > u32::MAX as usize {
            return Err(unsupported("rows or N*K", rows.max(n * k), "too large for 32-bit indexing"));
        }
        shape(format!("a [{rows}, {}] bytes", k / 2), rows * k / 2, g.a.len())?;
        shape(format!("b [{experts}, {n}, {}] bytes", k / 2), experts * n * k / 2, g.b.len())?;
        shape(format!("s_w [{experts}, {n}]"), experts * n, g.s_w.len())?;
        shape(format!("out [{rows}, {n}]"), rows * n, out_len)?;
        if let Some(r) = g.row_scale {
            shape(format!("row_scale [{rows}]"), rows, r.len())?;
        }
        Ok(experts as u32)
    }

    fn params(&self, g: &GemmArgs, s: &CudaStream, rows: usize, experts: u32, out: u64) -> Result<W4A4Params> {
        let (a, b) = (ptr(g.a, s), ptr(g.b, s));
        for (what, p) in [("a", a), ("b", b)] {
            if p % 16 != 0 {
                return Err(Error::Alignment { what: what.into(), align: 16, addr: p });
            }
        }
        Ok(W4A4Params {
            a,
            b,
            s_a: ptr(g.s_a, s),
            s_w: ptr(g.s_w, s),
            row_scale: g.row_scale.map_or(0, |r| ptr(r, s)),
            offsets: ptr(g.offsets, s),
            out,
            error_count: 0,
            rows: rows as u32,
            n: g.n as u32,
            k: g.k as u32,
            n_experts: experts,
        })
    }

    /// Rows per GEMM tile from the mean rows per expert: as few padding
    /// rows as the tile sizes allow.
    fn bm(rows: usize, experts: u32) -> u32 {
        match rows / experts as usize {
            r if r >= 128 => 128,
            r if r >= 48 => 64,
            r if r >= 20 => 32,
            _ => 16,
        }
    }

    fn launch(&self, stream: &Arc<CudaStream>, mut p: W4A4Params, kind: &str) -> Result<()> {
        if p.rows == 0 {
            return Ok(());
        }
        let bm = Self::bm(p.rows as usize, p.n_experts);
        p.error_count = self.errors.device_ptr(stream).0;
        // The wgmma kernel's 16-bit epilogue writes 16-byte pieces.
        let (name, smem) = if bm == 128 && self.wgmma && (kind == "i32" || p.out.is_multiple_of(16)) {
            (format!("w4a4_gemm_wg_{kind}"), gemm_wg_smem_bytes())
        } else {
            (format!("w4a4_gemm_bm{bm}_{kind}"), gemm_smem_bytes(bm))
        };
        let grid = self.gpu.resident_blocks(&name, GEMM_THREADS, smem)?;
        // SAFETY: every buffer was checked against (rows, N, K, E) and the
        // kernel clamps the segments it reads from `offsets`.
        unsafe { self.gpu.launch(stream, &name, grid, GEMM_THREADS, smem, p) }
    }

    /// The fused GEMM: 16-bit output with both scales applied in the
    /// epilogue. `rows` comes from `a`.
    pub fn gemm<T: Half>(&self, stream: &Arc<CudaStream>, g: &GemmArgs, out: &mut CudaViewMut<T>) -> Result<()> {
        let rows = 2 * g.a.len() / g.k.max(1);
        let experts = self.check(g, rows, out.len())?;
        shape(format!("s_a [{rows}]"), rows, g.s_a.len())?;
        let o = out.device_ptr_mut(stream).0;
        if o % 4 != 0 {
            return Err(Error::Alignment { what: "out".into(), align: 4, addr: o });
        }
        let p = self.params(g, stream, rows, experts, o)?;
        self.launch(stream, p, T::NAME)
    }

    /// The same GEMM stopping at the exact i32 sums (`acc[m, n]`, no
    /// scales): the unfused baseline's first kernel, and a test hook for the
    /// integer accumulation.
    pub fn gemm_i32(&self, stream: &Arc<CudaStream>, g: &GemmArgs, acc: &mut CudaViewMut<i32>) -> Result<()> {
        let rows = 2 * g.a.len() / g.k.max(1);
        let experts = self.check(g, rows, acc.len())?;
        let o = acc.device_ptr_mut(stream).0;
        let p = self.params(g, stream, rows, experts, o)?;
        self.launch(stream, p, "i32")
    }

    /// The unfused baseline's second kernel: `out = s_a * s_w * acc`.
    pub fn dequant_baseline<T: Half>(
        &self,
        stream: &Arc<CudaStream>,
        acc: &CudaView<i32>,
        s_a: &CudaView<f32>,
        s_w: &CudaView<f32>,
        offsets: &CudaView<i64>,
        n: usize,
        out: &mut CudaViewMut<T>,
    ) -> Result<()> {
        let rows = acc.len() / n.max(1);
        shape("out", rows * n, out.len())?;
        let p = DequantParams {
            acc: ptr(acc, stream),
            s_a: ptr(s_a, stream),
            s_w: ptr(s_w, stream),
            offsets: ptr(offsets, stream),
            out: out.device_ptr_mut(stream).0,
            rows: rows as u32,
            n: n as u32,
            n_experts: (offsets.len() - 1) as u32,
            pad: 0,
        };
        let total = (rows * n / 2) as u32;
        // SAFETY: acc/out hold rows*n, s_a rows, s_w E*n, offsets E+1.
        unsafe { self.gpu.launch(stream, &format!("w4a4_dequant_{}", T::NAME), total.div_ceil(256), 256, 0, p) }
    }

    /// Quantizes `x [rows, K]` (16-bit) to packed INT4 `q [rows, K/2]` and
    /// per-row scales `scale [rows]`, bit-exactly as
    /// [`crate::quant::quantize_int4_rows`] does on the CPU.
    pub fn quantize<T: Half>(
        &self,
        stream: &Arc<CudaStream>,
        x: &CudaView<T>,
        k: usize,
        q: &mut CudaViewMut<u8>,
        scale: &mut CudaViewMut<f32>,
    ) -> Result<()> {
        if k == 0 || !k.is_multiple_of(64) {
            return Err(unsupported("K", k, "must be a positive multiple of 64"));
        }
        let rows = x.len() / k;
        shape(format!("x [rows, {k}]"), rows * k, x.len())?;
        shape(format!("q [{rows}, {}]", k / 2), rows * k / 2, q.len())?;
        shape(format!("scale [{rows}]"), rows, scale.len())?;
        if rows == 0 {
            return Ok(());
        }
        let xp = ptr(x, stream);
        if !xp.is_multiple_of(16) {
            return Err(Error::Alignment { what: "x".into(), align: 16, addr: xp });
        }
        let p = QuantParams {
            x: xp,
            q: q.device_ptr_mut(stream).0,
            scale: scale.device_ptr_mut(stream).0,
            rows: rows as u32,
            k: k as u32,
        };
        let warps = 8u32;
        // SAFETY: x holds rows*K, q rows*K/2, scale rows.
        unsafe {
            self.gpu.launch(
                stream,
                &format!("w4a4_quantize_{}", T::NAME),
                (rows as u32).div_ceil(warps),
                32 * warps,
                0,
                p,
            )
        }
    }
}
