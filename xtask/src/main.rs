//! `cargo xtask <command>`: moe4's build and check tasks.
//!
//! | command | what it does |
//! |---|---|
//! | `setup` | installs what the other commands need: the toolchain's components (rustup) and ptxas (PyPI wheel `nvidia-cuda-nvcc==13.0.88`, into `.tools/`) |
//! | `build-ptx` | builds the kernels for every architecture into `host/ptx/`, validates each with ptxas and prints registers, shared memory, stack and spills per kernel; a ptxas error, a spill, a stack frame or a serialized `wgmma` pipeline fails it |
//! | `check-ptx` | `build-ptx` into a scratch folder and fails if the committed PTX differs |
//! | `test` | the CI job: setup, check-ptx, fmt, clippy, `cargo test` |
//! | `demo` | the main job: quantize a random Qwen3-30B-A3B layer and report its error |
//! | `bench <decode\|prefill\|w4a4\|peak\|tune\|all>` | runs `moe4 bench` (needs a GPU) |
//! | `gpu-bundle` | builds the test and tool binaries and copies them with a run script to `.gpu/` for a GPU machine without Rust |
//! | `sass [--ptx FILE] KERNEL..` | the SASS of the sm_90a PTX (default `host/ptx/sm_90a.ptx`; an experimental `.ptx[.gz]` with `--ptx`) through ptxas and nvdisasm (PyPI wheel `nvidia-cuda-nvdisasm`, installed into `.tools/` on first use): per kernel whose name starts with a KERNEL, its instruction count and each loop that holds MMA instructions, with its length and most frequent opcodes (the instruction budget of a kernel's main loop, measured without a GPU) |
//! | `exp-ptx NAME CFG[,CFG..]` | builds the sm_90a PTX with `--cfg moe4_exp="CFG"` for each CFG (an experimental build), validates it as `build-ptx` does, and writes `.gpu/exp/NAME.ptx.gz` for `scripts/gpu-run.sh exp` (`gpu-bundle` keeps `.gpu/exp/`) |

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The architectures moe4 ships PTX for: (name, rustc target-cpu, extra target features).
const ARCHS: &[(&str, &str, &str)] = &[
    ("sm_89", "sm_89", "+ptx81"),
    ("sm_90", "sm_90", "+ptx81"),
    ("sm_90a", "sm_90a", "+ptx81"),
    ("sm_100a", "sm_100a", "+ptx86"),
    ("sm_120a", "sm_120a", "+ptx87"),
];
const PTXAS_WHEEL: &str = "nvidia-cuda-nvcc==13.0.88";
/// nvdisasm for `sass` (the oldest CUDA 13 release on PyPI; it reads the
/// cubins ptxas 13.0 writes).
const NVDISASM_WHEEL: &str = "nvidia-cuda-nvdisasm==13.2.51";

type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("setup") => setup(),
        Some("build-ptx") => build_ptx(&root().join("host/ptx")),
        Some("check-ptx") => check_ptx(),
        Some("test") => ci(),
        Some("demo") => cargo(&["run", "--release", "-p", "moe4", "--bin", "moe4", "--", "demo"]),
        Some("bench") => {
            let mut a = vec!["run", "--release", "-p", "moe4", "--bin", "moe4", "--", "bench"];
            a.extend(args[1..].iter().map(String::as_str));
            cargo(&a)
        }
        Some("gpu-bundle") => gpu_bundle(),
        Some("exp-ptx") if args.len() == 3 => exp_ptx(&args[1], &args[2]),
        Some("sass") if args.len() >= 2 => sass(&args[1..]),
        _ => Err(
            "usage: cargo xtask <setup|build-ptx|check-ptx|test|demo|bench KIND|gpu-bundle|exp-ptx NAME CFG[,CFG..]|sass [--ptx FILE] KERNEL..>"
                .into(),
        ),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn run(cmd: &mut Command) -> Result {
    let shown = format!("{cmd:?}");
    let st = cmd.status().map_err(|e| format!("{shown}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({st})"))
    }
}

fn cargo(args: &[&str]) -> Result {
    run(Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into())).args(args).current_dir(root()))
}

fn ptxas_path() -> PathBuf {
    root().join(".tools/nvcc/nvidia/cu13/bin/ptxas")
}

