//! moe4's error type: every bad input gets a clear message naming the value
//! and the limit, never a panic.

use cudarc::driver::DriverError;

/// Everything a moe4 call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tensor's length does not match the shape the call implies.
    #[error("{what}: expected {expected} elements, got {got}")]
    Shape {
        /// Which tensor.
        what: String,
        /// The length the other arguments imply.
        expected: usize,
        /// The length passed.
        got: usize,
    },
    /// A dimension outside what the kernels take.
    #[error("{what} = {value} is not supported: {limit}")]
    Unsupported {
        /// Which dimension or parameter.
        what: String,
        /// The value passed.
        value: String,
        /// The rule it breaks.
        limit: String,
    },
    /// A device pointer that is not aligned for the kernels' vector loads.
    #[error("{what} must be {align}-byte aligned (address {addr:#x})")]
    Alignment {
        /// Which buffer.
        what: String,
        /// Required alignment in bytes.
        align: usize,
        /// The address passed.
        addr: u64,
    },
    /// A value in the weights that is not valid (NaN scale, negative scale,
    /// non-finite weight, ...).
    #[error("invalid {what}: {detail}")]
    InvalidValue {
        /// Which tensor.
        what: String,
        /// Where and what.
        detail: String,
    },
    /// The GPU is older than the kernels need.
    #[error("GPU compute capability {major}.{minor} is not supported: moe4 needs sm_89 (Ada) or newer")]
    UnsupportedGpu {
        /// Major compute capability.
        major: i32,
        /// Minor compute capability.
        minor: i32,
    },
    /// No CUDA driver could be loaded.
    #[error("no CUDA driver (libcuda) found on this machine")]
    NoCuda,
    /// A call that needs more rows than the workspace was created for.
    #[error("{what}: {value} exceeds the workspace's capacity of {capacity}")]
    Capacity {
        /// What overflowed.
        what: String,
        /// Requested.
        value: usize,
        /// Allocated.
        capacity: usize,
    },
    /// A checkpoint tensor that is missing or not what the layout needs.
    #[error("checkpoint tensor {tensor}: {detail}")]
    Checkpoint {
        /// The tensor's name.
        tensor: String,
        /// What is wrong, with the expected shape or dtype.
        detail: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA error: {0}")]
    Cuda(#[from] DriverError),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// `Result` with moe4's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn shape(what: impl Into<String>, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::Shape { what: what.into(), expected, got })
    }
}

pub(crate) fn unsupported(what: impl Into<String>, value: impl ToString, limit: impl Into<String>) -> Error {
    Error::Unsupported { what: what.into(), value: value.to_string(), limit: limit.into() }
}
