//! Hopper warpgroup MMA (`wgmma`, sm_90a builds only): the instruction with
//! A from registers and B from shared memory, its fences, and the
//! shared-memory matrix descriptor.
//!
//! A warpgroup is 4 consecutive warps (the first a multiple of 4). Warp `w`
//! of it supplies rows `16 w .. 16 w + 16` of the 64-row A tile in the
//! `mma.m16n8k16` A-fragment layout, and holds the same rows of the f32
//! result in the `mma.m16n8` C layout, per 8 columns: the fragments the
//! decode kernels already build and read.
//!
//! B (the `N x 16` slice of one k-step) is read from shared memory through a
//! descriptor: [`desc_sw128`] for N rows of 128 bytes (64 16-bit k) stored
//! with the 128-byte swizzle (16-byte piece `q` of row `r` at piece
//! `q ^ (r % 8)`, 8-row groups 1024 bytes apart, the tile 1024-byte
//! aligned); k-step `s` of the 64 starts `32 s` bytes into the tile.
//!
//! The s8 form (`m64n128k32`, the W4A4 GEMM) is the same with 32 one-byte
//! k per step (the `mma.m16n8k32` fragments): 128-byte rows hold 4 steps.

use core::arch::asm;

/// `wgmma.mma_async` with A from four registers and B by shared-memory
/// descriptor; `$op` names the shape and types (e.g.
/// `"m64n128k16.f32.bf16.bf16"`), `$tail` the operands after the scale-d
/// predicate (`", 1, 1, 0;"` for 16-bit, `";"` for s8); accumulate
/// (`+=`) when `$sd` is nonzero, else overwrite. The accumulators are listed
/// as `name column_tile register`, one per output register, in order.
macro_rules! wgmma_rs {
    ($op:expr, $tail:literal, $d:expr, $a:expr, $desc:expr, $sd:expr; $r0:ident $j0:literal $c0:literal $(, $r:ident $j:literal $c:literal)*) => {
        asm!(
            concat!(
                "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.", $op, " {{",
                "{", stringify!($r0), "}", $(", {", stringify!($r), "}",)*
                "}}, {{{a0}, {a1}, {a2}, {a3}}}, {desc}, p", $tail, " }}"
            ),
            $r0 = inout(reg32) $d[$j0][$c0],
            $($r = inout(reg32) $d[$j][$c],)*
            a0 = in(reg32) $a[0], a1 = in(reg32) $a[1], a2 = in(reg32) $a[2], a3 = in(reg32) $a[3],
            desc = in(reg64) $desc, sd = in(reg32) $sd,
            options(nostack)
        )
    };
}

/// `wgmma.mma_async.m64n64k16` into `$d: [[f32; 4]; 8]`; `$ty` is
/// `"bf16"` or `"f16"`.
macro_rules! wgmma_m64n64k16 {
    ($ty:literal, $d:expr, $a:expr, $desc:expr, $sd:expr) => {
        wgmma_rs!(concat!("m64n64k16.f32.", $ty, ".", $ty), ", 1, 1, 0;", $d, $a, $desc, $sd;
            d0 0 0, d1 0 1, d2 0 2, d3 0 3, d4 1 0, d5 1 1, d6 1 2, d7 1 3, d8 2 0, d9 2 1, d10 2 2, d11 2 3, d12 3 0, d13 3 1, d14 3 2, d15 3 3, d16 4 0, d17 4 1, d18 4 2, d19 4 3, d20 5 0, d21 5 1, d22 5 2, d23 5 3, d24 6 0, d25 6 1, d26 6 2, d27 6 3, d28 7 0, d29 7 1, d30 7 2, d31 7 3)
    };
}

/// `wgmma.mma_async.m64n128k16` into `$d: [[f32; 4]; 16]`; `$ty` is
/// `"bf16"` or `"f16"`.
macro_rules! wgmma_m64n128k16 {
    ($ty:literal, $d:expr, $a:expr, $desc:expr, $sd:expr) => {
        wgmma_rs!(concat!("m64n128k16.f32.", $ty, ".", $ty), ", 1, 1, 0;", $d, $a, $desc, $sd;
            d0 0 0, d1 0 1, d2 0 2, d3 0 3, d4 1 0, d5 1 1, d6 1 2, d7 1 3, d8 2 0, d9 2 1, d10 2 2, d11 2 3, d12 3 0, d13 3 1, d14 3 2, d15 3 3, d16 4 0, d17 4 1, d18 4 2, d19 4 3, d20 5 0, d21 5 1, d22 5 2, d23 5 3, d24 6 0, d25 6 1, d26 6 2, d27 6 3, d28 7 0, d29 7 1, d30 7 2, d31 7 3, d32 8 0, d33 8 1, d34 8 2, d35 8 3, d36 9 0, d37 9 1, d38 9 2, d39 9 3, d40 10 0, d41 10 1, d42 10 2, d43 10 3, d44 11 0, d45 11 1, d46 11 2, d47 11 3, d48 12 0, d49 12 1, d50 12 2, d51 12 3, d52 13 0, d53 13 1, d54 13 2, d55 13 3, d56 14 0, d57 14 1, d58 14 2, d59 14 3, d60 15 0, d61 15 1, d62 15 2, d63 15 3)
    };
}

