//! Thin wrappers over PTX instructions. Every `asm!` of the crate lives
//! here, so the kernels read as Rust and this file is the one place to check
//! an instruction's operand classes.
#![allow(clippy::missing_safety_doc)]

use core::arch::{asm, global_asm, nvptx};

// The block's dynamic shared memory; its size is set at launch.
global_asm!(".extern .shared .align 16 .b8 moe4_smem[];");

/// `threadIdx.x`.
#[inline(always)]
pub fn tid() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_thread_idx_x() as u32 }
}
/// `blockIdx.x`.
#[inline(always)]
pub fn bid() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_x() as u32 }
}
/// `blockIdx.y`.
#[inline(always)]
pub fn bid_y() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_y() as u32 }
}
/// `blockDim.x`.
#[inline(always)]
pub fn bdim() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_dim_x() as u32 }
}
/// `gridDim.x`.
#[inline(always)]
pub fn gdim() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_grid_dim_x() as u32 }
}
/// `x`, through an instruction the compiler cannot see into or move across
/// another such one: a value computed from it is computed after that point
/// (not merged with the same value computed earlier and kept live until
/// then).
#[inline(always)]
pub fn opaque(x: u32) -> u32 {
    let y: u32;
    // SAFETY: a register move.
    unsafe { asm!("mov.b32 {y}, {x};", y = out(reg32) y, x = in(reg32) x, options(nostack)) };
    y
}
/// [`bid()`] read where it is called (not merged with an earlier read and
/// kept live until here).
#[inline(always)]
pub fn bid_here() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %ctaid.x;", r = out(reg32) r, options(nostack)) };
    r
}
/// [`gdim()`] read where it is called (as [`bid_here`]).
#[inline(always)]
pub fn gdim_here() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %nctaid.x;", r = out(reg32) r, options(nostack)) };
    r
}
/// This block's first index at or past `n` in its grid stride `bid, bid +
/// gdim, ..` (read with [`bid_here`] / [`gdim_here`]): where a persistent
/// block's tiles continue after the first `n` (the mixed prefill kernels'
/// narrow tiles after the wide ones).
#[inline(always)]
pub fn stride_first_from(n: u32) -> u32 {
    let mut i = bid_here();
    while i < n {
        i += gdim_here();
    }
    i
}
/// `__syncthreads()`.
#[inline(always)]
pub fn sync() {
    // SAFETY: every caller reaches it from uniform control flow.
    unsafe { nvptx::_syncthreads() }
}

/// `__syncthreads()` that is correct from divergent code: PTX's
/// non-`.aligned` `barrier.sync` (sm_70+), which threads may reach through
/// different copies of the instruction. LLVM does not treat inline asm as
/// convergent, so it may duplicate a barrier after a per-thread branch (one
/// copy per side); with [`sync`] (`bar.sync`, the `.aligned` form) that
/// hangs, with this one it is fine.
#[inline(always)]
pub fn sync_divergent() {
    // SAFETY: a block-wide barrier every thread of the block reaches (on
    // any path); no memory operand (and a compiler memory barrier).
    unsafe { asm!("barrier.sync 0;", options(nostack)) };
}

/// [`smem()`] read where it is called (not merged with other reads, so
/// that no register holds it from one use to the next).
#[inline(always)]
pub fn smem_here() -> u32 {
    let r: u32;
    // SAFETY: takes the address of a symbol.
    unsafe { asm!("mov.u32 {r}, moe4_smem;", r = out(reg32) r, options(nomem, nostack)) };
    r
}

