//! The bit layout of a packed E2M1 weight word in the kernels' layout, and
//! its decode to 16-bit floats in registers.
//!
//! One `u32` holds the 8 weights a lane feeds one `mma.m16n8k16` (the four
//! A-fragment registers `a0..a3`, two weights each). Checkpoints store codes
//! as plain nibbles; at load time [`pack_word`] scatters each code's 4 bits
//! to the positions where a shift and a mask put them straight into a bf16
//! (or f16) bit pattern, so the decode costs 10 (bf16) or 13 (f16) integer
//! operations per 8 weights instead of a table lookup per weight.
//!
//! The decoded patterns are exact scaled E2M1 values:
//! - bf16: sign at bit 15, `e1 e0 m` at bits 8..6, i.e. `value * 2^-126`
//!   (a subnormal for codes 0/1, handled exactly by `fma.rn.bf16x2`);
//! - f16: sign at bit 15, `e1 e0 m` at bits 11..9, i.e. `value * 2^-14`.
//!
//! The block scale multiplies the decoded pair (one `fma/mul .x2`), and the
//! kernels' epilogue multiplies by `2^7` (bf16, see [`bf16_scale_from_f16x2`])
//! or `2^14` (f16) together with the global scale.

/// Left shift (negative: right shift) that moves output `o`'s magnitude
/// bits from the stored word to their bf16 position.
pub const MAG_SHIFT_BF16: [i32; 4] = [0, 3, 6, -3];
/// Left shift that moves output `o`'s sign bits to bit 15 / 31.
pub const SIGN_SHIFT: [i32; 4] = [0, 3, 1, 2];
/// bf16 bit that receives nibble bit `b` (m, e0, e1, sign) of a low element.
const BF16_DEST: [u32; 4] = [6, 7, 8, 15];

/// `log2` of the factor the epilogue applies after a bf16 decode.
pub const BF16_POST_LOG2: i32 = 7;
/// `log2` of the factor the epilogue applies after an f16 decode.
pub const F16_POST_LOG2: i32 = 14;

/// Packs 8 E2M1 codes into a word. `codes[2 * o + h]` is the weight that
/// output register `o` (0..4) holds in half `h` (0 = low).
pub fn pack_word(codes: [u8; 8]) -> u32 {
    let mut q = 0u32;
    for o in 0..4 {
        for h in 0..2 {
            let code = codes[2 * o + h] & 15;
            for (b, &dest) in BF16_DEST.iter().enumerate() {
                if code >> b & 1 == 0 {
                    continue;
                }
                let shift = if b == 3 { SIGN_SHIFT[o] } else { MAG_SHIFT_BF16[o] };
                let src = (dest + 16 * h as u32) as i32 - shift;
                q |= 1 << src;
            }
        }
    }
    q
}

/// The code of weight `(o, h)` in a packed word (the inverse of [`pack_word`]).
pub fn unpack_code(q: u32, o: usize, h: usize) -> u8 {
    let mut code = 0u8;
    for (b, &dest) in BF16_DEST.iter().enumerate() {
        let shift = if b == 3 { SIGN_SHIFT[o] } else { MAG_SHIFT_BF16[o] };
        let src = (dest + 16 * h as u32) as i32 - shift;
        code |= ((q >> src & 1) as u8) << b;
    }
    code
}

const MAG_BF16: u32 = 0x01C0_01C0;
const MAG_F16: u32 = 0x0E00_0E00;
const SIGN: u32 = 0x8000_8000;

/// Decodes a packed word to four bf16x2 registers (`value * 2^-126`).
#[inline(always)]
pub fn decode_bf16(q: u32) -> [u32; 4] {
    [
        q & (MAG_BF16 | SIGN),
        (q << 3) & (MAG_BF16 | SIGN),
        // ((q << 6) & MAG) | ((q << 1) & SIGN) in three operations: the
        // masked sources times 2^6 + 2^1 land the magnitude and sign bits
        // in place, and the two cross terms (bits 1-3, 17-19 and 20) fall
        // outside the mask; no two terms share a bit, so no carries.
        (q & 0x4007_4007).wrapping_mul(66) & (MAG_BF16 | SIGN),
        ((q >> 3) & MAG_BF16) | ((q << 2) & SIGN),
    ]
}

/// Decodes a packed word to four f16x2 registers (`value * 2^-14`).
#[inline(always)]
pub fn decode_f16(q: u32) -> [u32; 4] {
    [
        ((q << 3) & MAG_F16) | (q & SIGN),
        ((q << 6) & MAG_F16) | ((q << 3) & SIGN),
        // As the third bf16 register: times 2^9 + 2^1, cross terms at bits
        // 1-3, 17-19 and 23.
        (q & 0x4007_4007).wrapping_mul(514) & (MAG_F16 | SIGN),
        (q & MAG_F16) | ((q << 2) & SIGN),
    ]
}