fn setup() -> Result {
    // The toolchain file names the components, but rustup adds them only
    // when it installs the toolchain; add them explicitly for a toolchain
    // that was already there.
    run(Command::new("rustup")
        .args(["component", "add", "rust-src", "llvm-tools", "llvm-bitcode-linker", "rustfmt", "clippy"])
        .current_dir(root()))?;
    if !ptxas_path().exists() {
        let py = if Command::new("python3").arg("--version").output().is_ok() { "python3" } else { "python" };
        run(Command::new(py)
            .args(["-m", "pip", "install", "--quiet", "--no-deps", "--target"])
            .arg(root().join(".tools/nvcc"))
            .arg(PTXAS_WHEEL))?;
    }
    let out = Command::new(ptxas_path()).arg("--version").output().map_err(|e| format!("ptxas: {e}"))?;
    println!("setup: {}", String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or(""));
    Ok(())
}

/// One kernel's resource line from `ptxas -v`.
struct Usage {
    kernel: String,
    regs: u32,
    smem: u32,
    stack: u32,
    spill_st: u32,
    spill_ld: u32,
}

fn parse_ptxas(log: &str) -> Vec<Usage> {
    let mut out: Vec<Usage> = Vec::new();
    let num = |s: &str, key: &str| -> u32 {
        s.find(key).and_then(|i| s[..i].split_whitespace().last()).and_then(|n| n.parse().ok()).unwrap_or(0)
    };
    // ptxas also reports device functions ("Function properties for X"
    // without a "Compiling entry function" line); only the entry's own
    // properties line belongs to it.
    let mut props_for = String::new();
    for line in log.lines() {
        if let Some(i) = line.find("Compiling entry function '") {
            let rest = &line[i + 26..];
            let name = rest[..rest.find('\'').unwrap_or(rest.len())].to_string();
            out.push(Usage { kernel: name, regs: 0, smem: 0, stack: 0, spill_st: 0, spill_ld: 0 });
        } else if let Some(i) = line.find("Function properties for ") {
            props_for = line[i + 24..].trim().to_string();
        } else if let Some(u) = out.last_mut() {
            if line.contains("bytes stack frame") && props_for == u.kernel {
                u.stack = num(line, "bytes stack frame");
                u.spill_st = num(line, "bytes spill stores");
                u.spill_ld = num(line, "bytes spill loads");
            } else if line.contains("Used") && line.contains("registers") {
                u.regs = num(line, "registers");
                u.smem = num(line, "bytes smem");
            }
        }
    }
    out
}

fn build_ptx(dest: &Path) -> Result {
    fs::create_dir_all(dest).map_err(|e| e.to_string())?;
    let mut failures = Vec::new();
    for (arch, cpu, features) in ARCHS {
        let out_path = dest.join(format!("{arch}.ptx"));
        failures.extend(build_arch(arch, cpu, features, &[], &root().join("target/ptx").join(arch), &out_path)?);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "kernels with local memory (spills or stack) or a serialized wgmma pipeline:\n  {}",
            failures.join("\n  ")
        ))
    }
}

