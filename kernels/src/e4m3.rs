//! E4M3 (OCP FP8 "e4m3fn"): 1 sign, 4 exponent bits (bias 7), 3 mantissa
//! bits; no infinities, `S.1111.111` is NaN, the largest finite value is 448.
//!
//! NVFP4 block scales are E4M3 values that are never negative ("UE4M3").
//! Encoding rounds to nearest, ties to even, and saturates to ±448 like
//! PTX's `cvt.rn.satfinite.e4m3x2.f32` (±inf saturates too; NaN stays NaN).

/// Largest finite E4M3 value.
pub const E4M3_MAX: f32 = 448.0;

/// The canonical NaN code (positive sign).
pub const E4M3_NAN: u8 = 0x7F;

/// `2^e` for `-126 <= e <= 127`, without `std`.
#[inline]
pub(crate) fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// True for the two NaN codes (0x7F, 0xFF).
#[inline]
pub fn e4m3_is_nan(b: u8) -> bool {
    b & 0x7F == 0x7F
}

/// Decodes an E4M3 byte (all 256 codes; 0x7F and 0xFF are NaN).
#[inline]
pub fn e4m3_to_f32(b: u8) -> f32 {
    let neg = b & 0x80 != 0;
    let e = ((b >> 3) & 15) as i32;
    let m = (b & 7) as f32;
    let mag = if e4m3_is_nan(b) {
        f32::NAN
    } else if e == 0 {
        m * pow2(-9)
    } else {
        (1.0 + m / 8.0) * pow2(e - 7)
    };
    if neg {
        -mag
    } else {
        mag
    }
}

/// Rounds a non-negative `v` (< 2^24) to the nearest integer, ties to even.
#[inline]
fn round_half_even(v: f32) -> u32 {
    let i = v as u32; // truncation == floor for v >= 0
    let frac = v - i as f32;
    if frac > 0.5 || (frac == 0.5 && i & 1 == 1) {
        i + 1
    } else {
        i
    }
}

/// Encodes `x` as E4M3: round to nearest even, saturate at ±448, NaN → 0x7F.
#[inline]
pub fn e4m3_from_f32(x: f32) -> u8 {
    if x.is_nan() {
        return E4M3_NAN;
    }
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    let a = x.abs();
    if a >= E4M3_MAX {
        return sign | 0x7E;
    }
    // Unbiased exponent of `a` (f32 normal or zero; a < 448).
    let e = ((a.to_bits() >> 23) as i32) - 127;
    if e < -6 {
        // Subnormal range: quantum 2^-9. m == 8 rolls over to the smallest
        // normal (code 0x08), which the bit pattern handles by itself.
        let m = round_half_even(a * pow2(9));
        return sign | m as u8;
    }
    // Normal: quantum 2^(e-3); m in [8, 16], 16 rolls over to the next binade.
    let m = round_half_even(a * pow2(3 - e));
    let code = (((e + 7) as u32) << 3) + (m - 8);
    sign | code.min(0x7E) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_256_codes_decode_and_round_trip() {
        let mut finite = 0;
        for b in 0u16..256 {
            let b = b as u8;
            let v = e4m3_to_f32(b);
            if e4m3_is_nan(b) {
                assert!(v.is_nan());
                assert_eq!(e4m3_from_f32(v), E4M3_NAN);
                continue;
            }
            finite += 1;
            let back = e4m3_from_f32(v);
            if b == 0x80 {
                assert_eq!(back, 0x80); // -0 keeps its sign
            } else {
                assert_eq!(back, b, "code {b:#04x} value {v}");
            }
        }
        assert_eq!(finite, 254);
    }

    #[test]
    fn known_values() {
        assert_eq!(e4m3_to_f32(0x7E), 448.0);
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(e4m3_to_f32(0x08), 2f32.powi(-6));
        assert_eq!(e4m3_to_f32(0x38), 1.0);
        assert_eq!(e4m3_to_f32(0xB8), -1.0);
        assert_eq!(e4m3_to_f32(0x07), 7.0 * 2f32.powi(-9));
    }

    #[test]
    fn saturates_and_keeps_nan() {
        assert_eq!(e4m3_from_f32(1e9), 0x7E);
        assert_eq!(e4m3_from_f32(449.0), 0x7E);
        assert_eq!(e4m3_from_f32(-1e9), 0xFE);
        assert_eq!(e4m3_from_f32(f32::INFINITY), 0x7E);
        assert_eq!(e4m3_from_f32(f32::NEG_INFINITY), 0xFE);
        assert_eq!(e4m3_from_f32(f32::NAN), E4M3_NAN);
    }

    #[test]
    fn rounds_to_nearest_even() {
        // Between 1.0 (0x38) and 1.125 (0x39): the midpoint goes to 0x38 (even).
        assert_eq!(e4m3_from_f32(1.0625), 0x38);
        assert_eq!(e4m3_from_f32(1.0626), 0x39);
        // Between 1.125 (0x39) and 1.25 (0x3A): the midpoint goes to 0x3A.
        assert_eq!(e4m3_from_f32(1.1875), 0x3A);
        // Subnormal midpoint between 2^-9 (1) and 2*2^-9 (2) → 2.
        assert_eq!(e4m3_from_f32(1.5 * 2f32.powi(-9)), 0x02);
        // Half the smallest subnormal rounds to zero (even), just above it up.
        assert_eq!(e4m3_from_f32(0.5 * 2f32.powi(-9)), 0x00);
        assert_eq!(e4m3_from_f32(0.51 * 2f32.powi(-9)), 0x01);
        // The top of the subnormal range rolls into the first normal.
        assert_eq!(e4m3_from_f32(7.5 * 2f32.powi(-9)), 0x08);
        // Just below 448's upper neighbour midpoint still saturates to 448.
        assert_eq!(e4m3_from_f32(447.0), 0x7E);
        assert_eq!(e4m3_from_f32(420.0), 0x7D); // 416 and 448: 420 is nearer 416
    }

    #[test]
    fn nearest_over_a_dense_sweep() {
        let finite: [f32; 127] = core::array::from_fn(|c| e4m3_to_f32(c as u8));
        let mut x = 0.0f32;
        while x < 460.0 {
            let got = e4m3_to_f32(e4m3_from_f32(x));
            let best = finite.iter().map(|v| (v - x.min(448.0)).abs()).fold(f32::INFINITY, f32::min);
            assert!((got - x.min(448.0)).abs() <= best, "x={x} got={got}");
            x = if x < 1.0 { x + 1.0 / 4096.0 } else { x * 1.0007 };
        }
    }
}