/// `wgmma.mma_async.m64n256k16` into `$d: [[f32; 4]; 32]` (the 128-row x
/// 256-pair prefill tiles); `$ty` is `"bf16"` or `"f16"`.
macro_rules! wgmma_m64n256k16 {
    ($ty:literal, $d:expr, $a:expr, $desc:expr, $sd:expr) => {
        wgmma_rs!(concat!("m64n256k16.f32.", $ty, ".", $ty), ", 1, 1, 0;", $d, $a, $desc, $sd;
            d0 0 0, d1 0 1, d2 0 2, d3 0 3, d4 1 0, d5 1 1, d6 1 2, d7 1 3, d8 2 0, d9 2 1, d10 2 2, d11 2 3, d12 3 0, d13 3 1, d14 3 2, d15 3 3, d16 4 0, d17 4 1, d18 4 2, d19 4 3, d20 5 0, d21 5 1, d22 5 2, d23 5 3, d24 6 0, d25 6 1, d26 6 2, d27 6 3, d28 7 0, d29 7 1, d30 7 2, d31 7 3, d32 8 0, d33 8 1, d34 8 2, d35 8 3, d36 9 0, d37 9 1, d38 9 2, d39 9 3, d40 10 0, d41 10 1, d42 10 2, d43 10 3, d44 11 0, d45 11 1, d46 11 2, d47 11 3, d48 12 0, d49 12 1, d50 12 2, d51 12 3, d52 13 0, d53 13 1, d54 13 2, d55 13 3, d56 14 0, d57 14 1, d58 14 2, d59 14 3, d60 15 0, d61 15 1, d62 15 2, d63 15 3, d64 16 0, d65 16 1, d66 16 2, d67 16 3, d68 17 0, d69 17 1, d70 17 2, d71 17 3, d72 18 0, d73 18 1, d74 18 2, d75 18 3, d76 19 0, d77 19 1, d78 19 2, d79 19 3, d80 20 0, d81 20 1, d82 20 2, d83 20 3, d84 21 0, d85 21 1, d86 21 2, d87 21 3, d88 22 0, d89 22 1, d90 22 2, d91 22 3, d92 23 0, d93 23 1, d94 23 2, d95 23 3, d96 24 0, d97 24 1, d98 24 2, d99 24 3, d100 25 0, d101 25 1, d102 25 2, d103 25 3, d104 26 0, d105 26 1, d106 26 2, d107 26 3, d108 27 0, d109 27 1, d110 27 2, d111 27 3, d112 28 0, d113 28 1, d114 28 2, d115 28 3, d116 29 0, d117 29 1, d118 29 2, d119 29 3, d120 30 0, d121 30 1, d122 30 2, d123 30 3, d124 31 0, d125 31 1, d126 31 2, d127 31 3)
    };
}

/// `wgmma.mma_async.m64n128k32.s32.s8.s8` into `$d: [[i32; 4]; 16]`.
macro_rules! wgmma_m64n128k32_s8 {
    ($d:expr, $a:expr, $desc:expr, $sd:expr) => {
        wgmma_rs!("m64n128k32.s32.s8.s8", ";", $d, $a, $desc, $sd;
            d0 0 0, d1 0 1, d2 0 2, d3 0 3, d4 1 0, d5 1 1, d6 1 2, d7 1 3, d8 2 0, d9 2 1, d10 2 2, d11 2 3, d12 3 0, d13 3 1, d14 3 2, d15 3 3, d16 4 0, d17 4 1, d18 4 2, d19 4 3, d20 5 0, d21 5 1, d22 5 2, d23 5 3, d24 6 0, d25 6 1, d26 6 2, d27 6 3, d28 7 0, d29 7 1, d30 7 2, d31 7 3, d32 8 0, d33 8 1, d34 8 2, d35 8 3, d36 9 0, d37 9 1, d38 9 2, d39 9 3, d40 10 0, d41 10 1, d42 10 2, d43 10 3, d44 11 0, d45 11 1, d46 11 2, d47 11 3, d48 12 0, d49 12 1, d50 12 2, d51 12 3, d52 13 0, d53 13 1, d54 13 2, d55 13 3, d56 14 0, d57 14 1, d58 14 2, d59 14 3, d60 15 0, d61 15 1, d62 15 2, d63 15 3)
    };
}

/// Orders this thread's register accesses before the warpgroup's next
/// `wgmma` (needed before a `wgmma` reads registers written since the last
/// one).
///
/// # Safety
/// Executed by all threads of the warpgroup together (`.sync.aligned`).
#[inline(always)]
pub unsafe fn fence() {
    asm!("wgmma.fence.sync.aligned;", options(nostack));
}

/// Closes the group of `wgmma`s issued since the last commit.
///
/// # Safety
/// As for [`fence`].
#[inline(always)]
pub unsafe fn commit() {
    asm!("wgmma.commit_group.sync.aligned;", options(nostack));
}