/// Shared-memory address of the dynamic shared buffer.
#[inline(always)]
pub fn smem() -> u32 {
    let r: u32;
    // SAFETY: takes the address of a symbol.
    unsafe { asm!("mov.u32 {r}, moe4_smem;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Shared load of a u32.
#[inline(always)]
pub unsafe fn lds(a: u32) -> u32 {
    let v: u32;
    asm!("ld.shared.u32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) a, options(nostack, readonly));
    v
}
/// Shared store of a u32.
#[inline(always)]
pub unsafe fn sts(a: u32, v: u32) {
    asm!("st.shared.u32 [{a}], {v};", a = in(reg32) a, v = in(reg32) v, options(nostack));
}
/// Shared store of 4 bytes where `cond` holds, as one predicated
/// instruction: no branch for LLVM to thread through a later barrier
/// (rustc does not mark kernel code convergent, so a branch on a
/// per-thread condition before a barrier may be duplicated past it, with a
/// copy of the barrier on each side: a hang).
#[inline(always)]
pub unsafe fn sts_if(a: u32, v: u32, cond: bool) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.shared.u32 [{a}], {v}; }}",
        c = in(reg32) cond as u32, a = in(reg32) a, v = in(reg32) v, options(nostack));
}
/// Global store of 4 bytes where `cond` holds, one predicated instruction
/// (as [`sts_if`]).
#[inline(always)]
pub unsafe fn stg_u32_if(p: u64, v: u32, cond: bool) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.global.u32 [{p}], {v}; }}",
        c = in(reg32) cond as u32, p = in(reg64) p, v = in(reg32) v, options(nostack));
}
/// Shared store of 2 bytes.
#[inline(always)]
pub unsafe fn sts_u16(a: u32, v: u16) {
    asm!("st.shared.u16 [{a}], {v};", a = in(reg32) a, v = in(reg16) v, options(nostack));
}
/// `stmatrix ... m8n8.x4.trans`: the warp's four 8 x 8 16-bit matrices in
/// `mma` accumulator order (register `q` of lane `(g, t)` holds row `g`,
/// columns `2t`, `2t + 1` of matrix `q`), each stored transposed: lane
/// `8q + i` gives the shared address of 16 bytes that receive column `i`
/// of matrix `q` (its rows 0..8 in order). Warp-wide (`.aligned`): every
/// lane executes it.
#[inline(always)]
pub unsafe fn stmatrix_x4_trans(a: u32, v: [u32; 4]) {
    asm!("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [{a}], {{{x}, {y}, {z}, {w}}};",
        a = in(reg32) a, x = in(reg32) v[0], y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3],
        options(nostack));
}
/// Bulk asynchronous copy of `bytes` (a multiple of 16; both addresses
/// 16-byte aligned) shared -> global (`cp.async.bulk`, sm_90), in the
/// thread's current bulk group. The shared source must have been written
/// before a [`super::wgmma::fence_proxy_async`] (the copy reads through the
/// async proxy) and must not be rewritten before [`bulk_wait_read`].
#[inline(always)]
pub unsafe fn bulk_s2g(dst: u64, src: u32, bytes: u32) {
    asm!("cp.async.bulk.global.shared::cta.bulk_group [{d}], [{s}], {n};",
        d = in(reg64) dst, s = in(reg32) src, n = in(reg32) bytes, options(nostack));
}
/// Closes the thread's current bulk group.
#[inline(always)]
pub unsafe fn bulk_commit() {
    asm!("cp.async.bulk.commit_group;", options(nostack));
}
/// Waits until at most `N` of this thread's bulk groups still read their
/// shared sources.
#[inline(always)]
pub unsafe fn bulk_wait_read<const N: u32>() {
    asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack));
}
/// Waits until at most `N` of this thread's bulk groups are incomplete
/// (their global writes done).
#[inline(always)]
pub unsafe fn bulk_wait<const N: u32>() {
    asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack));
}
/// Shared load of 16 bytes.
#[inline(always)]
pub unsafe fn lds_v4(a: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.shared.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}];",
        x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
        a = in(reg32) a, options(nostack, readonly));
    [x, y, z, w]
}
/// Shared store of 16 bytes.
#[inline(always)]
pub unsafe fn sts_v4(a: u32, v: [u32; 4]) {
    asm!("st.shared.v4.u32 [{a}], {{{x}, {y}, {z}, {w}}};",
        a = in(reg32) a, x = in(reg32) v[0], y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3],
        options(nostack));
}

