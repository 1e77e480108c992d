//! The kernels' PTX, embedded at build time (one file per architecture,
//! written by `cargo xtask build-ptx` and checked in, so `cargo build` needs
//! no GPU toolchain), and the choice of which one a device runs.

use crate::error::{Error, Result};

/// A PTX build of the kernels crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Ada (compute capability 8.9); PTX ISA 8.1. Runs on any newer GPU too.
    Sm89,
    /// Hopper (9.0) and, by JIT, any newer GPU without its own build.
    Sm90,
    /// Hopper (9.0), arch-specific: adds the `wgmma` prefill kernels. The
    /// build a 9.0 device gets by default.
    Sm90a,
    /// Blackwell datacenter (10.0), arch-specific.
    Sm100a,
    /// Blackwell consumer (12.0), arch-specific.
    Sm120a,
}

impl Arch {
    /// The PTX text.
    pub fn ptx(self) -> &'static str {
        match self {
            Arch::Sm89 => include_str!("../ptx/sm_89.ptx"),
            Arch::Sm90 => include_str!("../ptx/sm_90.ptx"),
            Arch::Sm90a => include_str!("../ptx/sm_90a.ptx"),
            Arch::Sm100a => include_str!("../ptx/sm_100a.ptx"),
            Arch::Sm120a => include_str!("../ptx/sm_120a.ptx"),
        }
    }

    /// Its name, as in `sm_90`.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
            Arch::Sm100a => "sm_100a",
            Arch::Sm120a => "sm_120a",
        }
    }

    /// Every build, oldest first.
    pub const ALL: [Arch; 5] = [Arch::Sm89, Arch::Sm90, Arch::Sm90a, Arch::Sm100a, Arch::Sm120a];

    /// Parses `sm_89`, `sm_90`, `sm_90a`, `sm_100a`, `sm_120a`.
    pub fn from_name(s: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == s)
    }

    /// The build for a device of compute capability `major.minor`: its own
    /// build where there is one, else the newest forward-compatible one.
    /// Below 8.9 there is none (the E4M3 convert needs sm_89).
    pub fn for_capability(major: i32, minor: i32) -> Result<Arch> {
        match (major, minor) {
            (9, 0) => Ok(Arch::Sm90a),
            (10, 0) => Ok(Arch::Sm100a),
            (12, 0) => Ok(Arch::Sm120a),
            (m, _) if m >= 9 => Ok(Arch::Sm90),
            (8, n) if n >= 9 => Ok(Arch::Sm89),
            _ => Err(Error::UnsupportedGpu { major, minor }),
        }
    }

    /// True where `mma.m16n8k64.s4` is native (Ada); elsewhere the W4A4 GEMM
    /// unpacks to s8.
    pub fn native_int4_mma(self) -> bool {
        self == Arch::Sm89
    }

    /// True where the build has the `wgmma` prefill kernels (`moe_pfw*`).
    pub fn has_wgmma(self) -> bool {
        self == Arch::Sm90a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_picks_a_build() {
        assert_eq!(Arch::for_capability(8, 9).unwrap(), Arch::Sm89);
        assert_eq!(Arch::for_capability(9, 0).unwrap(), Arch::Sm90a);
        assert_eq!(Arch::for_capability(9, 1).unwrap(), Arch::Sm90);
        assert_eq!(Arch::for_capability(10, 0).unwrap(), Arch::Sm100a);
        assert_eq!(Arch::for_capability(10, 3).unwrap(), Arch::Sm90);
        assert_eq!(Arch::for_capability(12, 0).unwrap(), Arch::Sm120a);
        let e = Arch::for_capability(8, 6).unwrap_err().to_string();
        assert!(e.contains("8.6") && e.contains("sm_89"), "{e}");
        assert!(Arch::for_capability(7, 0).is_err());
    }

    /// Every kernel's barriers, as written in its source (loops unrolled as
    /// the source unrolls them). A per-thread branch LLVM threads past a
    /// barrier duplicates the barrier on both sides (rustc does not mark
    /// kernel code convergent) and can hang the block, as `moe_route` did
    /// once (5 barriers instead of 4; docs/gpu-results.md, run 19). A
    /// kernel change that adds or removes a barrier updates this table.
    /// The divergence-safe `barrier.sync` (`sync_divergent`: the `_rt`
    /// kernels' routing, `smoke_tma_tile`) may be duplicated, so those are
    /// only required to be there; the table counts the `.aligned`
    /// `bar.sync`.
    #[test]
    fn every_kernel_keeps_its_barriers() {
        fn expected(k: &str) -> usize {
            match k {
                "moe_route" => 4,
                "moe_route_count" => 2,
                "moe_route_scan" | "moe_route_scatter" => 1,
                // The W4A4 schedule (3), 2 per stage x 4 unrolled, 2 per
                // tile, 1 in the staged 16-bit epilogue.
                "w4a4_gemm_wg_i32" => 13,
                _ if k.starts_with("w4a4_gemm_wg_") => 14,
                // The schedule (3), 1 per stage, 1 per tile.
                _ if k.starts_with("w4a4_gemm_bm") => 5,
                // 1 per chunk x 4 unrolled, 2 per tile (the second before
                // the staged epilogue's bulk copies); the mixed-width
                // kernels run two such tile loops with 1 between them.
                _ if k.starts_with("moe_pfw") && k.ends_with("_mix") => 13,
                // The 128-row kernels: 1 per chunk x 5 unrolled (the
                // stages), 2 per tile; mixed: those, 1 between, the
                // 128-pair loop's 6.
                _ if k.starts_with("moe_pfw") && k.ends_with("_n256") => 7,
                _ if k.starts_with("moe_pfw") && k.ends_with("_mix256") => 14,
                _ if k.starts_with("moe_pfw") => 6,
                // One warpgroup's B tile copied in, then one `wgmma`.
                "smoke_wgmma_n256_bf16" => 1,
                // FC2: 2 in each split phase, and it has two (after whole
                // rounds, or alone with the copies before the wait: `PRE`),
                // block-uniform alternatives.
                _ if k.starts_with("moe_fc2") => 4,
                _ if k.starts_with("moe_fc") || k.starts_with("moe_pf") => 2,
                _ => 0,
            }
        }
        for a in Arch::ALL {
            let ptx = a.ptx();
            let mut seen = 0;
            for part in ptx.split(".visible .entry ").skip(1) {
                let name = &part[..part.find('(').expect("entry name")];
                let body = &part[..part.find("\n}").expect("kernel body")];
                let n = body.matches("bar.sync").count();
                assert_eq!(n, expected(name), "{}: {name} has {n} barriers", a.name());
                let divergent = body.matches("barrier.sync").count();
                if name.ends_with("_rt") {
                    assert!(divergent >= 3, "{}: {name} has {divergent} barrier.sync, at least 3", a.name());
                } else if name == "smoke_tma_tile" {
                    // The one after thread 0's `mbarrier.init`.
                    assert!(divergent >= 1, "{}: {name} has {divergent} barrier.sync, at least 1", a.name());
                } else {
                    assert_eq!(divergent, 0, "{}: {name} has {divergent} barrier.sync", a.name());
                }
                seen += 1;
            }
            assert!(seen > 30, "{}: only {seen} kernels found", a.name());
        }
    }

    #[test]
    fn every_build_is_embedded_and_has_the_kernels() {
        for a in Arch::ALL {
            let ptx = a.ptx();
            assert!(ptx.contains(&format!(".target {}", a.name())), "{}", a.name());
            for k in [
                "moe_route",
                "moe_fc1_bf16_nt1",
                "moe_fc2_f16_nt4",
                "moe_combine_bf16",
                "w4a4_gemm_bm128_bf16",
                "smoke_dequant",
            ] {
                assert!(ptx.contains(&format!(".entry {k}(")), "{} lacks {k}", a.name());
            }
            assert_eq!(Arch::from_name(a.name()), Some(a));
            for k in [
                "moe_pfw1_bf16_n128",
                "moe_pfw2_f16_n64",
                "moe_pfw1_bf16_mix",
                "moe_pfw2_f16_mix",
                "moe_pfw1_bf16_n256",
                "moe_pfw2_f16_mix256",
                "smoke_wgmma_n256_bf16",
            ] {
                assert_eq!(ptx.contains(&format!(".entry {k}(")), a.has_wgmma(), "{} and {k}", a.name());
            }
        }
    }
}
