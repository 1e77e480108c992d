//! `peak_*`: tensor-core rate microbenchmarks. Each warp runs `iters` rounds
//! of 8 independent `mma`s on register operands (no memory traffic) and
//! stores a checksum so nothing is optimized away. Ops per launch:
//! `blocks * warps * iters * 8 * (2 * m * n * k)`.

use super::arch::*;

macro_rules! peak {
    ($name:ident, $ty:ty, $mma:ident) => {
        /// Tensor-core peak microbenchmark (see the module docs).
        ///
        /// # Safety
        /// `out` holds one word per thread of the grid.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(seed: u32, iters: u32, out: *mut u32) {
            let t = bid() * bdim() + tid();
            let a = [seed ^ t, seed.rotate_left(3) ^ t, seed.rotate_left(7), seed.rotate_left(11) ^ t];
            let (b0, b1) = (seed.rotate_left(13) ^ t, seed.rotate_left(17));
            let mut acc = [[<$ty>::default(); 4]; 8];
            let mut i = 0;
            while i < iters {
                let mut j = 0;
                while j < 8 {
                    $mma(&mut acc[j], a, b0, b1);
                    j += 1;
                }
                i += 1;
            }
            let mut s = 0u32;
            let mut j = 0;
            while j < 8 {
                s ^= (acc[j][0] as u32) ^ (acc[j][3] as u32);
                j += 1;
            }
            *out.add(t as usize) = s;
        }
    };
}

peak!(peak_mma_s8, i32, mma_s8);
peak!(peak_mma_s4, i32, mma_s4);
peak!(peak_mma_f16, f32, mma_f16);
