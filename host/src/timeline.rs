//! `moe4 bench timeline`: where each kernel of a decode layer call starts,
//! waits, gets its first data and ends, from the notes of a `trace` build
//! (`moe4_exp = "trace"`, loaded with `MOE4_PTX_FILE`; the buffer's layout
//! is [`moe4_kernels::trace`]). Nsight Systems does not run on the GPU
//! machines this project is measured on, and Nsight Compute times kernels
//! one at a time, so neither shows how a call's kernels overlap.
//!
//! Each SM's cycle counter is its own, so every time is taken on the SM it
//! was noted on, relative to the moment FC1's blocks on that SM saw their
//! launch dependency met (`griddepcontrol.wait` returned: the call's
//! inputs ready), which is one GPU-wide moment. Cycles become microseconds
//! at the rate the notes' own global-timer readings give.

use crate::bench::{capture, decode_calls, decode_layer, forward_calls, time_ms, DecodeCalls, DecodeLayer, Shape};
use crate::error::{unsupported, Result};
use crate::gpu::Gpu;
use cudarc::driver::CudaStream;
use moe4_kernels::trace::{trace_index, word, TraceKernel, TRACE_BLOCKS, TRACE_LEN, TRACE_SYMBOL};
use std::fmt::Write as _;
use std::sync::Arc;

/// The events of a block, in the order a block meets them.
pub const EVENTS: [&str; 6] =
    ["start", "dependency met", "plan known", "first data (earliest warp)", "first data (latest warp)", "done"];

/// Minimum, median and maximum over a kernel's blocks, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The earliest block.
    pub min: f64,
    /// The median block.
    pub median: f64,
    /// The latest block.
    pub max: f64,
}

/// One kernel's blocks in a call.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTimes {
    /// Which kernel.
    pub kernel: TraceKernel,
    /// Blocks noted.
    pub blocks: usize,
    /// FC kernels: the tasks of the call (0 for the others).
    pub tasks: u64,
    /// Per event of [`EVENTS`]: when, relative to FC1's dependency met on
    /// the block's SM (`None`: the kernel does not note that event).
    pub at: [Option<Spread>; 6],
}

/// The timeline of one decode point.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// Shape name.
    pub shape: &'static str,
    /// Tokens.
    pub m: usize,
    /// Microseconds per call of the traced graph (the notes included).
    pub call_us: f64,
    /// The SMs' clock in GHz, as the notes measured it.
    pub clock_ghz: f64,
    /// The kernels that ran, in launch order; each spread the median over
    /// the traced replays.
    pub kernels: Vec<KernelTimes>,
}

/// One block's words.
struct Block {
    sm: u64,
    w: [u64; moe4_kernels::trace::TRACE_WORDS],
}