/// Turns two E4M3 scales already converted to f16 (`cvt.rn.f16x2.e4m3x2`)
/// into bf16 patterns of `scale * 2^119`, exactly, for every nonzero finite
/// E4M3 value: an f16 from E4M3 is normal (exponent field 6..=23) with a
/// 3-bit mantissa, so the bf16 exponent is the f16 one plus 231 and the
/// mantissa moves down 3 bits; no carry crosses the halves.
///
/// A zero scale gives `2^104`, not 0: the weight loader clears the codes of
/// every block whose scale is zero, so such a block still decodes to zeros.
#[inline(always)]
pub fn bf16_scale_from_f16x2(h2: u32) -> u32 {
    (h2 >> 3).wrapping_add(0x7380_7380)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2m1::e2m1_to_f32;
    use crate::e4m3::{e4m3_is_nan, e4m3_to_f32};

    fn bf16_to_f32(b: u16) -> f32 {
        f32::from_bits((b as u32) << 16)
    }

    fn f16_to_f64(h: u16) -> f64 {
        let s = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let e = ((h >> 10) & 31) as i32;
        let m = (h & 1023) as f64;
        s * if e == 0 { m * 2f64.powi(-24) } else { (1.0 + m / 1024.0) * 2f64.powi(e - 15) }
    }

    /// A small xorshift so the test needs no dependency.
    fn next(state: &mut u64) -> u32 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state >> 32) as u32
    }

    #[test]
    fn the_word_layout_uses_every_bit_once() {
        let mut seen = 0u32;
        for o in 0..4 {
            for h in 0..2 {
                let mut codes = [0u8; 8];
                codes[2 * o + h] = 15;
                let q = pack_word(codes);
                assert_eq!(q.count_ones(), 4);
                assert_eq!(seen & q, 0, "output {o} half {h} overlaps");
                seen |= q;
            }
        }
        assert_eq!(seen, u32::MAX);
    }

    #[test]
    fn decode_inverts_pack_for_every_code_in_every_slot() {
        let mut st = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..20_000 {
            let codes: [u8; 8] = core::array::from_fn(|i| {
                if round < 16 {
                    round as u8 // every slot holds the same code: all 16 codes
                } else {
                    (next(&mut st) >> (4 * i)) as u8 & 15
                }
            });
            let q = pack_word(codes);
            let bf = decode_bf16(q);
            let hf = decode_f16(q);
            for o in 0..4 {
                for h in 0..2 {
                    let code = codes[2 * o + h];
                    assert_eq!(unpack_code(q, o, h), code);
                    let want = e2m1_to_f32(code) as f64;
                    let b = (bf[o] >> (16 * h)) as u16;
                    let f = (hf[o] >> (16 * h)) as u16;
                    assert_eq!(bf16_to_f32(b) as f64, want * 2f64.powi(-126), "bf16 o{o} h{h} code {code}");
                    assert_eq!(f16_to_f64(f), want * 2f64.powi(-14), "f16 o{o} h{h} code {code}");
                    // Signs survive, zeros included.
                    assert_eq!(b >> 15, (code >> 3) as u16);
                    assert_eq!(f >> 15, (code >> 3) as u16);
                }
            }
        }
    }

    #[test]
    fn the_multiply_forms_equal_the_two_shift_forms() {
        // Every bit alone, then random words: the products have no carries.
        let mut st = 0x2545_F491_4F6C_DD1Du64;
        for i in 0..100_032u32 {
            let q = if i < 32 { 1 << i } else { next(&mut st) };
            assert_eq!(decode_bf16(q)[2], ((q << 6) & MAG_BF16) | ((q << 1) & SIGN), "{q:#010x}");
            assert_eq!(decode_f16(q)[2], ((q << 9) & MAG_F16) | ((q << 1) & SIGN), "{q:#010x}");
        }
    }

    #[test]
    fn bf16_scale_conversion_is_exact_for_all_nonzero_scales() {
        for b in 1u8..=0x7E {
            if e4m3_is_nan(b) {
                continue;
            }
            let s = e4m3_to_f32(b) as f64;
            // The f16 pattern of s (what cvt.rn.f16x2.e4m3x2 produces).
            let h = f16_bits(s);
            assert_eq!(f16_to_f64(h), s);
            let pair = (h as u32) << 16 | h as u32;
            let out = bf16_scale_from_f16x2(pair);
            for half in [out as u16, (out >> 16) as u16] {
                assert_eq!(bf16_to_f32(half) as f64, s * 2f64.powi(119), "scale {b:#04x}");
            }
        }
    }

    #[test]
    fn decoded_weight_times_scale_is_exact_and_normal() {
        // bf16: value*2^-126 times scale*2^119 = value*scale*2^-7, which has at
        // most 6 significant bits and is >= 2^-17: exact in bf16.
        for b in 1u8..=0x7E {
            let s = e4m3_to_f32(b) as f64;
            for code in 0u8..16 {
                let w = e2m1_to_f32(code) as f64 * s * 2f64.powi(-7);
                let as_bf16 = bf16_to_f32((((w as f32).to_bits()) >> 16) as u16) as f64;
                assert_eq!(as_bf16, w, "code {code} scale {b:#04x}");
                if w != 0.0 {
                    assert!(w.abs() >= 2f64.powi(-17));
                }
                // f16: value*2^-14*scale has its lowest bit at >= 2^-24.
                let wf = e2m1_to_f32(code) as f64 * s * 2f64.powi(-14);
                assert_eq!(f16_to_f64(f16_bits(wf)), wf);
            }
        }
    }

    /// f16 bits of a value known to be exactly representable.
    fn f16_bits(v: f64) -> u16 {
        let sign = if v < 0.0 { 0x8000 } else { 0 };
        let a = v.abs();
        if a == 0.0 {
            return sign;
        }
        let mut e = a.log2().floor() as i32;
        if e < -14 {
            return sign | (a / 2f64.powi(-24)) as u16;
        }
        if 2f64.powi(e) > a {
            e -= 1;
        }
        let m = ((a / 2f64.powi(e) - 1.0) * 1024.0) as u16;
        sign | (((e + 15) as u16) << 10) | m
    }
}
