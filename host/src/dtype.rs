//! The 16-bit activation types moe4 takes (bf16, f16), as one trait.

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use half::{bf16, f16};

/// A 16-bit float activation type: [`half::bf16`] or [`half::f16`].
pub trait Half: DeviceRepr + ValidAsZeroBits + Copy + Default + Send + Sync + std::fmt::Debug + 'static {
    /// True for bf16.
    const IS_BF16: bool;
    /// Name used in kernel names ("bf16" / "f16").
    const NAME: &'static str;
    /// Rounds an f32 (nearest even).
    fn from_f32(x: f32) -> Self;
    /// Widens to f32 (exact).
    fn to_f32(self) -> f32;
    /// The raw bits.
    fn to_bits(self) -> u16;
    /// From raw bits.
    fn from_bits(b: u16) -> Self;
}

impl Half for bf16 {
    const IS_BF16: bool = true;
    const NAME: &'static str = "bf16";
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn to_bits(self) -> u16 {
        bf16::to_bits(self)
    }
    fn from_bits(b: u16) -> Self {
        bf16::from_bits(b)
    }
}

impl Half for f16 {
    const IS_BF16: bool = false;
    const NAME: &'static str = "f16";
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn to_bits(self) -> u16 {
        f16::to_bits(self)
    }
    fn from_bits(b: u16) -> Self {
        f16::from_bits(b)
    }
}
