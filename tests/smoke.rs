//! GPU smoke test: one mma.sync per type, every E4M3 pair through the
//! hardware convert, every E2M1 code x E4M3 scale through the decode
//! kernels' dequant step, all compared with the CPU exactly. Also runs the
//! sm_89 build on newer GPUs (its PTX is forward compatible), so the Ada
//! code paths are exercised on a Hopper.

mod common;
use moe4::{Arch, Gpu};

fn check(gpu: &std::sync::Arc<Gpu>, label: &str) {
    let checks = moe4::smoke::run(gpu, 42).expect("smoke kernels ran");
    let mut failed = Vec::new();
    for c in &checks {
        common::report(&format!("smoke [{label}] {}: {} / {} mismatches", c.name, c.mismatches, c.total));
        assert!(c.total > 0, "{} compared nothing", c.name);
        if c.mismatches != 0 {
            failed.push(c.name);
        }
    }
    assert!(failed.is_empty(), "mismatches in {failed:?}");
}

#[test]
fn smoke_native_build() {
    let Some(gpu) = common::gpu("smoke_native_build") else { return };
    check(&gpu, gpu.arch().name());
}

#[test]
fn smoke_sm89_build() {
    let Some(gpu) = common::gpu("smoke_sm89_build") else { return };
    if gpu.arch() == Arch::Sm89 {
        return; // already the native build
    }
    let g89 = Gpu::with_arch(gpu.context().clone(), Arch::Sm89).expect("load the sm_89 PTX");
    check(&g89, "sm_89 PTX");
}