/// The kernels' times in one read of the buffer (`None` if FC1 noted no
/// block: not a decode call of a `trace` build).
pub fn analyze(buf: &[u64]) -> Option<(Vec<KernelTimes>, f64)> {
    if buf.len() < TRACE_LEN {
        return None;
    }
    let blocks = |k: TraceKernel| -> Vec<Block> {
        (0..TRACE_BLOCKS)
            .filter_map(|b| {
                let at = trace_index(k, b, 0);
                let sm = buf[at + word::SM];
                (sm != 0).then(|| Block {
                    sm: sm - 1,
                    w: buf[at..at + moe4_kernels::trace::TRACE_WORDS].try_into().expect("a block's words"),
                })
            })
            .collect()
    };
    // Each SM's reference: the median of its FC1 blocks' "dependency met".
    let fc1 = blocks(TraceKernel::Fc1);
    let mut per_sm: std::collections::HashMap<u64, Vec<u64>> = std::collections::HashMap::new();
    for b in fc1.iter().filter(|b| b.w[word::WAITED] != 0) {
        per_sm.entry(b.sm).or_default().push(b.w[word::WAITED]);
    }
    if per_sm.is_empty() {
        return None;
    }
    let reference: std::collections::HashMap<u64, u64> = per_sm
        .into_iter()
        .map(|(sm, mut v)| {
            v.sort_unstable();
            (sm, v[v.len() / 2])
        })
        .collect();
    // Cycles per nanosecond: every block's span in both clocks.
    let (mut cyc, mut ns) = (0f64, 0f64);
    let all: Vec<(TraceKernel, Vec<Block>)> = TraceKernel::ALL.iter().map(|&k| (k, blocks(k))).collect();
    for b in all.iter().flat_map(|(_, v)| v) {
        let (c0, c1, g0, g1) = (b.w[word::ENTRY], b.w[word::EXIT], b.w[word::GT_ENTRY], b.w[word::GT_EXIT]);
        if c0 != 0 && c1 > c0 && g0 != 0 && g1 > g0 {
            cyc += (c1 - c0) as f64;
            ns += (g1 - g0) as f64;
        }
    }
    let ghz = if ns > 0.0 { cyc / ns } else { return None };
    let mut out = Vec::new();
    for (k, v) in all {
        let v: Vec<&Block> = v.iter().filter(|b| reference.contains_key(&b.sm)).collect();
        if v.is_empty() {
            continue;
        }
        let fc = matches!(k, TraceKernel::Fc1 | TraceKernel::Fc2);
        let mut at = [None; 6];
        for (i, slot) in at.iter_mut().enumerate() {
            let (w, not) = match i {
                0 => (word::ENTRY, false),
                1 => (word::WAITED, false),
                2 if fc => (word::PLANNED, false),
                3 if fc => (word::FIRST_MIN_NOT, true),
                4 if fc => (word::FIRST_MAX, false),
                5 => (word::EXIT, false),
                _ => continue,
            };
            let mut us: Vec<f64> = v
                .iter()
                .filter(|b| b.w[w] != 0)
                .map(|b| {
                    let c = if not { !b.w[w] } else { b.w[w] };
                    (c as i64).wrapping_sub(reference[&b.sm] as i64) as f64 / (1e3 * ghz)
                })
                .collect();
            if us.is_empty() {
                continue;
            }
            us.sort_by(|a, b| a.total_cmp(b));
            *slot = Some(Spread { min: us[0], median: us[us.len() / 2], max: us[us.len() - 1] });
        }
        let tasks = if fc { v.iter().map(|b| b.w[word::TASKS]).max().unwrap_or(0) } else { 0 };
        out.push(KernelTimes { kernel: k, blocks: v.len(), tasks, at });
    }
    Some((out, ghz))
}

/// The element-wise median of several reads' spreads (kernels that ran in
/// every read).
fn median_over(reads: &[Vec<KernelTimes>]) -> Vec<KernelTimes> {
    let Some(first) = reads.first() else { return Vec::new() };
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let mut out = Vec::new();
    for k in first {
        let same: Vec<&KernelTimes> = reads.iter().filter_map(|r| r.iter().find(|x| x.kernel == k.kernel)).collect();
        if same.len() != reads.len() {
            continue;
        }
        let mut at = [None; 6];
        for (i, slot) in at.iter_mut().enumerate() {
            let s: Vec<Spread> = same.iter().filter_map(|x| x.at[i]).collect();
            if s.len() == same.len() {
                *slot = Some(Spread {
                    min: med(s.iter().map(|x| x.min).collect()),
                    median: med(s.iter().map(|x| x.median).collect()),
                    max: med(s.iter().map(|x| x.max).collect()),
                });
            }
        }
        let blocks = same.iter().map(|x| x.blocks).max().unwrap_or(0);
        out.push(KernelTimes { kernel: k.kernel, blocks, tasks: k.tasks, at });
    }
    out
}

/// The timelines of the decode layer for `shape` at each of `ms` tokens
/// (one layer, as the decode bench): per point a graph of the decode
/// bench's calls (rotating expert pools, weights from DRAM) replayed
/// `replays` times, the buffer read after each (the last call's notes),
/// the spreads' medians over the replays. Needs a `trace` build.
pub fn decode_timeline(
    gpu: &Arc<Gpu>,
    stream: &Arc<CudaStream>,
    shape: Shape,
    ms: &[usize],
    replays: usize,
) -> Result<Vec<Timeline>> {
    if !gpu.has_global(TRACE_SYMBOL) {
        return Err(unsupported(
            "bench timeline",
            "this PTX",
            "needs a build with moe4_exp = \"trace\" (cargo xtask exp-ptx NAME trace; MOE4_PTX_FILE)",
        ));
    }
    let max_m = *ms.iter().max().unwrap_or(&1);
    let DecodeLayer { w, mut ws, x, mut out, mut rng } = decode_layer(gpu, stream, shape, max_m)?;
    let mut all = Vec::new();
    for &m in ms {
        let DecodeCalls { bufs, calls, .. } = decode_calls(stream, &w, shape, m, 64e6, &mut rng)?;
        let xv = x.slice(..m * shape.h);
        forward_calls(&w, &mut ws, stream, &xv, &mut out, &bufs)?;
        stream.synchronize()?;
        let graph = capture(stream, || forward_calls(&w, &mut ws, stream, &xv, &mut out, &bufs))?
            .ok_or_else(|| unsupported("bench timeline", "the capture", "gave no graph"))?;
        let call_us = time_ms(stream, 2, 20, || Ok(graph.launch()?))? * 1e3 / calls as f64;
        let mut reads = Vec::new();
        let mut ghz = Vec::new();
        for _ in 0..replays.max(1) {
            gpu.zero_global(stream, TRACE_SYMBOL)?;
            graph.launch()?;
            let buf = gpu.read_global_u64(stream, TRACE_SYMBOL)?;
            if let Some((k, g)) = analyze(&buf) {
                reads.push(k);
                ghz.push(g);
            }
        }
        if reads.is_empty() {
            return Err(unsupported("bench timeline", shape.name, "no FC1 block noted its times"));
        }
        ghz.sort_by(|a, b| a.total_cmp(b));
        all.push(Timeline {
            shape: shape.name,
            m,
            call_us,
            clock_ghz: ghz[ghz.len() / 2],
            kernels: median_over(&reads),
        });
    }
    Ok(all)
}