/// 16-byte streaming load (read once: no L1 allocation).
#[inline(always)]
pub unsafe fn ldg_stream_v4(p: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.global.nc.L1::no_allocate.v4.u32 {{{x}, {y}, {z}, {w}}}, [{p}];",
        x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
        p = in(reg64) p, options(nostack, readonly, pure));
    [x, y, z, w]
}
/// 16-byte read-only load through L1.
#[inline(always)]
pub unsafe fn ldg_v4(p: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.global.nc.v4.u32 {{{x}, {y}, {z}, {w}}}, [{p}];",
        x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
        p = in(reg64) p, options(nostack, readonly, pure));
    [x, y, z, w]
}
/// 4-byte read-only load.
#[inline(always)]
pub unsafe fn ldg_u32(p: u64) -> u32 {
    let v: u32;
    asm!("ld.global.nc.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(nostack, readonly, pure));
    v
}
/// 4-byte coherent load (data written earlier in the same launch sequence
/// by another kernel is fine either way; this one also sees same-kernel
/// writes of other blocks after a fence).
#[inline(always)]
pub unsafe fn ldg_u32_coherent(p: u64) -> u32 {
    let v: u32;
    asm!("ld.global.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(nostack, readonly));
    v
}
/// f32 read-only load.
#[inline(always)]
pub unsafe fn ldg_f32(p: u64) -> f32 {
    f32::from_bits(ldg_u32(p))
}
/// 8-byte read-only load.
#[inline(always)]
pub unsafe fn ldg_u64(p: u64) -> u64 {
    let v: u64;
    asm!("ld.global.nc.u64 {v}, [{p}];", v = out(reg64) v, p = in(reg64) p, options(nostack, readonly, pure));
    v
}
/// 4-byte global store.
#[inline(always)]
pub unsafe fn stg_u32(p: u64, v: u32) {
    asm!("st.global.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack));
}
/// 2-byte global store.
#[inline(always)]
pub unsafe fn stg_u16(p: u64, v: u16) {
    asm!("st.global.u16 [{p}], {v};", p = in(reg64) p, v = in(reg16) v, options(nostack));
}
/// 1-byte global store.
#[inline(always)]
pub unsafe fn stg_u8(p: u64, v: u32) {
    asm!("st.global.u8 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack));
}
/// 8-byte global store.
#[inline(always)]
pub unsafe fn stg_v2(p: u64, a: u32, b: u32) {
    asm!("st.global.v2.u32 [{p}], {{{a}, {b}}};", p = in(reg64) p, a = in(reg32) a, b = in(reg32) b, options(nostack));
}
/// 16-byte global store.
#[inline(always)]
pub unsafe fn stg_v4(p: u64, v: [u32; 4]) {
    asm!("st.global.v4.u32 [{p}], {{{x}, {y}, {z}, {w}}};",
        p = in(reg64) p, x = in(reg32) v[0], y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3],
        options(nostack));
}
/// `atomicAdd` on a global u32; returns the old value.
#[inline(always)]
pub unsafe fn atomic_add_u32(p: u64, v: u32) -> u32 {
    let old: u32;
    asm!("atom.global.add.u32 {o}, [{p}], {v};", o = out(reg32) old, p = in(reg64) p, v = in(reg32) v, options(nostack));
    old
}

/// `atomicAdd` on a shared u32; returns the old value.
#[inline(always)]
pub unsafe fn atomic_add_shared(a: u32, v: u32) -> u32 {
    let old: u32;
    asm!("atom.shared.add.u32 {o}, [{a}], {v};", o = out(reg32) old, a = in(reg32) a, v = in(reg32) v, options(nostack));
    old
}

/// `cp.async` of 16 bytes global -> shared (L2 only).
#[inline(always)]
pub unsafe fn cp_async16(dst: u32, src: u64) {
    asm!("cp.async.cg.shared.global [{d}], [{s}], 16;", d = in(reg32) dst, s = in(reg64) src, options(nostack));
}
/// `cp.async` of 16 bytes global -> shared through L1 (`.ca`).
#[inline(always)]
pub unsafe fn cp_async16_ca(dst: u32, src: u64) {
    asm!("cp.async.ca.shared.global [{d}], [{s}], 16;", d = in(reg32) dst, s = in(reg64) src, options(nostack));
}
/// Adds `v` to the word at `p` with release semantics at GPU scope
/// (`red.release.gpu`): this thread's earlier writes, and those of the
/// threads it has synchronized with (e.g. its warp's, through
/// `bar.warp.sync`), are visible to a thread whose acquire load reads the
/// sum.
#[inline(always)]
pub unsafe fn red_release_add_u32(p: u64, v: u32) {
    asm!("red.release.gpu.global.add.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack));
}
/// Adds `v` to the word at `p` with acquire-release semantics at GPU
/// scope; returns the old value.
#[inline(always)]
pub unsafe fn atomic_add_acq_rel_u32(p: u64, v: u32) -> u32 {
    let old: u32;
    asm!("atom.acq_rel.gpu.global.add.u32 {o}, [{p}], {v};", o = out(reg32) old, p = in(reg64) p, v = in(reg32) v, options(nostack));
    old
}
/// Loads the word at `p` with acquire semantics at GPU scope: writes
/// released before the value read are visible to this thread's later reads.
#[inline(always)]
pub unsafe fn ld_acquire_u32(p: u64) -> u32 {
    let v: u32;
    asm!("ld.acquire.gpu.global.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(nostack));
    v
}
/// Loads the word at `p` with relaxed semantics at GPU scope (from L2, the
/// point of coherence; no ordering of later reads).
#[inline(always)]
pub unsafe fn ld_relaxed_u32(p: u64) -> u32 {
    let v: u32;
    asm!("ld.relaxed.gpu.global.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(nostack));
    v
}
/// The GPU-wide nanosecond timer (`%globaltimer`).
#[inline(always)]
pub fn globaltimer() -> u64 {
    let t: u64;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nostack)) };
    t
}
/// This SM's cycle counter (`%clock64`).
#[inline(always)]
pub fn clock64() -> u64 {
    let t: u64;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u64 {t}, %clock64;", t = out(reg64) t, options(nostack)) };
    t
}
/// The SM this thread runs on (`%smid`).
#[inline(always)]
pub fn smid() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %smid;", r = out(reg32) r, options(nostack)) };
    r
}
/// The generic address of the `trace` builds' timeline buffer
/// (`crate::trace::TRACE_SYMBOL`), formed where it is used (not a value
/// the compiler keeps in a register across the kernel).
#[cfg(moe4_exp = "trace")]
#[inline(always)]
pub fn trace_base() -> u64 {
    let r: u64;
    // SAFETY: takes the address of a module global.
    unsafe {
        asm!("{{ .reg .u64 t; mov.u64 t, MOE4_TRACE; cvta.global.u64 {r}, t; }}", r = out(reg64) r, options(nostack))
    };
    r
}
/// Stores `v` at the generic address `p`.
#[inline(always)]
pub unsafe fn st_u64(p: u64, v: u64) {
    asm!("st.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v, options(nostack));
}
/// Atomic max of `v` into the u64 at the generic address `p` (no result).
#[inline(always)]
pub unsafe fn red_max_u64(p: u64, v: u64) {
    asm!("red.max.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v, options(nostack));
}
/// Suspends the thread for about `ns` nanoseconds (`nanosleep`): a spin
/// loop's pause.
#[inline(always)]
pub fn nanosleep(ns: u32) {
    // SAFETY: no memory operands.
    unsafe { asm!("nanosleep.u32 {n};", n = in(reg32) ns, options(nostack)) };
}
/// `bar.warp.sync` over the whole warp (every lane must call it).
#[inline(always)]
pub fn syncwarp() {
    // SAFETY: every lane of the warp reaches it (callers' contract).
    unsafe { asm!("bar.warp.sync 0xffffffff;", options(nostack)) };
}
/// `cp.async` of 16 bytes that writes zeros when `valid` is false.
#[inline(always)]
pub unsafe fn cp_async16_zfill(dst: u32, src: u64, valid: bool) {
    let n: u32 = if valid { 16 } else { 0 };
    asm!("cp.async.cg.shared.global [{d}], [{s}], 16, {n};", d = in(reg32) dst, s = in(reg64) src, n = in(reg32) n, options(nostack));
}
/// `cp.async` of 4 bytes global -> shared through L1 (`.ca`), or 4 zero
/// bytes (reading nothing) when `!valid`.
#[inline(always)]
pub unsafe fn cp_async4_zfill(dst: u32, src: u64, valid: bool) {
    let n: u32 = if valid { 4 } else { 0 };
    asm!("cp.async.ca.shared.global [{d}], [{s}], 4, {n};", d = in(reg32) dst, s = in(reg64) src, n = in(reg32) n, options(nostack));
}
/// `cp.async` of 4 bytes global -> shared, through L1 (`.ca`).
#[inline(always)]
pub unsafe fn cp_async4(dst: u32, src: u64) {
    asm!("cp.async.ca.shared.global [{d}], [{s}], 4;", d = in(reg32) dst, s = in(reg64) src, options(nostack));
}
/// `cp.async` of 16 bytes through L1 (`.ca`: data other warps of the block
/// read too); reads nothing and writes 16 zero bytes when `skip` is nonzero
/// (`ignore-src`).
#[inline(always)]
pub unsafe fn cp_async16_ca_or_zero(dst: u32, src: u64, skip: u32) {
    asm!("{{ .reg .pred q; setp.ne.u32 q, {k}, 0; cp.async.ca.shared.global [{d}], [{s}], 16, q; }}",
        d = in(reg32) dst, s = in(reg64) src, k = in(reg32) skip, options(nostack));
}
/// Closes the current `cp.async` group.
#[inline(always)]
pub unsafe fn cp_async_commit() {
    asm!("cp.async.commit_group;", options(nostack));
}
/// Waits until at most `N` groups are pending.
#[inline(always)]
pub unsafe fn cp_async_wait<const N: u32>() {
    asm!("cp.async.wait_group {n};", n = const N, options(nostack));
}

/// [`cp_async_wait`] with a count known only after monomorphization (a
/// const generic expression): `n` must fold to a constant 0..=7.
#[inline(always)]
pub unsafe fn cp_async_wait_dyn(n: u32) {
    match n {
        0 => cp_async_wait::<0>(),
        1 => cp_async_wait::<1>(),
        2 => cp_async_wait::<2>(),
        3 => cp_async_wait::<3>(),
        4 => cp_async_wait::<4>(),
        5 => cp_async_wait::<5>(),
        6 => cp_async_wait::<6>(),
        _ => cp_async_wait::<7>(),
    }
}

/// Programmatic dependent launch, consumer side: waits until the grids this
/// one depends on have completed and their writes are visible. Every moe4
/// kernel launched with the programmatic-serialization attribute calls it
/// before touching memory a predecessor writes or reads. A no-op when the
/// launch had no such dependency, and on sm_89 (no `griddepcontrol`).
#[inline(always)]
pub fn griddep_wait() {
    #[cfg(not(moe4_arch = "sm_89"))]
    // SAFETY: a scheduling barrier; it touches no memory itself (and is a
    // compiler memory barrier, so no access moves across it).
    unsafe {
        asm!("griddepcontrol.wait;", options(nostack))
    };
}
/// Programmatic dependent launch, producer side: lets the next kernel in
/// the stream start launching (its blocks then wait in [`griddep_wait`]).
#[inline(always)]
pub fn griddep_launch_dependents() {
    #[cfg(not(moe4_arch = "sm_89"))]
    // SAFETY: only a scheduling hint.
    unsafe {
        asm!("griddepcontrol.launch_dependents;", options(nostack))
    };
}
/// Two E4M3 (low 16 bits of `x`, element 0 low) to f16x2.
#[inline(always)]
pub fn cvt_e4m3x2_f16x2(x: u32) -> u32 {
    let y: u32;
    // SAFETY: pure register conversion.
    unsafe {
        asm!("{{ .reg .b16 t; cvt.u16.u32 t, {x}; cvt.rn.f16x2.e4m3x2 {y}, t; }}",
            y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack));
    }
    y
}
/// Broadcasts the low half of a 16x2 pair to both halves.
#[inline(always)]
pub fn bcast_lo(x: u32) -> u32 {
    let y: u32;
    // SAFETY: pure register move.
    unsafe {
        asm!("{{ .reg .b16 l, h; mov.b32 {{l, h}}, {x}; mov.b32 {y}, {{l, l}}; }}",
            y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack));
    }
    y
}
/// Broadcasts the high half of a 16x2 pair to both halves.
#[inline(always)]
pub fn bcast_hi(x: u32) -> u32 {
    let y: u32;
    // SAFETY: pure register move.
    unsafe {
        asm!("{{ .reg .b16 l, h; mov.b32 {{l, h}}, {x}; mov.b32 {y}, {{h, h}}; }}",
            y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack));
    }
    y
}
/// f16x2 multiply (subnormals kept).
#[inline(always)]
pub fn mul_f16x2(a: u32, b: u32) -> u32 {
    let y: u32;
    // SAFETY: pure arithmetic.
    unsafe {
        asm!("mul.rn.f16x2 {y}, {a}, {b};", y = out(reg32) y, a = in(reg32) a, b = in(reg32) b, options(pure, nomem, nostack));
    }
    y
}
/// bf16x2 multiply, as `fma(a, b, -0)` (sm_80+; subnormal inputs are exact).
#[inline(always)]
pub fn mul_bf16x2(a: u32, b: u32) -> u32 {
    let y: u32;
    // SAFETY: pure arithmetic.
    unsafe {
        asm!("fma.rn.bf16x2 {y}, {a}, {b}, {z};", y = out(reg32) y, a = in(reg32) a, b = in(reg32) b,
            z = in(reg32) 0x8000_8000u32, options(pure, nomem, nostack));
    }
    y
}

/// `D = A * B + D`, m16n8k16, bf16 inputs, f32 accumulators.
#[inline(always)]
pub fn mma_bf16(d: &mut [f32; 4], a: [u32; 4], b0: u32, b1: u32) {
    // SAFETY: register-only tensor-core op; the whole warp executes it.
    unsafe {
        asm!("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg32) d[0], d1 = inout(reg32) d[1], d2 = inout(reg32) d[2], d3 = inout(reg32) d[3],
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b0, b1 = in(reg32) b1, options(pure, nomem, nostack));
    }
}
/// `D = A * B + D`, m16n8k16, f16 inputs, f32 accumulators.
#[inline(always)]
pub fn mma_f16(d: &mut [f32; 4], a: [u32; 4], b0: u32, b1: u32) {
    // SAFETY: register-only tensor-core op; the whole warp executes it.
    unsafe {
        asm!("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg32) d[0], d1 = inout(reg32) d[1], d2 = inout(reg32) d[2], d3 = inout(reg32) d[3],
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b0, b1 = in(reg32) b1, options(pure, nomem, nostack));
    }
}
/// `D = A * B + D`, m16n8k32, s8 inputs, s32 accumulators.
#[inline(always)]
pub fn mma_s8(d: &mut [i32; 4], a: [u32; 4], b0: u32, b1: u32) {
    // SAFETY: register-only tensor-core op; the whole warp executes it.
    unsafe {
        asm!("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg32) d[0], d1 = inout(reg32) d[1], d2 = inout(reg32) d[2], d3 = inout(reg32) d[3],
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b0, b1 = in(reg32) b1, options(pure, nomem, nostack));
    }
}
/// `D = A * B + D`, m16n8k64, s4 inputs, s32 accumulators (native on sm_89,
/// emulated on sm_90).
#[inline(always)]
pub fn mma_s4(d: &mut [i32; 4], a: [u32; 4], b0: u32, b1: u32) {
    // SAFETY: register-only tensor-core op; the whole warp executes it.
    unsafe {
        asm!("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg32) d[0], d1 = inout(reg32) d[1], d2 = inout(reg32) d[2], d3 = inout(reg32) d[3],
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b0, b1 = in(reg32) b1, options(pure, nomem, nostack));
    }
}

/// Two f32 to bf16x2 (`lo` in the low half), round to nearest even.
#[inline(always)]
pub fn pack_bf16x2(lo: f32, hi: f32) -> u32 {
    let y: u32;
    // SAFETY: pure conversion.
    unsafe {
        asm!("cvt.rn.bf16x2.f32 {y}, {h}, {l};", y = out(reg32) y, h = in(reg32) hi, l = in(reg32) lo, options(pure, nomem, nostack));
    }
    y
}
/// Two f32 to f16x2 (`lo` in the low half), round to nearest even.
#[inline(always)]
pub fn pack_f16x2(lo: f32, hi: f32) -> u32 {
    let y: u32;
    // SAFETY: pure conversion.
    unsafe {
        asm!("cvt.rn.f16x2.f32 {y}, {h}, {l};", y = out(reg32) y, h = in(reg32) hi, l = in(reg32) lo, options(pure, nomem, nostack));
    }
    y
}
/// bf16 or f16 pattern of `x` (round to nearest even) in the low 16 bits.
#[inline(always)]
pub fn to_half_bits<const BF16: bool>(x: f32) -> u16 {
    (if BF16 { pack_bf16x2(x, 0.0) } else { pack_f16x2(x, 0.0) }) as u16
}
/// f32 of a bf16 or f16 pattern.
#[inline(always)]
pub fn from_half_bits<const BF16: bool>(h: u32) -> f32 {
    if BF16 {
        f32::from_bits((h & 0xFFFF) << 16)
    } else {
        let y: f32;
        // SAFETY: pure conversion.
        unsafe {
            asm!("{{ .reg .b16 t; cvt.u16.u32 t, {h}; cvt.f32.f16 {y}, t; }}", y = out(reg32) y, h = in(reg32) h, options(pure, nomem, nostack));
        }
        y
    }
}

/// `2^x`, approximate (2 ulp; results below the normal range flushed to 0).
#[inline(always)]
pub fn ex2(x: f32) -> f32 {
    let y: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("ex2.approx.ftz.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack)) };
    y
}
/// `1 / x`, approximate (at most 1 ulp off; `rcp.approx.ftz`): one
/// instruction instead of the IEEE division's dozen and its slow path.
#[inline(always)]
pub fn rcp(x: f32) -> f32 {
    let y: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("rcp.approx.ftz.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack)) };
    y
}
/// `min` that returns NaN if either input is NaN.
#[inline(always)]
pub fn min_nan(a: f32, b: f32) -> f32 {
    let y: f32;
    // SAFETY: pure arithmetic.
    unsafe {
        asm!("min.NaN.f32 {y}, {a}, {b};", y = out(reg32) y, a = in(reg32) a, b = in(reg32) b, options(pure, nomem, nostack))
    };
    y
}
/// `max` that returns NaN if either input is NaN.
#[inline(always)]
pub fn max_nan(a: f32, b: f32) -> f32 {
    let y: f32;
    // SAFETY: pure arithmetic.
    unsafe {
        asm!("max.NaN.f32 {y}, {a}, {b};", y = out(reg32) y, a = in(reg32) a, b = in(reg32) b, options(pure, nomem, nostack))
    };
    y
}
/// Round to nearest even integer (f32 -> i32), saturating.
#[inline(always)]
pub fn rint_i32(x: f32) -> i32 {
    let y: i32;
    // SAFETY: pure conversion.
    unsafe { asm!("cvt.rni.sat.s32.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack)) };
    y
}
/// IEEE f32 division, round to nearest (the same result as the CPU's `/`).
#[inline(always)]
pub fn div_rn(a: f32, b: f32) -> f32 {
    let y: f32;
    // SAFETY: pure arithmetic.
    unsafe {
        asm!("div.rn.f32 {y}, {a}, {b};", y = out(reg32) y, a = in(reg32) a, b = in(reg32) b, options(pure, nomem, nostack))
    };
    y
}

/// `__shfl_xor_sync(full mask)`.
#[inline(always)]
pub fn shfl_xor(v: u32, m: u32) -> u32 {
    let y: u32;
    // SAFETY: the whole warp executes it.
    unsafe {
        asm!("shfl.sync.bfly.b32 {y}, {v}, {m}, 0x1f, 0xffffffff;", y = out(reg32) y, v = in(reg32) v, m = in(reg32) m, options(nostack))
    };
    y
}
/// `__shfl_up_sync(full mask)`.
#[inline(always)]
pub fn shfl_up(v: u32, d: u32) -> u32 {
    let y: u32;
    // SAFETY: the whole warp executes it.
    unsafe {
        asm!("shfl.sync.up.b32 {y}, {v}, {d}, 0, 0xffffffff;", y = out(reg32) y, v = in(reg32) v, d = in(reg32) d, options(nostack))
    };
    y
}
/// `__shfl_sync(full mask)`: `v` of lane `src`.
#[inline(always)]
pub fn shfl_idx(v: u32, src: u32) -> u32 {
    let y: u32;
    // SAFETY: the whole warp executes it.
    unsafe {
        asm!("shfl.sync.idx.b32 {y}, {v}, {s}, 0x1f, 0xffffffff;", y = out(reg32) y, v = in(reg32) v, s = in(reg32) src, options(nostack))
    };
    y
}

/// Inclusive prefix sum over the warp.
#[inline(always)]
pub fn warp_inclusive_sum(v: u32, lane: u32) -> u32 {
    let mut x = v;
    let mut d = 1;
    while d < 32 {
        let y = shfl_up(x, d);
        if lane >= d {
            x += y;
        }
        d <<= 1;
    }
    x
}

/// Three exclusive prefix sums over the block at once (`bdim() <= 1024`),
/// with their totals: one exchange through shared memory (96 words at
/// `scratch`), one barrier. Only the first `warps` warps may hold nonzero
/// values (the others pass zeros): each thread then reads `warps` partial
/// sums, not one per warp of the block. The scratch must not be reused
/// before the next barrier.
#[inline(always)]
pub unsafe fn block_exclusive_sum3(v: [u32; 3], scratch: u32, warps: u32) -> ([u32; 3], [u32; 3]) {
    let t = tid();
    let (lane, warp) = (t & 31, t >> 5);
    let nwarps = bdim().div_ceil(32).min(warps);
    let incl = [warp_inclusive_sum(v[0], lane), warp_inclusive_sum(v[1], lane), warp_inclusive_sum(v[2], lane)];
    if lane == 31 {
        sts(scratch + 12 * warp, incl[0]);
        sts(scratch + 12 * warp + 4, incl[1]);
        sts(scratch + 12 * warp + 8, incl[2]);
    }
    sync();
    let mut before = [0u32; 3];
    let mut total = [0u32; 3];
    let mut w = 0;
    while w < nwarps {
        let mut q = 0;
        while q < 3 {
            let s = lds(scratch + 12 * w + 4 * q);
            if w < warp {
                before[q as usize] += s;
            }
            total[q as usize] += s;
            q += 1;
        }
        w += 1;
    }
    ([before[0] + incl[0] - v[0], before[1] + incl[1] - v[1], before[2] + incl[2] - v[2]], total)
}

/// Exclusive prefix sum over the block (`bdim() <= 1024`), with the total.
/// Uses 32 words of shared memory at `scratch`; contains two barriers.
#[inline(always)]
pub unsafe fn block_exclusive_sum(v: u32, scratch: u32) -> (u32, u32) {
    let t = tid();
    let (lane, warp) = (t & 31, t >> 5);
    let nwarps = bdim().div_ceil(32);
    let incl = warp_inclusive_sum(v, lane);
    if lane == 31 {
        sts(scratch + 4 * warp, incl);
    }
    sync();
    let mut before = 0;
    let mut total = 0;
    let mut w = 0;
    while w < nwarps {
        let s = lds(scratch + 4 * w);
        if w < warp {
            before += s;
        }
        total += s;
        w += 1;
    }
    sync();
    (before + incl - v, total)
}
