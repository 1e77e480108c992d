//! The one place PTX is loaded and kernels are launched: a [`Gpu`] holds a
//! CUDA context, the module built for its architecture, and a cache of its
//! functions. Every launch in moe4 goes through [`Gpu::launch`], which takes
//! a `#[repr(C)]` parameter struct from `moe4_kernels::params`.

use crate::error::{Error, Result};
use crate::ptx::Arch;
use cudarc::driver::sys::{self, CUfunction_attribute, CUlaunchAttributeID as AttrId};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// True if a CUDA driver is installed and sees at least one device.
pub fn gpu_available() -> bool {
    driver_present() && CudaContext::device_count().map(|n| n > 0).unwrap_or(false)
}

fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; no CUDA call is made.
    unsafe { sys::is_culib_present() }
}

/// A kernel parameter struct passed by value.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub(crate) struct Param<T: Copy>(pub T);
// SAFETY: `T` is one of the `#[repr(C)]` plain-data structs of
// `moe4_kernels::params` (or a scalar); the kernel declares the same struct
// as its by-value parameter, so the bytes the driver copies match.
unsafe impl<T: Copy> DeviceRepr for Param<T> {}

struct Func {
    f: CudaFunction,
    occupancy: Mutex<HashMap<(u32, u32), u32>>,
    /// The most dynamic shared memory a block of it may have: the device's
    /// per-block limit less the kernel's static shared memory.
    max_dynamic: u32,
}

/// A launch as `MOE4_LOG_LAUNCHES` prints it: kernel, grid, threads, shared
/// memory bytes.
type LaunchConfig4 = (String, u32, u32, u32);

/// A GPU with moe4's kernels loaded.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    module: Arc<CudaModule>,
    arch: Arch,
    sm_count: u32,
    max_smem: u32,
    funcs: Mutex<HashMap<String, Arc<Func>>>,
    /// The kernels (`.entry` names) of the loaded PTX: [`Gpu::has_kernel`]
    /// asks this, not the driver (a failed driver lookup is an API error
    /// that compute-sanitizer counts).
    entries: std::collections::HashSet<String>,
    /// The module's visible globals (`.visible .global` names).
    globals: std::collections::HashSet<String>,
    /// With `MOE4_LOG_LAUNCHES` set: the launch configurations already
    /// printed (each distinct kernel, grid, block and shared memory once).
    logged: Option<Mutex<std::collections::HashSet<LaunchConfig4>>>,
}

/// The names of the visible global variables a PTX module defines.
fn global_names(ptx: &str) -> std::collections::HashSet<String> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .global "))
        // `.align 8 .b8 NAME[...]`: the first word that is an identifier.
        .filter_map(|l| {
            l.split([' ', '[', ';', '=']).find(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
        })
        .map(String::from)
        .collect()
}

/// The kernel names (`.entry`) a PTX module defines.
fn entry_names(ptx: &str) -> std::collections::HashSet<String> {
    ptx.lines()
        .filter_map(|l| {
            l.trim_start().strip_prefix(".visible .entry ").or_else(|| l.trim_start().strip_prefix(".entry "))
        })
        .map(|l| l.split(['(', ' ']).next().unwrap_or_default().to_string())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Launch attribute `id` turned on: the programmatic stream serialization
/// attribute (the one moe4 uses; an `int` flag). Any other id keeps an
/// all-zero value.
fn launch_attribute(id: AttrId) -> sys::CUlaunchAttribute {
    // SAFETY: an all-zero launch attribute is a valid (empty) value; id and
    // value are set next.
    let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    a.id = id;
    if id == AttrId::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION {
        a.value.programmaticStreamSerializationAllowed = 1;
    }
    a
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("arch", &self.arch).field("sm_count", &self.sm_count).finish()
    }
}

impl Gpu {
    /// Opens device `ordinal` and loads the kernels built for it.
    pub fn new(ordinal: usize) -> Result<Arc<Gpu>> {
        if !driver_present() {
            return Err(Error::NoCuda);
        }
        Gpu::from_context(CudaContext::new(ordinal)?)
    }

    /// Loads the kernels into an existing context (the server's own).
    pub fn from_context(ctx: Arc<CudaContext>) -> Result<Arc<Gpu>> {
        let (major, minor) = ctx.compute_capability()?;
        let arch = Arch::for_capability(major, minor)?;
        Gpu::with_arch(ctx, arch)
    }