/// A markdown table of the gaps that matter, one row per point: when
/// FC1's first and last warps had their first data, when its last block
/// was done, when FC2's blocks saw FC1 complete (its release), FC2's last
/// block done, the combine released and done (latest blocks; µs after
/// FC1's release). A "-" where the kernel did not run.
pub fn timeline_summary(all: &[Timeline]) -> String {
    let mut s = String::from(
        "| shape | M | µs/call | FC1 first data | FC1 done | FC2 released | FC2 first data | FC2 done | combine released | combine done |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    );
    for t in all {
        let at = |k: TraceKernel, e: usize| {
            t.kernels
                .iter()
                .find(|x| x.kernel == k)
                .and_then(|x| x.at[e])
                .map_or("-".to_string(), |x| format!("{:.1}", x.max))
        };
        let _ = write!(
            s,
            "\n| {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
            t.shape,
            t.m,
            t.call_us,
            at(TraceKernel::Fc1, 4),
            at(TraceKernel::Fc1, 5),
            at(TraceKernel::Fc2, 1),
            at(TraceKernel::Fc2, 4),
            at(TraceKernel::Fc2, 5),
            at(TraceKernel::Combine, 1),
            at(TraceKernel::Combine, 5),
        );
    }
    s.push_str("\n\n(latest block, µs after FC1's dependency was met on the block's SM)\n");
    s
}

/// A markdown table of timelines: per kernel and event, the earliest /
/// median / latest block in µs after the call's inputs were ready.
pub fn timeline_table(all: &[Timeline]) -> String {
    let mut s = String::from("| shape | M | µs/call | kernel | blocks | tasks |");
    for e in EVENTS {
        let _ = write!(s, " {e} |");
    }
    s.push_str("\n|---|---:|---:|---|---:|---:|");
    s.push_str(&"---|".repeat(EVENTS.len()));
    for t in all {
        for (i, k) in t.kernels.iter().enumerate() {
            let head = if i == 0 { format!("{} | {} | {:.1}", t.shape, t.m, t.call_us) } else { " | | ".into() };
            let _ = write!(s, "\n| {head} | {} | {} | {} |", k.kernel.name(), k.blocks, k.tasks);
            for a in &k.at {
                match a {
                    Some(x) => {
                        let _ = write!(s, " {:.1} / {:.1} / {:.1} |", x.min, x.median, x.max);
                    }
                    None => s.push_str(" - |"),
                }
            }
        }
    }
    s.push_str("\n\n(times: earliest / median / latest block, µs after FC1's dependency was met on the block's SM)\n");
    s
}

/// The timelines as JSON.
pub fn timeline_json(all: &[Timeline]) -> String {
    let rows: Vec<String> = all
        .iter()
        .map(|t| {
            let ks: Vec<String> = t
                .kernels
                .iter()
                .map(|k| {
                    let ev: Vec<String> = k
                        .at
                        .iter()
                        .map(|a| a.map_or("null".into(), |x| format!("[{:.3},{:.3},{:.3}]", x.min, x.median, x.max)))
                        .collect();
                    format!(
                        "{{\"kernel\":\"{}\",\"blocks\":{},\"tasks\":{},\"at\":[{}]}}",
                        k.kernel.name(),
                        k.blocks,
                        k.tasks,
                        ev.join(",")
                    )
                })
                .collect();
            format!(
                "{{\"shape\":\"{}\",\"m\":{},\"call_us\":{:.3},\"clock_ghz\":{:.3},\"kernels\":[{}]}}",
                t.shape,
                t.m,
                t.call_us,
                t.clock_ghz,
                ks.join(",")
            )
        })
        .collect();
    format!("{{\"timeline\":[{}]}}", rows.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer with FC1 blocks on two SMs whose clocks differ by 1e6
    /// cycles, and an FC2 block on each, at 2 cycles per ns.
    fn synthetic() -> Vec<u64> {
        let mut buf = vec![0u64; TRACE_LEN];
        let mut put = |k: TraceKernel, b: usize, sm: u64, off: u64, ev: [u64; 6]| {
            let at = trace_index(k, b, 0);
            buf[at + word::SM] = sm + 1;
            buf[at + word::ENTRY] = off + ev[0];
            buf[at + word::WAITED] = off + ev[1];
            buf[at + word::PLANNED] = off + ev[2];
            buf[at + word::FIRST_MIN_NOT] = !(off + ev[3]);
            buf[at + word::FIRST_MAX] = off + ev[4];
            buf[at + word::EXIT] = off + ev[5];
            buf[at + word::GT_ENTRY] = 1_000_000 + ev[0] / 2;
            buf[at + word::GT_EXIT] = 1_000_000 + ev[5] / 2;
            buf[at + word::TASKS] = 384;
        };
        put(TraceKernel::Fc1, 0, 0, 10_000, [0, 2000, 3000, 5000, 6000, 12000]);
        put(TraceKernel::Fc1, 1, 7, 1_010_000, [0, 2000, 3000, 5000, 7000, 14000]);
        put(TraceKernel::Fc2, 0, 0, 10_000, [12000, 16000, 16100, 18000, 19000, 24000]);
        put(TraceKernel::Fc2, 1, 7, 1_010_000, [14000, 16000, 16100, 18000, 19000, 26000]);
        buf
    }

    #[test]
    fn times_are_per_sm_and_in_microseconds() {
        let (k, ghz) = analyze(&synthetic()).expect("FC1 noted");
        assert!((ghz - 2.0).abs() < 1e-9, "{ghz}");
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].kernel, TraceKernel::Fc1);
        assert_eq!(k[0].blocks, 2);
        assert_eq!(k[0].tasks, 384);
        // FC1's "dependency met" is the reference on both SMs.
        assert_eq!(k[0].at[1], Some(Spread { min: 0.0, median: 0.0, max: 0.0 }));
        // Entry 2000 cycles before it: -1 µs at 2 GHz.
        assert_eq!(k[0].at[0].map(|s| s.min), Some(-1.0));
        // First data, earliest warp (stored complemented): 3000 cycles after.
        assert_eq!(k[0].at[3].map(|s| s.max), Some(1.5));
        assert_eq!(k[0].at[5], Some(Spread { min: 5.0, median: 6.0, max: 6.0 }));
        assert_eq!(k[1].kernel, TraceKernel::Fc2);
        assert_eq!(k[1].at[1], Some(Spread { min: 7.0, median: 7.0, max: 7.0 }));
        assert_eq!(k[1].at[5].map(|s| s.max), Some(12.0));
    }

    #[test]
    fn no_fc1_notes_is_no_timeline() {
        assert!(analyze(&vec![0u64; TRACE_LEN]).is_none());
        assert!(analyze(&[]).is_none());
    }

    #[test]
    fn replays_combine_by_median() {
        let (a, _) = analyze(&synthetic()).unwrap();
        let mut b = a.clone();
        b[0].at[5] = Some(Spread { min: 9.0, median: 9.0, max: 9.0 });
        let c = a.clone();
        let m = median_over(&[a.clone(), b, c]);
        assert_eq!(m, a);
        let table = timeline_table(&[Timeline { shape: "X", m: 1, call_us: 10.0, clock_ghz: 2.0, kernels: m }]);
        assert!(table.contains("| fc2 | 2 | 384 |"), "{table}");
        let t = Timeline { shape: "X", m: 1, call_us: 10.0, clock_ghz: 2.0, kernels: a };
        let summary = timeline_summary(&[t]);
        // FC1 first data (latest warp) 2.5 µs, done 6; FC2 released 7,
        // first data 8.5, done 12; no combine.
        assert!(summary.contains("| X | 1 | 10.0 | 2.5 | 6.0 | 7.0 | 8.5 | 12.0 | - | - |"), "{summary}");
        assert!(timeline_json(&[]).starts_with("{\"timeline\":["));
    }
}
