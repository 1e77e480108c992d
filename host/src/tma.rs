//! Tensor maps (`CUtensorMap`) for the kernels' TMA loads (sm_90a): encoded
//! on the host by the driver, kept in device memory, read by
//! `cp.async.bulk.tensor` (the kernels' `tma` module).

use crate::error::{Error, Result};
use cudarc::driver::sys;

/// Columns (16-bit values) of one box row: 128 bytes, the span of the
/// 128-byte swizzle, a prefill k chunk ([`moe4_kernels::tile::KCHUNK`]).
pub(crate) const BOX_COLS: u32 = 64;
/// Rows of one box: a 256-pair column group
/// ([`moe4_kernels::launch::PFW256_COLS`]).
pub(crate) const BOX_ROWS: u32 = 256;

/// An encoded 2-D tensor map (128 bytes, as the driver writes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TensorMap2d(pub [u64; 16]);

impl TensorMap2d {
    /// A map over a row-major `[rows][cols]` array of 16-bit values at
    /// device address `addr` (bf16 and f16 alike: the copy moves bits),
    /// loaded in [`BOX_COLS`] x [`BOX_ROWS`] boxes with the 128-byte
    /// swizzle, the layout `wgmma`'s 128-byte-swizzled B operand reads.
    /// Elements past the array read as zero.
    pub(crate) fn bf16_rows(addr: u64, rows: u64, cols: u64) -> Result<TensorMap2d> {
        let bad = |what: &str, value: u64, limit: &str| Error::Unsupported {
            what: format!("tensor map {what}"),
            value: value.to_string(),
            limit: limit.into(),
        };
        if !addr.is_multiple_of(16) {
            return Err(Error::Alignment { what: "tensor map base".into(), align: 16, addr });
        }
        if cols == 0 || !cols.is_multiple_of(8) || cols > 1 << 32 {
            return Err(bad("columns", cols, "a multiple of 8 (16-byte rows), at most 2^32"));
        }
        if rows == 0 || rows > 1 << 32 {
            return Err(bad("rows", rows, "1..=2^32"));
        }
        let dims = [cols, rows];
        let strides = [2 * cols];
        let (bbox, elem) = ([BOX_COLS, BOX_ROWS], [1u32, 1]);
        let mut map = sys::CUtensorMap { opaque: [0; 16] };
        // SAFETY: `map` is a writable CUtensorMap; the array pointers hold
        // rank (2) entries (strides rank - 1), within the limits checked
        // above; the driver only encodes, it reads no device memory.
        unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map,
                sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                2,
                addr as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                bbox.as_ptr(),
                elem.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
            .result()?;
        }
        Ok(TensorMap2d(map.opaque))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // (The checks before the driver call; the encoding itself is checked on
    // the GPU by `moe4::smoke`.)
    #[test]
    fn rejects_what_a_map_cannot_describe() {
        assert!(matches!(TensorMap2d::bf16_rows(8, 10, 64), Err(Error::Alignment { align: 16, addr: 8, .. })));
        for cols in [0, 12, (1 << 32) + 8] {
            let e = TensorMap2d::bf16_rows(256, 10, cols).unwrap_err();
            assert!(e.to_string().contains("tensor map columns"), "{e}");
        }
        let e = TensorMap2d::bf16_rows(256, 0, 64).unwrap_err();
        assert!(e.to_string().contains("tensor map rows"), "{e}");
    }
}