/// Builds the kernels for one architecture (with `--cfg moe4_exp="X"` for
/// each of `exp`) into `out_path`, validates it with ptxas and prints each
/// kernel's resources; returns the kernels with local memory or a
/// serialized `wgmma` pipeline.
fn build_arch(
    arch: &str,
    cpu: &str,
    features: &str,
    exp: &[&str],
    target_dir: &Path,
    out_path: &Path,
) -> Result<Vec<String>> {
    if !ptxas_path().exists() {
        setup()?;
    }
    let mut flags: Vec<String> = ["-C", &format!("target-cpu={cpu}"), "-C", &format!("target-feature={features}")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    flags.extend(["--cfg".to_string(), format!("moe4_arch=\"{arch}\"")]);
    for x in exp {
        flags.extend(["--cfg".to_string(), format!("moe4_exp=\"{x}\"")]);
    }
    run(Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root())
        .env("RUSTC_BOOTSTRAP", "1") // build-std on stable, for this build only
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"))
        .args([
            "rustc",
            "-p",
            "moe4-kernels",
            "--profile",
            "ptx",
            "--target",
            "nvptx64-nvidia-cuda",
            "-Zbuild-std=core",
            "--crate-type",
            "cdylib",
            "--quiet",
            "--target-dir",
        ])
        .arg(target_dir))?;
    let built = target_dir.join("nvptx64-nvidia-cuda/ptx/moe4_kernels.ptx");
    let ptx = fs::read_to_string(&built).map_err(|e| format!("{}: {e}", built.display()))?;
    let ptx = if arch == "sm_120a" { ptx } else { add_launch_bounds(&ptx, exp) };
    fs::write(out_path, &ptx).map_err(|e| e.to_string())?;

    let o = Command::new(ptxas_path())
        .args(["-v", "--warn-on-spills", &format!("-arch={arch}")])
        .arg(out_path)
        .args(["-o", "/dev/null"])
        .output()
        .map_err(|e| format!("ptxas: {e}"))?;
    let log = String::from_utf8_lossy(&o.stderr).to_string() + &String::from_utf8_lossy(&o.stdout);
    if !o.status.success() {
        return Err(format!("ptxas rejected {arch}:\n{log}"));
    }
    println!("{arch}: {} bytes of PTX", ptx.len());
    println!("  {:<28} {:>5} {:>7} {:>6} {:>7}", "kernel", "regs", "smem", "stack", "spills");
    let mut failures = Vec::new();
    let mut usages = parse_ptxas(&log);
    usages.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    for u in &usages {
        println!("  {:<28} {:>5} {:>7} {:>6} {:>3}/{:<3}", u.kernel, u.regs, u.smem, u.stack, u.spill_st, u.spill_ld);
        if u.stack > 0 || u.spill_st > 0 || u.spill_ld > 0 {
            failures.push(format!("{arch} {}: stack {} spills {}/{}", u.kernel, u.stack, u.spill_st, u.spill_ld));
        }
    }
    if usages.is_empty() {
        failures.push(format!("{arch}: ptxas reported no kernels"));
    }
    // ptxas serializes a wgmma pipeline it cannot prove safe (C7514
    // and kin): correct but slow, so a build error here.
    for line in log.lines().filter(|l| l.contains("wgmma") && l.contains("serialized")) {
        failures.push(format!("{arch}: {}", line.trim()));
    }
    Ok(failures)
}

/// `exp-ptx NAME CFGS`: the sm_90a PTX built with the experimental cfgs
/// `CFGS` (comma-separated), as `.gpu/exp/NAME.ptx.gz`.
fn exp_ptx(name: &str, cfgs: &str) -> Result {
    let exp: Vec<&str> = cfgs.split(',').filter(|c| !c.is_empty()).collect();
    let dir = root().join(".gpu/exp");
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let out = dir.join(format!("{name}.ptx"));
    let (arch, cpu, features) = ARCHS.iter().find(|a| a.0 == "sm_90a").expect("sm_90a is one of ARCHS");
    let mut failures = build_arch(arch, cpu, features, &exp, &root().join("target/ptx-exp").join(name), &out)?;
    if exp.iter().any(|c| EXP_SPILLS_ALLOWED.contains(c)) {
        let (spills, rest): (Vec<String>, Vec<String>) = failures.into_iter().partition(|f| f.contains(": stack "));
        for f in &spills {
            println!("exp-ptx: allowed in this build: {f}");
        }
        failures = rest;
    }
    if !failures.is_empty() {
        return Err(format!("{name}: {}", failures.join("\n  ")));
    }
    run(Command::new("gzip").args(["-9", "-f"]).arg(&out))?;
    println!("exp-ptx: .gpu/exp/{name}.ptx.gz ({})", exp.join(", "));
    Ok(())
}

