//! E2M1 ("FP4"): 1 sign bit, 2 exponent bits (bias 1), 1 mantissa bit.
//!
//! Codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign. Two codes
//! per byte, element `2i` in the low nibble. Encoding rounds half to even
//! (thresholds 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5) and saturates at ±6.

/// The value of every E2M1 code, indexed by the 4-bit code.
pub const E2M1_VALUES: [f32; 16] =
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];

/// Largest E2M1 magnitude.
pub const E2M1_MAX: f32 = 6.0;

/// Decodes one 4-bit code (the high bits of `code` are ignored).
#[inline]
pub fn e2m1_to_f32(code: u8) -> f32 {
    E2M1_VALUES[(code & 15) as usize]
}

/// Encodes `x` to the nearest E2M1 code, ties to even, saturating at ±6.
///
/// NaN encodes as +0 (callers that can meet NaN must reject it first; the
/// host quantizers do).
#[inline]
pub fn e2m1_from_f32(x: f32) -> u8 {
    let sign = if x.is_sign_negative() { 8 } else { 0 };
    let a = if x.is_nan() { 0.0 } else { x.abs() };
    let mag = if a <= 0.25 {
        0
    } else if a < 0.75 {
        1
    } else if a <= 1.25 {
        2
    } else if a < 1.75 {
        3
    } else if a <= 2.5 {
        4
    } else if a < 3.5 {
        5
    } else if a <= 5.0 {
        6
    } else {
        7
    };
    sign | mag
}

/// Packs two codes into a byte: `lo` is element `2i`, `hi` element `2i + 1`.
#[inline]
pub fn pack_pair(lo: u8, hi: u8) -> u8 {
    (lo & 15) | ((hi & 15) << 4)
}

/// The code of element `i` of a packed row (`bytes[i / 2]`, low nibble first).
#[inline]
pub fn code_at(bytes: &[u8], i: usize) -> u8 {
    (bytes[i / 2] >> ((i & 1) * 4)) & 15
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for c in 0u8..16 {
            let v = e2m1_to_f32(c);
            let back = e2m1_from_f32(v);
            // -0 and +0 are the same value; everything else keeps its code.
            if c == 8 {
                assert_eq!(back, 8);
            } else {
                assert_eq!(back, c, "code {c} value {v}");
            }
        }
    }

    #[test]
    fn ties_go_to_even_codes() {
        // (input, expected magnitude code)
        let cases = [
            (0.25, 0),
            (0.2500001, 1),
            (0.75, 2),
            (0.7499999, 1),
            (1.25, 2),
            (1.2500001, 3),
            (1.75, 4),
            (2.5, 4),
            (2.5000002, 5),
            (3.5, 6),
            (5.0, 6),
            (5.0000005, 7),
            (6.0, 7),
            (100.0, 7),
            (f32::INFINITY, 7),
        ];
        for (x, want) in cases {
            assert_eq!(e2m1_from_f32(x), want, "+{x}");
            assert_eq!(e2m1_from_f32(-x), 8 | want, "-{x}");
        }
    }

    #[test]
    fn nearest_value_is_chosen() {
        // A dense sweep: the chosen code is never farther than any other code.
        let mut x = -7.0f32;
        while x <= 7.0 {
            let c = e2m1_from_f32(x);
            let err = (e2m1_to_f32(c) - x.clamp(-6.0, 6.0)).abs();
            for other in 0u8..16 {
                assert!(err <= (e2m1_to_f32(other) - x.clamp(-6.0, 6.0)).abs() + 1e-7);
            }
            x += 0.01;
        }
    }

    #[test]
    fn packing_puts_even_elements_low() {
        let row = [pack_pair(1, 15), pack_pair(7, 8)];
        assert_eq!(row[0], 0xF1);
        assert_eq!(code_at(&row, 0), 1);
        assert_eq!(code_at(&row, 1), 15);
        assert_eq!(code_at(&row, 2), 7);
        assert_eq!(code_at(&row, 3), 8);
    }
}