/// Waits until at most `N` committed groups are still running (their
/// registers and shared memory may then be reused).
///
/// # Safety
/// As for [`fence`].
#[inline(always)]
pub unsafe fn wait<const N: u32>() {
    asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack));
}

/// Makes this thread's generic-proxy writes to shared memory (stores,
/// `cp.async`) visible to the async proxy (`wgmma` operand reads); before
/// the barrier that hands the data over.
#[inline(always)]
pub fn fence_proxy_async() {
    // SAFETY: a memory ordering fence; it accesses nothing.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) };
}

/// Descriptor of a K-major B tile of 128-byte rows with the 128-byte swizzle
/// at shared address `addr` (the tile base 1024-byte aligned, plus `32 s`
/// for k-step `s`): start address, leading offset 16 B (unused with this
/// swizzle), stride 1024 B between 8-row groups, swizzle mode 1.
#[inline(always)]
pub const fn desc_sw128(addr: u32) -> u64 {
    (((addr & 0x3FFFF) >> 4) as u64) | (1u64 << 16) | ((1024u64 >> 4) << 32) | (1u64 << 62)
}

/// `d (+)= a x B` over `8 NT` columns (NT = 8 or 16), bf16 or f16
/// operands.
///
/// # Safety
/// Issued by all threads of the warpgroup together; `desc` describes a B
/// tile of `8 NT` rows in shared memory that stays unchanged until this
/// group's [`wait`]; `d` and `a` are not touched before it either.
#[inline(always)]
pub unsafe fn mma<const BF16: bool, const NT: usize>(d: &mut [[f32; 4]; NT], a: [u32; 4], desc: u64, accumulate: bool) {
    const { assert!(NT == 8 || NT == 16) };
    let sd = accumulate as u32;
    // SAFETY (each cast): `NT` is the length the branch names.
    let d = d.as_mut_ptr();
    if NT == 16 {
        let d = &mut *(d as *mut [[f32; 4]; 16]);
        if BF16 {
            wgmma_m64n128k16!("bf16", d, a, desc, sd)
        } else {
            wgmma_m64n128k16!("f16", d, a, desc, sd)
        }
    } else {
        let d = &mut *(d as *mut [[f32; 4]; 8]);
        if BF16 {
            wgmma_m64n64k16!("bf16", d, a, desc, sd)
        } else {
            wgmma_m64n64k16!("f16", d, a, desc, sd)
        }
    }
}

/// `d (+)= a x B` over 256 columns, bf16 or f16 operands (the 128-row x
/// 256-pair prefill tiles).
///
/// # Safety
/// As for [`mma`], with a B tile of 256 rows.
#[inline(always)]
pub unsafe fn mma_n256<const BF16: bool>(d: &mut [[f32; 4]; 32], a: [u32; 4], desc: u64, accumulate: bool) {
    let sd = accumulate as u32;
    if BF16 {
        wgmma_m64n256k16!("bf16", d, a, desc, sd)
    } else {
        wgmma_m64n256k16!("f16", d, a, desc, sd)
    }
}

/// `d (+)= a x B` over 128 columns, s8 operands, i32 accumulators.
///
/// # Safety
/// As for [`mma`].
#[inline(always)]
pub unsafe fn mma_s8_n128(d: &mut [[i32; 4]; 16], a: [u32; 4], desc: u64, accumulate: bool) {
    let sd = accumulate as u32;
    wgmma_m64n128k32_s8!(d, a, desc, sd)
}

/// Ties the accumulators to this point of the program (an empty `asm` that
/// "reads and writes" each): after [`wait`], so the compiler cannot move a
/// read of them above the wait (it does not know the `wgmma` writes them
/// asynchronously; ptxas would then serialize the pipeline, or worse).
#[inline(always)]
pub fn hold_f32<const NT: usize>(d: &mut [[f32; 4]; NT]) {
    unroll16!(NT, |j| unroll!(4, |c| {
        // SAFETY: an empty instruction; it only pins the register.
        unsafe { asm!("// hold {0}", inout(reg32) d[j][c], options(nostack)) };
    }));
}

/// [`hold_f32`] for the 32 column tiles of [`mma_n256`].
#[inline(always)]
pub fn hold_f32_n256(d: &mut [[f32; 4]; 32]) {
    let (lo, hi) = d.split_at_mut(16);
    // SAFETY (both casts): each half holds 16 column tiles.
    unsafe {
        hold_f32::<16>(&mut *(lo.as_mut_ptr() as *mut [[f32; 4]; 16]));
        hold_f32::<16>(&mut *(hi.as_mut_ptr() as *mut [[f32; 4]; 16]));
    }
}

/// [`hold_f32`] for i32 accumulators.
#[inline(always)]
pub fn hold_i32<const NT: usize>(d: &mut [[i32; 4]; NT]) {
    unroll16!(NT, |j| unroll!(4, |c| {
        // SAFETY: as in `hold_f32`.
        unsafe { asm!("// hold {0}", inout(reg32) d[j][c], options(nostack)) };
    }));
}