/// Launch bounds rustc cannot express (CUDA's `__launch_bounds__`): kernels
/// whose name starts with the prefix (or, for a pattern ending in `$`, is
/// the name before it) get `.maxntid threads` and `.minnctapersm blocks`,
/// so ptxas keeps them within the registers that many blocks per SM allow.
/// The host launches them with these threads. Not applied to sm_120a,
/// whose code for the same kernels needs more registers (it would spill).
const LAUNCH_BOUNDS: &[(&str, u32, u32)] = &[
    ("moe_fc1_bf16_nt1_w8", 256, 3),
    ("moe_fc1_f16_nt1_w8", 256, 3),
    ("moe_fc2_bf16_nt1_w8", 256, 3),
    ("moe_fc2_f16_nt1_w8", 256, 3),
    // The `moe4_exp = "deps"` build's 4-warp NT = 2 FC2 kernels: 4 blocks
    // per SM, as the kernels without `_dp` (128 registers; the readiness
    // counters' waits took them to 129-130 on their own).
    ("moe_fc2_bf16_nt2_dp$", 128, 4),
    ("moe_fc2_f16_nt2_dp$", 128, 4),
    // The FC kernels whose task-switch reciprocals (kernels/src/fastdiv.rs)
    // took them past 6 blocks' registers (94 instead of 80). (Not for
    // `moe_fc1_bf16_nt2_r64`, 129 instead of 128 registers, which would
    // spill 24 bytes at 4 blocks: it runs with 3 there.)
    ("moe_fc1_bf16_nt1$", 128, 6),
    ("moe_fc1_f16_nt1$", 128, 6),
    ("moe_fc2_f16_nt1$", 128, 6),
    // The 6-warp kernels of the `moe4_exp = "w6"` build (4 blocks per SM).
    ("moe_fc1_bf16_nt1_w6", 192, 4),
    ("moe_fc1_f16_nt1_w6", 192, 4),
];

/// Launch bounds of experimental builds only, `(cfg, pattern, threads,
/// blocks)`: applied (before [`LAUNCH_BOUNDS`]) where the build has
/// `moe4_exp = cfg`, to kernels whose names the default build shares.
const EXP_LAUNCH_BOUNDS: &[(&str, &str, u32, u32)] = &[
    // The `trace` build: the blocks per SM of the default build, which its
    // timeline notes' few registers would lower (3 instead of 4; its 4-warp
    // NT = 1 FC1 kernels keep 6 through [`LAUNCH_BOUNDS`]). (Not for
    // `moe_fc1_bf16_nt2_r64`, which would spill 36 bytes at 4 blocks: it
    // runs with 3 there.)
    ("trace", "moe_fc2_bf16_nt2$", 128, 4),
    ("trace", "moe_fc2_f16_nt2$", 128, 4),
];

/// Experimental builds whose kernels may use local memory (reported, not
/// an error): the `trace` build, a measuring tool whose notes cost the
/// 8-warp FC2 kernels, already at their 80-register bound, a spilled word;
/// the `deps` build, whose 8-warp bf16 FC2 that routes in the block
/// (`moe_fc2_bf16_nt1_w8_rt_dp`) spills a word at the same bound; the
/// `tma` build, whose mixed TMA-fed FC2 spills a word (a shared base
/// address, outside the k-loop).
const EXP_SPILLS_ALLOWED: &[&str] = &["trace", "deps", "tma"];

/// Inserts the [`LAUNCH_BOUNDS`] directives (and those of
/// [`EXP_LAUNCH_BOUNDS`] for the experimental cfgs `exp`) after each
/// matching entry's parameter list.
fn add_launch_bounds(ptx: &str, exp: &[&str]) -> String {
    let mut out = String::with_capacity(ptx.len() + 1024);
    let mut pending: Option<(u32, u32)> = None;
    let exp_bounds = EXP_LAUNCH_BOUNDS.iter().filter(|b| exp.contains(&b.0)).map(|&(_, p, t, b)| (p, t, b));
    let bounds: Vec<(&str, u32, u32)> = exp_bounds.chain(LAUNCH_BOUNDS.iter().copied()).collect();
    for line in ptx.split_inclusive('\n') {
        if let Some(name) = line.strip_prefix(".visible .entry ").and_then(|r| r.split('(').next()) {
            let hit = |p: &str| p.strip_suffix('$').map_or_else(|| name.starts_with(p), |exact| name == exact);
            pending = bounds.iter().find(|(p, _, _)| hit(p)).map(|&(_, t, b)| (t, b));
        }
        out.push_str(line);
        if let Some((t, b)) = pending {
            if line.starts_with(')') {
                out.push_str(&format!(".maxntid {t}, 1, 1\n.minnctapersm {b}\n"));
                pending = None;
            }
        }
    }
    out
}

