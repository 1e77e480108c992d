//! Division by a divisor that stays fixed for a whole kernel, without the
//! ~20-instruction software sequence a GPU needs for a u32 division: a
//! reciprocal computed once ([`reciprocal`]), then per quotient a multiply-
//! high and one correction ([`div_by`]). Used by the decode FC kernels at
//! each task switch (tasks per expert, top-k); tested here on the host.

/// `floor((2^32 - 1) / d)`, the reciprocal [`div_by`] takes (`d > 0`).
#[inline]
pub const fn reciprocal(d: u32) -> u32 {
    u32::MAX / d
}

/// `n / d` for `n < 2^31`, from `m = reciprocal(d)`: `q = mulhi(n, m)` is
/// `n / d` or one less (`n / d - n m / 2^32 = n (2^32 - m d) / (d 2^32)`,
/// with `0 < 2^32 - m d <= d`, lies in `(0, n / 2^32]`, below 1), so one
/// test settles it; `(q + 1) d <= n + d` does not wrap.
#[inline]
pub const fn div_by(n: u32, d: u32, m: u32) -> u32 {
    let q = ((n as u64 * m as u64) >> 32) as u32;
    if (q + 1) * d <= n {
        q + 1
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(n: u32, d: u32) {
        assert_eq!(div_by(n, d, reciprocal(d)), n / d, "{n} / {d}");
    }

    #[test]
    fn small_divisors_every_pair_index() {
        // Top-k divides pair indices (below 2^21).
        for d in 1..=64 {
            for n in (0..1 << 21).step_by(7).chain([(1 << 21) - 1]) {
                check(n, d);
            }
            for k in 0..(1 << 21) / d {
                check(k * d, d);
                check(k * d + d - 1, d);
            }
        }
    }

    #[test]
    fn task_divisors_up_to_the_limit() {
        // Tasks per expert (up to 2^16 at H or I = 2^20) divide task
        // indices below 2^31: multiples, their neighbours, the ends.
        let mut x = 0x9E37_79B9u32;
        for d in (1..=1024).chain([896, 4095, 4096, 65535, 65536]) {
            for q in [0u32, 1, 2, 1000, (1 << 31) / d - 1] {
                for n in [q * d, q * d + d - 1, (q * d).saturating_sub(1)] {
                    if n < 1 << 31 {
                        check(n, d);
                    }
                }
            }
            for _ in 0..2000 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                check(x >> 1, d);
            }
            check((1 << 31) - 1, d);
        }
    }
}