    /// Loads a specific build, e.g. the sm_89 one on a newer GPU to test its
    /// code paths there (PTX is forward compatible; `a` builds are not).
    ///
    /// For kernel development, the environment variable `MOE4_PTX_FILE`
    /// names a PTX file loaded instead of the embedded build (an
    /// experimental build of the same architecture's kernels).
    pub fn with_arch(ctx: Arc<CudaContext>, arch: Arch) -> Result<Arc<Gpu>> {
        let ptx = match std::env::var("MOE4_PTX_FILE") {
            Ok(path) => std::fs::read_to_string(&path).map_err(|source| Error::Io { path, source })?,
            Err(_) => arch.ptx().to_string(),
        };
        Gpu::with_ptx(ctx, arch, ptx)
    }

    /// Loads the kernels from `ptx`, a module of `arch`'s kernels (for
    /// kernel development: an experimental build beside the embedded one in
    /// the same context, as `moe4 compare-ptx` does).
    pub fn with_ptx(ctx: Arc<CudaContext>, arch: Arch, ptx: String) -> Result<Arc<Gpu>> {
        let (major, minor) = ctx.compute_capability()?;
        Arch::for_capability(major, minor)?;
        let entries = entry_names(&ptx);
        let globals = global_names(&ptx);
        let module = ctx.load_module(Ptx::from_src(ptx))?;
        let sm_count = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let max_smem =
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32;
        let logged = std::env::var_os("MOE4_LOG_LAUNCHES").map(|_| Mutex::new(Default::default()));
        Ok(Arc::new(Gpu {
            ctx,
            module,
            arch,
            sm_count,
            max_smem,
            funcs: Mutex::new(HashMap::new()),
            entries,
            globals,
            logged,
        }))
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    /// The PTX build in use.
    pub fn arch(&self) -> Arch {
        self.arch
    }
    /// Streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }
    /// Largest dynamic shared memory a block may ask for.
    pub fn max_shared_memory(&self) -> u32 {
        self.max_smem
    }
    /// The device's name.
    pub fn name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "?".into())
    }

    /// Whether the loaded build has kernel `name` (an experimental build
    /// may add kernels the host then uses), from the PTX's `.entry` names:
    /// no driver lookup, so asking for a missing kernel (`forward` asks on
    /// every decode call) is no failed API call under compute-sanitizer.
    pub fn has_kernel(&self, name: &str) -> bool {
        self.entries.contains(name)
    }

    /// Whether the loaded PTX defines the visible global variable `name`
    /// (e.g. the `trace` builds' timeline buffer,
    /// `moe4_kernels::trace::TRACE_SYMBOL`).
    pub fn has_global(&self, name: &str) -> bool {
        self.globals.contains(name)
    }

    /// The module global `name` as `u64` words (after the work queued on
    /// `stream`).
    pub fn read_global_u64(&self, stream: &Arc<CudaStream>, name: &str) -> Result<Vec<u64>> {
        let view = self.module.get_global(name, stream)?;
        let mut bytes = vec![0u8; view.len()];
        stream.memcpy_dtoh(&view, &mut bytes)?;
        stream.synchronize()?;
        Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
    }

    /// Sets the module global `name` to zeros (queued on `stream`).
    pub fn zero_global(&self, stream: &Arc<CudaStream>, name: &str) -> Result<()> {
        let mut view = self.module.get_global(name, stream)?;
        stream.memset_zeros(&mut view)?;
        Ok(())
    }

    fn func(&self, name: &str) -> Result<Arc<Func>> {
        let mut funcs = self.funcs.lock().expect("function cache");
        if let Some(f) = funcs.get(name) {
            return Ok(f.clone());
        }
        let f = self.module.load_function(name)?;
        // Allow every kernel the device's full shared memory per block: all
        // of it dynamic, less what the kernel declares statically (the
        // driver refuses a larger setting; experimental builds keep
        // `mbarrier`s in static shared memory).
        let max_dynamic = self.max_smem.saturating_sub(f.shared_size_bytes()?.max(0) as u32);
        f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, max_dynamic as i32)?;
        let f = Arc::new(Func { f, occupancy: Mutex::new(HashMap::new()), max_dynamic });
        funcs.insert(name.to_string(), f.clone());
        Ok(f)
    }

    /// Blocks of `name` that fit on the whole GPU at once (a persistent grid),
    /// with `threads` threads and `smem` bytes of dynamic shared memory each.
    #[doc(hidden)]
    pub fn resident_blocks(&self, name: &str, threads: u32, smem: u32) -> Result<u32> {
        let f = self.func(name)?;
        let mut occ = f.occupancy.lock().expect("occupancy cache");
        if let Some(&n) = occ.get(&(threads, smem)) {
            return Ok(n);
        }
        let per_sm = f.f.occupancy_max_active_blocks_per_multiprocessor(threads, smem as usize, None)?.max(1);
        let n = per_sm * self.sm_count;
        occ.insert((threads, smem), n);
        Ok(n)
    }

    /// An error naming the kernel and the limit if `smem` is more dynamic
    /// shared memory than a block may have here; with `MOE4_LOG_LAUNCHES`
    /// set (for tuning: which kernels and grids the host picks), each
    /// distinct launch configuration is also printed once to stderr.
    fn check_launch(&self, name: &str, f: &Func, grid: u32, threads: u32, smem: u32) -> Result<()> {
        if let Some(logged) = &self.logged {
            if logged.lock().expect("launch log").insert((name.to_string(), grid, threads, smem)) {
                eprintln!("moe4 launch: {name} grid {grid} x {threads} threads, {smem} B shared");
            }
        }
        if smem > f.max_dynamic {
            return Err(crate::error::unsupported(
                format!("shared memory of {name}"),
                smem,
                format!(
                    "this GPU allows at most {} bytes per block ({} of them dynamic beside the kernel's static shared memory)",
                    self.max_smem, f.max_dynamic
                ),
            ));
        }
        Ok(())
    }

    /// Launches `name` with one by-value parameter.
    ///
    /// # Safety
    /// `params` must be the struct the kernel expects, every device address
    /// in it valid for what the kernel reads and writes, and `smem` at least
    /// what the kernel uses.
    pub(crate) unsafe fn launch<P: Copy>(
        &self,
        stream: &CudaStream,
        name: &str,
        grid: u32,
        threads: u32,
        smem: u32,
        params: P,
    ) -> Result<()> {
        let f = self.func(name)?;
        self.check_launch(name, &f, grid, threads, smem)?;
        let p = Param(params);
        let cfg = LaunchConfig { grid_dim: (grid.max(1), 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: smem };
        stream.launch_builder(&f.f).arg(&p).launch(cfg)?;
        Ok(())
    }

    /// True where moe4's layer kernels may be launched as programmatic
    /// dependents of the kernel before them (Hopper and newer, with a build
    /// whose kernels call `griddepcontrol.wait`: not the sm_89 one).
    pub fn programmatic_launch(&self) -> bool {
        self.arch != Arch::Sm89 && self.ctx.compute_capability().map(|(major, _)| major >= 9).unwrap_or(false)
    }

    /// [`Gpu::launch`], as a programmatic dependent of the previous kernel
    /// in `stream` when `pdl` is true: the kernel may start while that one
    /// is still running and must wait for it (`griddepcontrol.wait`) before
    /// touching memory it reads or writes. Captured into CUDA graphs as a
    /// programmatic edge.
    ///
    /// # Safety
    /// As [`Gpu::launch`]; with `pdl`, the kernel must call
    /// `griddepcontrol.wait` before it reads or writes anything a previous
    /// kernel may still be using.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn launch_dependent<P: Copy>(
        &self,
        stream: &CudaStream,
        name: &str,
        grid: u32,
        threads: u32,
        smem: u32,
        params: P,
        pdl: bool,
    ) -> Result<()> {
        if !pdl {
            return self.launch(stream, name, grid, threads, smem, params);
        }
        let attrs = [launch_attribute(AttrId::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)];
        self.launch_ex(stream, name, grid, threads, smem, params, &attrs)
    }

    /// `cuLaunchKernelEx` of `name` with one by-value parameter and launch
    /// attributes `attrs`.
    ///
    /// # Safety
    /// As [`Gpu::launch`], and what each attribute asks of the kernel.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_ex<P: Copy>(
        &self,
        stream: &CudaStream,
        name: &str,
        grid: u32,
        threads: u32,
        smem: u32,
        params: P,
        attrs: &[sys::CUlaunchAttribute],
    ) -> Result<()> {
        let f = self.func(name)?;
        self.check_launch(name, &f, grid, threads, smem)?;
        self.ctx.bind_to_thread()?;
        let mut p = params;
        let mut args = [&mut p as *mut P as *mut std::ffi::c_void];
        let cfg = sys::CUlaunchConfig {
            gridDimX: grid.max(1),
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: threads,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: smem,
            hStream: stream.cu_stream(),
            // The driver only reads them (the field is `*mut` in the C API).
            attrs: attrs.as_ptr() as *mut sys::CUlaunchAttribute,
            numAttrs: attrs.len() as u32,
        };
        // SAFETY: `args` points at one by-value parameter struct, which is
        // what every moe4 kernel takes; the function belongs to this
        // context, bound above; `cfg.attrs` holds `numAttrs` attributes;
        // the caller vouches for the addresses.
        sys::cuLaunchKernelEx(&cfg, f.f.cu_function(), args.as_mut_ptr(), std::ptr::null_mut()).result()?;
        Ok(())
    }

    /// Launches a kernel whose parameters are separate scalars/pointers
    /// (the smoke and peak kernels).
    ///
    /// # Safety
    /// As [`Gpu::launch`]; `args` must match the kernel's parameter list.
    pub(crate) unsafe fn launch_args(
        &self,
        stream: &CudaStream,
        name: &str,
        grid: u32,
        threads: u32,
        args: &[&dyn ArgRef],
    ) -> Result<()> {
        self.launch_args_smem(stream, name, grid, threads, 0, args)
    }

    /// [`Gpu::launch_args`] with `smem` bytes of dynamic shared memory
    /// (checked against the GPU's limit as [`Gpu::launch`] does).
    ///
    /// # Safety
    /// As [`Gpu::launch_args`].
    pub(crate) unsafe fn launch_args_smem(
        &self,
        stream: &CudaStream,
        name: &str,
        grid: u32,
        threads: u32,
        smem: u32,
        args: &[&dyn ArgRef],
    ) -> Result<()> {
        let f = self.func(name)?;
        self.check_launch(name, &f, grid, threads, smem)?;
        let cfg = LaunchConfig { grid_dim: (grid.max(1), 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: smem };
        let mut b = stream.launch_builder(&f.f);
        let vals: Vec<u64> = args.iter().map(|a| a.bits()).collect();
        let sizes: Vec<bool> = args.iter().map(|a| a.is_u32()).collect();
        let narrow: Vec<u32> = vals.iter().map(|v| *v as u32).collect();
        for i in 0..vals.len() {
            if sizes[i] {
                b.arg(&narrow[i]);
            } else {
                b.arg(&vals[i]);
            }
        }
        b.launch(cfg)?;
        Ok(())
    }
}