fn check_ptx() -> Result {
    let scratch = root().join("target/ptx-check");
    build_ptx(&scratch)?;
    let mut stale = Vec::new();
    for (arch, _, _) in ARCHS {
        let fresh = fs::read(scratch.join(format!("{arch}.ptx"))).map_err(|e| e.to_string())?;
        let committed = fs::read(root().join(format!("host/ptx/{arch}.ptx"))).unwrap_or_default();
        if fresh != committed {
            stale.push(*arch);
        }
    }
    if stale.is_empty() {
        println!("check-ptx: host/ptx matches the kernel sources");
        Ok(())
    } else {
        Err(format!("host/ptx is stale for {stale:?}: run `cargo xtask build-ptx` and commit"))
    }
}

fn ci() -> Result {
    setup()?;
    check_ptx()?;
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])?;
    cargo(&["test", "--workspace", "--release"])?;
    // Docs build without broken links.
    run(Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root())
        .env("RUSTDOCFLAGS", "-D warnings")
        .args(["doc", "--no-deps", "-p", "moe4", "-p", "moe4-kernels", "--quiet"]))
}

/// `sass [--ptx FILE] KERNEL..`: see the module table.
fn sass(args: &[String]) -> Result {
    let (ptx, kernels): (PathBuf, &[String]) = match args {
        [flag, file, rest @ ..] if flag == "--ptx" => (PathBuf::from(file), rest),
        rest => (root().join("host/ptx/sm_90a.ptx"), rest),
    };
    if kernels.is_empty() {
        return Err("sass: name at least one kernel (a prefix of its name)".into());
    }
    if !ptxas_path().exists() {
        setup()?;
    }
    let nvdisasm = root().join(".tools/nvdisasm/nvidia/cu13/bin/nvdisasm");
    if !nvdisasm.exists() {
        let py = if Command::new("python3").arg("--version").output().is_ok() { "python3" } else { "python" };
        run(Command::new(py)
            .args(["-m", "pip", "install", "--quiet", "--no-deps", "--target"])
            .arg(root().join(".tools/nvdisasm"))
            .arg(NVDISASM_WHEEL))?;
    }
    let dir = root().join("target/sass");
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let src = if ptx.extension().is_some_and(|e| e == "gz") {
        let out = Command::new("gzip").arg("-dc").arg(&ptx).output().map_err(|e| format!("gzip: {e}"))?;
        let plain = dir.join("input.ptx");
        fs::write(&plain, out.stdout).map_err(|e| e.to_string())?;
        plain
    } else {
        ptx
    };
    let cubin = dir.join("sm_90a.cubin");
    run(Command::new(ptxas_path()).arg("-arch=sm_90a").arg(&src).arg("-o").arg(&cubin))?;
    let out = Command::new(&nvdisasm).arg("-c").arg(&cubin).output().map_err(|e| format!("nvdisasm: {e}"))?;
    if !out.status.success() {
        return Err(format!("nvdisasm: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut found = false;
    for (name, body) in sass_functions(&text) {
        if !kernels.iter().any(|k| name.starts_with(k.as_str())) {
            continue;
        }
        found = true;
        let ins = sass_instructions(body);
        println!("{name}: {} instructions", ins.ins.len());
        for l in sass_mma_loops(&ins) {
            let top: Vec<String> = l.ops.iter().take(16).map(|(op, n)| format!("{op} {n}")).collect();
            println!("  loop [{}..{}]: {} instructions, {} MMA: {}", l.start, l.end, l.len, l.mma, top.join(", "));
        }
    }
    if found {
        Ok(())
    } else {
        Err(format!("sass: no kernel starts with {kernels:?}"))
    }
}

/// The functions of nvdisasm's output: (name, text up to the next one).
fn sass_functions(text: &str) -> Vec<(&str, &str)> {
    let mut starts: Vec<(usize, &str)> = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if let Some(name) = line.trim().strip_prefix(".text.").and_then(|r| r.strip_suffix(':')) {
            starts.push((at, name));
        }
        at += line.len();
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &(a, name))| (name, &text[a..starts.get(i + 1).map_or(text.len(), |s| s.0)]))
        .collect()
}

/// A function's instructions (the text between an address comment and the
/// `;`) and, for each label line, the index of the instruction after it.
struct Sass {
    ins: Vec<String>,
    labels: Vec<(String, usize)>,
}

fn sass_instructions(body: &str) -> Sass {
    let mut ins = Vec::new();
    let mut labels = Vec::new();
    for line in body.lines() {
        let t = line.trim();
        if let Some(l) = t.strip_suffix(':').filter(|l| l.starts_with(".L_")) {
            labels.push((l.to_string(), ins.len()));
        } else if let Some(rest) = t.strip_prefix("/*").and_then(|r| r.split_once("*/")) {
            if rest.0.chars().all(|c| c.is_ascii_hexdigit()) && !rest.0.is_empty() {
                let i = rest.1.trim();
                if let Some(i) = i.split(';').next().filter(|i| !i.is_empty()) {
                    ins.push(i.trim().to_string());
                }
            }
        }
    }
    Sass { ins, labels }
}

/// A loop (a branch back to a label) holding MMA instructions.
struct SassLoop {
    start: usize,
    end: usize,
    len: usize,
    mma: usize,
    ops: Vec<(String, usize)>,
}

/// The opcode of an instruction, without its guard and modifiers.
fn sass_opcode(i: &str) -> &str {
    let i = if i.starts_with('@') { i.split_once(' ').map_or(i, |x| x.1.trim_start()) } else { i };
    i.split([' ', '.']).next().unwrap_or(i)
}

fn sass_mma_loops(s: &Sass) -> Vec<SassLoop> {
    let mut loops = Vec::new();
    for (end, i) in s.ins.iter().enumerate() {
        if sass_opcode(i) != "BRA" {
            continue;
        }
        let Some(target) = i.split('(').nth(1).and_then(|r| r.split(')').next()) else { continue };
        let Some(&(_, start)) = s.labels.iter().find(|(l, _)| l == target) else { continue };
        if start > end {
            continue;
        }
        let body = &s.ins[start..=end];
        let mma = body.iter().filter(|i| ["HMMA", "HGMMA", "IMMA", "IGMMA"].contains(&sass_opcode(i))).count();
        if mma == 0 {
            continue;
        }
        let mut ops: Vec<(String, usize)> = Vec::new();
        for i in body {
            let op = sass_opcode(i);
            match ops.iter_mut().find(|(o, _)| o == op) {
                Some(e) => e.1 += 1,
                None => ops.push((op.to_string(), 1)),
            }
        }
        ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        loops.push(SassLoop { start, end, len: body.len(), mma, ops });
    }
    loops
}

fn gpu_bundle() -> Result {
    let dir = root().join(".gpu");
    // Everything but the experimental PTX (`exp-ptx`) goes.
    if let Ok(entries) = fs::read_dir(&dir) {
        for f in entries.flatten().filter(|f| f.file_name() != "exp") {
            let path = f.path();
            let _ = if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        }
    }
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let cargo_bin = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo_bin)
        .current_dir(root())
        .args(["test", "--release", "-p", "moe4", "--no-run", "--message-format=json"])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("cargo test --no-run failed:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    let mut names = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if !line.contains("\"executable\":\"") || !line.contains("\"test\":true") || line.contains("\"kind\":[\"bin\"]")
        {
            continue;
        }
        let exe = line.split("\"executable\":\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or("");
        let name = line.split("\"name\":\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or("t").to_string();
        let kind = if line.contains("\"kind\":[\"lib\"]") { "lib".to_string() } else { name };
        fs::copy(exe, dir.join(format!("test-{kind}"))).map_err(|e| e.to_string())?;
        names.push(format!("test-{kind}"));
    }
    cargo(&["build", "--release", "-p", "moe4", "--bin", "moe4"])?;
    fs::copy(root().join("target/release/moe4"), dir.join("moe4")).map_err(|e| e.to_string())?;
    // Smaller to carry; the GPU machine needs no symbols.
    for f in fs::read_dir(&dir).map_err(|e| e.to_string())? {
        let _ = Command::new("strip").arg(f.map_err(|e| e.to_string())?.path()).status();
    }
    // Embedded PTX is text, and every binary holds the same: xz with a
    // 64 MiB window (one thread, so the window spans the binaries)
    // compresses the copies after the first to almost nothing.
    let mut files: Vec<String> = vec!["moe4".into()];
    files.extend(names.iter().cloned());
    run(Command::new("tar").current_dir(&dir).env("XZ_OPT", "-9 -T1").arg("cJf").arg("bundle.tar.xz").args(&files))?;
    for f in &files {
        let _ = fs::remove_file(dir.join(f));
    }
    println!("gpu-bundle: .gpu/bundle.tar.xz holds moe4 and {}", names.join(", "));
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn launch_bounds_go_after_the_parameter_list() {
        let ptx = ".visible .entry moe_fc2_bf16_nt1_w8(\n\t.param .align 8 .b8 p[136]\n)  // @x\n{\n}\n.visible .entry other(\n)\n{\n}\n";
        let out = super::add_launch_bounds(ptx, &[]);
        assert!(out.contains(")  // @x\n.maxntid 256, 1, 1\n.minnctapersm 3\n{"), "{out}");
        assert_eq!(out.matches(".maxntid").count(), 1);
    }

    #[test]
    fn an_exact_launch_bound_skips_longer_names() {
        let ptx = ".visible .entry moe_fc2_f16_nt2_dp(\n)\n{\n}\n.visible .entry moe_fc2_f16_nt2_dp_x(\n)\n{\n}\n";
        let out = super::add_launch_bounds(ptx, &[]);
        assert!(out.contains("moe_fc2_f16_nt2_dp(\n)\n.maxntid 128, 1, 1\n.minnctapersm 4\n{"), "{out}");
        assert_eq!(out.matches(".maxntid").count(), 1);
    }

    #[test]
    fn experimental_launch_bounds_only_in_their_build() {
        let ptx = ".visible .entry moe_fc2_bf16_nt2(\n)\n{\n}\n.visible .entry moe_fc2_bf16_nt2_r64(\n)\n{\n}\n";
        assert_eq!(super::add_launch_bounds(ptx, &[]), ptx);
        let out = super::add_launch_bounds(ptx, &["trace"]);
        assert!(out.contains("moe_fc2_bf16_nt2(\n)\n.maxntid 128, 1, 1\n.minnctapersm 4\n{"), "{out}");
        assert_eq!(out.matches(".maxntid").count(), 1);
    }

    #[test]
    fn finds_the_mma_loops_of_sass() {
        let text = "\t.text.k1:\n        /*0000*/   MOV R1, c[0x0][0x28] ;\n.L_x_1:\n        /*0010*/   LOP3.LUT R2, R2, 0xf, RZ, 0xc0, !PT ;\n        /*0020*/   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;\n        /*0030*/   @P0 BRA `(.L_x_1) ;\n        /*0040*/   EXIT ;\n\t.text.k2:\n        /*0000*/   EXIT ;\n";
        let f = super::sass_functions(text);
        assert_eq!(f.iter().map(|x| x.0).collect::<Vec<_>>(), ["k1", "k2"]);
        let s = super::sass_instructions(f[0].1);
        assert_eq!(s.ins.len(), 5);
        let l = super::sass_mma_loops(&s);
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].start, l[0].end, l[0].len, l[0].mma), (1, 3, 3, 1));
        assert_eq!(super::sass_opcode("@P0 BRA `(.L_x_1)"), "BRA");
        assert!(l[0].ops.contains(&("LOP3".to_string(), 1)));
        assert!(super::sass_mma_loops(&super::sass_instructions(f[1].1)).is_empty());
    }

    #[test]
    fn parses_ptxas_resource_lines() {
        let log = "ptxas info    : Compiling entry function 'k' for 'sm_90'\nptxas info    : Function properties for k\n    272 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\nptxas info    : Used 64 registers, used 1 barriers, 272 bytes cumulative stack size, 1024 bytes smem\nptxas info    : Function properties for helper\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
        let u = super::parse_ptxas(log);
        assert_eq!(u.len(), 1);
        assert_eq!((u[0].regs, u[0].stack, u[0].spill_st, u[0].spill_ld, u[0].smem), (64, 272, 8, 4, 1024));
    }
}
