//! The timeline buffer of the `moe4_exp = "trace"` builds: the device
//! global [`TRACE_SYMBOL`], `[kernel][block][word]` of `u64`, in which the
//! decode layer's kernels note, per block, when it started, when its
//! launch dependency was met, when its first chunk's data had landed and
//! when its last warp was done. Other builds have no such global and note
//! nothing (their code is unchanged).
//!
//! Times are the SM's cycle counter (`%clock64`: exact, but each SM's own,
//! so only times noted on the same SM compare) and, at a block's start and
//! end, the GPU-wide nanosecond timer (`%globaltimer`: comparable across
//! SMs, of a coarser resolution on some GPUs). Each kernel's word of a
//! block is overwritten by each call, so after a run of several calls the
//! buffer holds the last call's timeline. A word still 0 was not noted.
//! Blocks from [`TRACE_BLOCKS`] on are not noted.

/// The name of the buffer in the PTX module.
pub const TRACE_SYMBOL: &str = "MOE4_TRACE";

/// The kernels that note their blocks' times, by section of the buffer.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKernel {
    /// `moe_route` (one block).
    Route = 0,
    /// `moe_route_count`.
    RouteCount = 1,
    /// `moe_route_scan`.
    RouteScan = 2,
    /// `moe_route_scatter`.
    RouteScatter = 3,
    /// The decode FC1 kernels (`moe_fc1_*`).
    Fc1 = 4,
    /// The decode FC2 kernels (`moe_fc2_*`).
    Fc2 = 5,
    /// `moe_combine_*`.
    Combine = 6,
}

impl TraceKernel {
    /// Every kernel, in section order.
    pub const ALL: [TraceKernel; 7] = [
        TraceKernel::Route,
        TraceKernel::RouteCount,
        TraceKernel::RouteScan,
        TraceKernel::RouteScatter,
        TraceKernel::Fc1,
        TraceKernel::Fc2,
        TraceKernel::Combine,
    ];

    /// A short name for tables.
    pub const fn name(self) -> &'static str {
        match self {
            TraceKernel::Route => "route",
            TraceKernel::RouteCount => "route_count",
            TraceKernel::RouteScan => "route_scan",
            TraceKernel::RouteScatter => "route_scatter",
            TraceKernel::Fc1 => "fc1",
            TraceKernel::Fc2 => "fc2",
            TraceKernel::Combine => "combine",
        }
    }
}

/// Sections of the buffer (one per [`TraceKernel`], one spare).
pub const TRACE_KERNELS: usize = 8;
/// Blocks noted per kernel (the decode FC grids hold at most 6 blocks per
/// SM: 792 on a 132-SM GPU).
pub const TRACE_BLOCKS: usize = 1024;
/// Words per block.
pub const TRACE_WORDS: usize = 10;
/// Words in the buffer.
pub const TRACE_LEN: usize = TRACE_KERNELS * TRACE_BLOCKS * TRACE_WORDS;

/// What each word of a block holds.
pub mod word {
    /// The SM the block ran on (`%smid`), plus 1 (0: not noted).
    pub const SM: usize = 0;
    /// `%globaltimer` at the block's start (warp 0).
    pub const GT_ENTRY: usize = 1;
    /// `%clock64` at the block's start (warp 0).
    pub const ENTRY: usize = 2;
    /// `%clock64` after the launch dependency was met (`griddepcontrol.wait`
    /// returned; warp 0).
    pub const WAITED: usize = 3;
    /// FC kernels: `%clock64` once the block knows its work (the routing
    /// tables read or, `_rt`, built; warp 0).
    pub const PLANNED: usize = 4;
    /// FC kernels: the bitwise complement of the earliest `%clock64` at
    /// which a warp with a task had its first chunk's data (complemented so
    /// that an atomic max keeps the minimum and 0 stays "not noted").
    pub const FIRST_MIN_NOT: usize = 5;
    /// FC kernels: the latest such `%clock64` over the block's warps.
    pub const FIRST_MAX: usize = 6;
    /// `%clock64` when the block's last warp was done.
    pub const EXIT: usize = 7;
    /// `%globaltimer` when the block's last warp was done.
    pub const GT_EXIT: usize = 8;
    /// FC kernels: the number of tasks the block saw (the plan's).
    pub const TASKS: usize = 9;
}

/// Index of `word` of `block` of `kernel` in the buffer.
pub const fn trace_index(kernel: TraceKernel, block: usize, word: usize) -> usize {
    (kernel as usize * TRACE_BLOCKS + block) * TRACE_WORDS + word
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_do_not_overlap() {
        assert!(TraceKernel::ALL.len() <= TRACE_KERNELS);
        let last = trace_index(TraceKernel::Combine, TRACE_BLOCKS - 1, TRACE_WORDS - 1);
        assert!(last < TRACE_LEN);
        assert_eq!(trace_index(TraceKernel::Fc1, 0, 0), 4 * TRACE_BLOCKS * TRACE_WORDS);
        assert_eq!(trace_index(TraceKernel::Fc1, 1, word::EXIT) - trace_index(TraceKernel::Fc1, 0, word::EXIT), 10);
        for (i, k) in TraceKernel::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
    }
}
