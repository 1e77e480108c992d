//! `smoke_*`: one instruction (or one decode step) at a time, checked
//! bit-for-bit against the CPU by the host's smoke test. Each `mma` kernel
//! is one warp with row-major A `[16][K]`, B stored `[8][K]` (`[n][k]`) and
//! C/D `[16][8]`, in 32-bit words.

use super::arch::*;
use super::fc::{dequant_step, lane_scales};

#[inline(always)]
unsafe fn frag_ab(a: *const u32, b: *const u32, wpr: usize) -> ([u32; 4], u32, u32) {
    // wpr: 32-bit words per row (K16 f16: 8 words; K32 s8: 8; K64 s4: 8).
    let l = tid() as usize & 31;
    let (g, t) = (l >> 2, l & 3);
    let half = wpr / 2;
    (
        [*a.add(g * wpr + t), *a.add((g + 8) * wpr + t), *a.add(g * wpr + t + half), *a.add((g + 8) * wpr + t + half)],
        *b.add(g * wpr + t),
        *b.add(g * wpr + t + half),
    )
}

#[inline(always)]
unsafe fn store_d<T: Copy>(d: *mut T, v: [T; 4]) {
    let l = tid() as usize & 31;
    let (g, t) = (l >> 2, l & 3);
    *d.add(g * 8 + 2 * t) = v[0];
    *d.add(g * 8 + 2 * t + 1) = v[1];
    *d.add((g + 8) * 8 + 2 * t) = v[2];
    *d.add((g + 8) * 8 + 2 * t + 1) = v[3];
}

#[inline(always)]
unsafe fn load_c<T: Copy>(c: *const T) -> [T; 4] {
    let l = tid() as usize & 31;
    let (g, t) = (l >> 2, l & 3);
    [*c.add(g * 8 + 2 * t), *c.add(g * 8 + 2 * t + 1), *c.add((g + 8) * 8 + 2 * t), *c.add((g + 8) * 8 + 2 * t + 1)]
}

/// One `mma.m16n8k16` f16 -> f32 tile.
///
/// # Safety
/// One warp; A 16x8 words, B 8x8 words, C and D 16x8 f32.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_mma_f16(a: *const u32, b: *const u32, c: *const f32, d: *mut f32) {
    let (fa, b0, b1) = frag_ab(a, b, 8);
    let mut acc = load_c(c);
    mma_f16(&mut acc, fa, b0, b1);
    store_d(d, acc);
}

/// One `mma.m16n8k16` bf16 -> f32 tile.
///
/// # Safety
/// As [`smoke_mma_f16`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_mma_bf16(a: *const u32, b: *const u32, c: *const f32, d: *mut f32) {
    let (fa, b0, b1) = frag_ab(a, b, 8);
    let mut acc = load_c(c);
    mma_bf16(&mut acc, fa, b0, b1);
    store_d(d, acc);
}

/// One `mma.m16n8k32` s8 -> s32 tile.
///
/// # Safety
/// One warp; A 16x8 words, B 8x8 words, C and D 16x8 i32.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_mma_s8(a: *const u32, b: *const u32, c: *const i32, d: *mut i32) {
    let (fa, b0, b1) = frag_ab(a, b, 8);
    let mut acc = load_c(c);
    mma_s8(&mut acc, fa, b0, b1);
    store_d(d, acc);
}

/// One `mma.m16n8k64` s4 -> s32 tile.
///
/// # Safety
/// One warp; A 16x8 words, B 8x8 words, C and D 16x8 i32.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_mma_s4(a: *const u32, b: *const u32, c: *const i32, d: *mut i32) {
    let (fa, b0, b1) = frag_ab(a, b, 8);
    let mut acc = load_c(c);
    mma_s4(&mut acc, fa, b0, b1);
    store_d(d, acc);
}

/// `out[i] = cvt.rn.f16x2.e4m3x2(inp[i])` for `n` pairs of E4M3 codes.
///
/// # Safety
/// `inp` and `out` hold `n` elements.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_cvt_e4m3(inp: *const u16, out: *mut u32, n: u32) {
    let i = bid() * bdim() + tid();
    if i < n {
        *out.add(i as usize) = cvt_e4m3x2_f16x2(*inp.add(i as usize) as u32);
    }
}

/// The decode kernels' dequantization of one packed word, for both 16-bit
/// formats: `out_bf16[4i..4i+4]` and `out_f16[4i..4i+4]` are the A registers
/// [`dequant_step`] produces for `words[i]` with the row-g scale `scales[i]`
/// byte 0 and the row-g+8 scale byte 1 (mtile 0 of [`lane_scales`]).
///
/// # Safety
/// `words`, `scales` hold `n` elements, the outputs `4 n`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_dequant(
    words: *const u32,
    scales: *const u32,
    out_bf16: *mut u32,
    out_f16: *mut u32,
    n: u32,
) {
    let i = bid() * bdim() + tid();
    if i < n {
        let (q, s) = (*words.add(i as usize), *scales.add(i as usize));
        let sb = lane_scales::<true>(s);
        let sf = lane_scales::<false>(s);
        let b = dequant_step::<true>(q, sb[0][0], sb[0][1]);
        let f = dequant_step::<false>(q, sf[0][0], sf[0][1]);
        let mut k = 0;
        while k < 4 {
            *out_bf16.add(4 * i as usize + k) = b[k];
            *out_f16.add(4 * i as usize + k) = f[k];
            k += 1;
        }
    }
}