/// A raw kernel argument: a device address (u64) or a u32.
pub(crate) trait ArgRef {
    fn bits(&self) -> u64;
    fn is_u32(&self) -> bool;
}
impl ArgRef for u64 {
    fn bits(&self) -> u64 {
        *self
    }
    fn is_u32(&self) -> bool {
        false
    }
}
impl ArgRef for u32 {
    fn bits(&self) -> u64 {
        *self as u64
    }
    fn is_u32(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_attributes_are_the_flags_asked_for() {
        let p = launch_attribute(AttrId::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
        let c = launch_attribute(AttrId::CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
        assert_eq!(p.id, AttrId::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
        assert_eq!(c.id, AttrId::CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
        // SAFETY: both are `int` members of the value union, which the
        // helper zeroed before setting the one it turns on.
        unsafe {
            assert_eq!(p.value.programmaticStreamSerializationAllowed, 1);
            assert_eq!(c.value.cooperative, 0);
        }
    }

    #[test]
    fn global_names_are_the_visible_globals_of_the_ptx() {
        let ptx = ".visible .global .align 8 .b8 MOE4_TRACE[655360];\n.global .align 4 .b8 hidden[4];\n.extern .shared .align 16 .b8 moe4_smem[];\n";
        let names = global_names(ptx);
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names.contains("MOE4_TRACE"));
        // The shipped builds have no timeline buffer.
        for a in Arch::ALL {
            assert!(!global_names(a.ptx()).contains(moe4_kernels::trace::TRACE_SYMBOL), "{}", a.name());
        }
    }

    #[test]
    fn entry_names_are_the_kernels_of_the_ptx() {
        let ptx = ".visible .entry moe_a(\n\t.param .u64 p\n)\n{\n}\n.entry moe_b (\n)\n{\n}\n.func helper(\n)\n";
        let names = entry_names(ptx);
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.contains("moe_a") && names.contains("moe_b"));
        // The shipped builds: every kernel the host launches on each is
        // there, and no experimental one is.
        for a in Arch::ALL {
            let names = entry_names(a.ptx());
            for k in ["moe_route", "moe_fc1_bf16_nt1", "moe_fc2_f16_nt1_w8_rt", "moe_combine_bf16", "moe4_read_floor"] {
                assert!(names.contains(k), "{}: {k} missing", a.name());
            }
            for k in ["moe_fc2_bf16_nt1_sl", "moe_fc1_bf16_nt1_w6"] {
                assert!(!names.contains(k), "{}: {k} present", a.name());
            }
            assert_eq!(names.contains("moe_pfw1_bf16_mix"), a == Arch::Sm90a, "{}", a.name());
        }
    }
}
