//! The Hopper asynchronous copies (sm_90a builds): `mbarrier`s with
//! transaction counts, `cp.async.bulk` (1-D) and `cp.async.bulk.tensor`
//! (2-D, from a `CUtensorMap`), issued by one thread and completed on an
//! `mbarrier` that the consumers wait on. Shared-memory operands are 32-bit
//! shared-window addresses; an `mbarrier` is 8 bytes, 8-byte aligned.

use core::arch::asm;

// `cbulk` (experiment): the decode FC kernels' ring `mbarrier`s, one per
// slot of each warp (at most 8 warps x 4 slots), in static shared memory
// beside the dynamic buffer (the host's shared-memory sizes stay as they
// are; the occupancy API counts it).
#[cfg(moe4_exp = "cbulk")]
core::arch::global_asm!(".shared .align 8 .b8 moe4_fc_bars[256];");

/// `cbulk` (experiment): shared-memory address of the decode FC kernels'
/// `mbarrier`s (256 bytes).
#[cfg(moe4_exp = "cbulk")]
#[inline(always)]
pub fn fc_bars() -> u32 {
    let r: u32;
    // SAFETY: takes the address of a symbol.
    unsafe { asm!("mov.u32 {r}, moe4_fc_bars;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Initializes the `mbarrier` at `a` for `count` arrivals per phase, and
/// makes the initialization visible to the async proxy (the copies that
/// complete on it). The block must pass a barrier before other threads use
/// it.
///
/// # Safety
/// `a` is 8 shared bytes no other thread uses yet.
#[inline(always)]
pub unsafe fn mbar_init(a: u32, count: u32) {
    asm!("mbarrier.init.shared::cta.b64 [{a}], {n};", a = in(reg32) a, n = in(reg32) count, options(nostack));
    super::wgmma::fence_proxy_async();
}

/// One arrival on the `mbarrier` at `a` (release).
///
/// # Safety
/// `a` is an initialized `mbarrier`.
#[inline(always)]
pub unsafe fn mbar_arrive(a: u32) {
    asm!("mbarrier.arrive.shared::cta.b64 _, [{a}];", a = in(reg32) a, options(nostack));
}

/// One arrival on the `mbarrier` at `a` that also expects `bytes` more of
/// copies completing on it in this phase.
///
/// # Safety
/// `a` is an initialized `mbarrier`.
#[inline(always)]
pub unsafe fn mbar_arrive_expect_tx(a: u32, bytes: u32) {
    asm!(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{a}], {n};",
        a = in(reg32) a, n = in(reg32) bytes, options(nostack)
    );
}

/// Waits until the phase of parity `parity` of the `mbarrier` at shared
/// address `a` has completed (acquire). The retry loop is inside the PTX
/// (labels scoped by the braces, as CUTLASS's `ClusterBarrier::wait`):
/// a loop in Rust around `try_wait` made ptxas serialize the `wgmma`s of
/// the kernel (C7518, runs 48-50's `prefill_ws`).
///
/// # Safety
/// `a` is an initialized `mbarrier` in shared memory.
#[inline(always)]
// PTX has no numeric local labels; its labels are scoped by the braces, so
// each inlined copy of this block has its own.
#[allow(named_asm_labels)]
pub unsafe fn mbar_wait(a: u32, parity: u32) {
    asm!(
        "{{ .reg .pred p; WAIT: mbarrier.try_wait.parity.shared::cta.b64 p, [{a}], {ph}; @p bra.uni DONE; bra.uni WAIT; DONE: }}",
        a = in(reg32) a, ph = in(reg32) parity, options(nostack)
    )
}

/// Whether the phase of parity `parity` of the `mbarrier` at `a` has
/// completed, without waiting (`test_wait`; for bounded waits in checks).
///
/// # Safety
/// `a` is an initialized `mbarrier`.
#[inline(always)]
pub unsafe fn mbar_test(a: u32, parity: u32) -> bool {
    let r: u32;
    asm!(
        "{{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [{a}], {ph}; selp.u32 {r}, 1, 0, p; }}",
        r = out(reg32) r, a = in(reg32) a, ph = in(reg32) parity, options(nostack)
    );
    r != 0
}

/// The box of the 2-D tensor map at global address `map` whose first
/// element is (`x`, `y`) (`x` the inner coordinate, in elements) to shared
/// memory at `dst`, completing its bytes on the `mbarrier` at `bar`.
/// Elements outside the tensor read as zero.
///
/// # Safety
/// `map` is a valid `CUtensorMap` in global memory (64-byte aligned);
/// `dst` holds the box and meets the map's swizzle alignment (1024 bytes
/// for the 128-byte swizzle); `bar` expects these bytes.
#[inline(always)]
pub unsafe fn tma_load_2d(dst: u32, map: u64, x: u32, y: u32, bar: u32) {
    asm!(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}}}], [{b}];",
        d = in(reg32) dst, m = in(reg64) map, x = in(reg32) x, y = in(reg32) y, b = in(reg32) bar,
        options(nostack)
    );
}

/// `bytes` (a multiple of 16) from global address `src` to shared `dst`
/// (both 16-byte aligned), completing on the `mbarrier` at `bar`.
///
/// # Safety
/// Both ranges valid; `bar` expects these bytes.
#[inline(always)]
pub unsafe fn bulk_load(dst: u32, src: u64, bytes: u32, bar: u32) {
    asm!(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
        d = in(reg32) dst, s = in(reg64) src, n = in(reg32) bytes, b = in(reg32) bar,
        options(nostack)
    );
}

/// Invalidates the `mbarrier` at `a`, so that its memory may be used for
/// something else.
///
/// # Safety
/// No thread waits on it or arrives on it any more; no copy completes on it.
#[inline(always)]
pub unsafe fn mbar_inval(a: u32) {
    asm!("mbarrier.inval.shared::cta.b64 [{a}];", a = in(reg32) a, options(nostack));
}