/// Blackwell's hardware E2M1 convert: `out[i] = cvt.rn.f16x2.e2m1x2(i)` for
/// all 256 bytes (sm_100a / sm_120a builds only).
///
/// # Safety
/// `out` holds 256 words.
#[cfg(any(moe4_arch = "sm_100a", moe4_arch = "sm_120a"))]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_cvt_e2m1(out: *mut u32) {
    let i = bid() * bdim() + tid();
    if i < 256 {
        let y: u32;
        core::arch::asm!("{{ .reg .b8 t; cvt.u8.u32 t, {x}; cvt.rn.f16x2.e2m1x2 {y}, t; }}",
            y = out(reg32) y, x = in(reg32) i, options(pure, nomem, nostack));
        *out.add(i as usize) = y;
    }
}

/// One `wgmma.mma_async.m64n256k16` (sm_90a builds: the 128-row prefill
/// kernels' instruction):
/// A row-major `[64][16]` (16-bit, 8 words per row) from registers in the
/// `mma.m16n8k16` fragment layout, B stored `[256][16]` (`[n][k]`, 8
/// words per row) copied to shared memory as 128-byte rows with the
/// 128-byte swizzle (k-step 0: the rows' first 32 bytes), D `[64][256]`
/// f32 (`D = A B^T`).
///
/// # Safety
/// One warpgroup (128 threads); `256 * 128 + 1024` bytes of dynamic
/// shared memory; A 64 x 8 words, B 256 x 8 words, D 64 x 256 f32.
#[cfg(moe4_arch = "sm_90a")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_wgmma_n256_bf16(a: *const u32, b: *const u32, d: *mut f32) {
    use super::wgmma;
    let t0 = tid();
    let (warp, lane) = ((t0 / 32) as usize, (t0 % 32) as usize);
    let base = (smem() + 1023) & !1023;
    // B: row r's 16-byte piece q (q = 0, 1 hold k 0..16) at piece q ^ (r % 8)
    // of its 128-byte row; the other pieces zero.
    let mut r = t0;
    while r < 256 {
        unroll!(8, |q| {
            let v = if q < 2 {
                let src = b.add(8 * r as usize + 4 * q);
                [*src, *src.add(1), *src.add(2), *src.add(3)]
            } else {
                [0; 4]
            };
            sts_v4(base + 128 * r + 16 * (q as u32 ^ (r % 8)), v);
        });
        r += 128;
    }
    wgmma::fence_proxy_async();
    sync();
    let (g, t) = (lane / 4, lane % 4);
    let row = 16 * warp + g;
    let fa = [*a.add(row * 8 + t), *a.add((row + 8) * 8 + t), *a.add(row * 8 + t + 4), *a.add((row + 8) * 8 + t + 4)];
    let mut acc = [[0f32; 4]; 32];
    wgmma::fence();
    wgmma::mma_n256::<true>(&mut acc, fa, wgmma::desc_sw128(base), false);
    wgmma::commit();
    wgmma::wait::<0>();
    wgmma::hold_f32_n256(&mut acc);
    unroll!(8, |j0| unroll!(4, |j1| {
        let j = 4 * j0 + j1;
        let col = 8 * j + 2 * t;
        *d.add(row * 256 + col) = acc[j][0];
        *d.add(row * 256 + col + 1) = acc[j][1];
        *d.add((row + 8) * 256 + col) = acc[j][2];
        *d.add((row + 8) * 256 + col + 1) = acc[j][3];
    }));
}

/// TMA check (sm_90a; `moe4::smoke` runs it): one `cp.async.bulk.tensor`
/// 2-D tile (the box of the tensor map at global address `tmap` whose
/// first element is (`x0`, `y0`), 64 x 256 16-bit values with the 128-byte
/// swizzle: 32 KiB, an FC2 chunk of activations) and one 1-D
/// `cp.async.bulk` of 4 KiB from `src` (a chunk's codes) into shared
/// memory, both completing on one `mbarrier` armed with expect-tx. The wait
/// is bounded (a copy that never lands is reported, not a hang): `out`
/// gets the 8192 words of the tile as they lie in shared memory, the 1024
/// copied words, then 1 if the barrier's phase completed (else 0).
///
/// # Safety
/// One block of 256 threads; `32768 + 4096 + 1024 + 8` bytes of dynamic
/// shared memory; `tmap` a `CUtensorMap` in global memory; `src` 4096
/// bytes, 16-byte aligned; `out` 9217 words.
#[cfg(moe4_arch = "sm_90a")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_tma_tile(tmap: u64, x0: u32, y0: u32, src: u64, out: *mut u32) {
    use super::tma::*;
    let t0 = tid();
    let base = (smem() + 1023) & !1023;
    let bulk = base + 32768;
    let bar = bulk + 4096;
    if t0 == 0 {
        mbar_init(bar, 1);
    }
    // (Reached from both sides of the branch above: LLVM may duplicate a
    // barrier there, which only the non-`.aligned` form survives.)
    sync_divergent();
    if t0 == 0 {
        mbar_arrive_expect_tx(bar, 32768 + 4096);
        tma_load_2d(base, tmap, x0, y0, bar);
        bulk_load(bulk, src, 4096, bar);
    }
    let mut done = false;
    let mut n = 0u32;
    while !done && n < 1 << 22 {
        done = mbar_test(bar, 0);
        n += 1;
    }
    let mut i = t0;
    while i < 8192 + 1024 {
        *out.add(i as usize) = lds(base + 4 * i);
        i += 256;
    }
    if t0 == 0 {
        *out.add(9216) = done as u32;
    }
}
