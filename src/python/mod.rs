//! PyO3 bindings, exposed as `ferrograd._C`. Bindings parse arguments, release the GIL around
//! the engine and map errors; they never compute.
//!
//! The files mirror the crate: `ops/<family>.rs` binds `crate::ops::<family>` (as `Tensor`
//! methods, plus module functions such as `_cat`), `nn/<family>.rs` binds
//! `crate::ops::nn::<family>` (the `_nn_*` functions behind `ferrograd.nn.functional`), and
//! `creation.rs`, `optim.rs`, `safetensors.rs` the rest. An op's binding is one entry of
//! `tensor_methods!` / `tensor_functions!` / `unary_methods!` (see `bind.rs`); its Rust doc
//! comment is its Python `__doc__` and, through `tools/stub_docs.py`, its docstring in `_C.pyi`.

mod args;
pub(crate) mod autocast;
mod bind;
mod creation;
mod distributed;
mod dlpack;
mod errors;
mod forward_ad;
mod graph;
mod nn;
mod node;
mod numpy_interop;
mod ops;
mod optim;
mod safetensors;
mod tensor;
mod viz;
mod vmap;

use pyo3::prelude::*;

use crate::python::args::Int;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyTuple};

use crate::autograd::function::record_custom;
use crate::autograd::{self, grad_mode, BackwardOptions, GradOptions};
use crate::tensor::creation::manual_seed as seed_rng;
use crate::tensor::{DType, Tensor};
use errors::{detached, guarded, IntoPyResult};
use node::{PyFunctionBackward, PyHookHandle, PyNode, PySaved};
use tensor::{opt_tensor_of, tensor_of, wrap, PyTensor};

/// The extension's allocator. Autograd on small tensors allocates a handful of small objects per
/// op (tensor, storage, node, closure), and mimalloc serves them in a fraction of glibc's time.
/// Only the Python extension sets it: Rust users of the crate choose their own.
#[global_allocator]
static ALLOCATOR: MiAlloc = MiAlloc;

/// mimalloc, called the way std calls the system allocator: the plain entry points when every
/// mimalloc block already has the alignment asked for (blocks are whole words), the aligned ones
/// otherwise. The `mimalloc` crate always takes the aligned path, which cost ~100 instructions
/// per op on a chain of small ops (callgrind).
struct MiAlloc;

/// Alignment of every mimalloc block: sizes are rounded to whole words.
const MI_MIN_ALIGN: usize = std::mem::size_of::<usize>();

// SAFETY: mimalloc returns blocks of at least the requested size, aligned to a word or (through
// the aligned calls) to `align`, or null on failure; `mi_free` takes any of them.
unsafe impl std::alloc::GlobalAlloc for MiAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_malloc, mi_malloc_aligned};
        let p = if layout.align() <= MI_MIN_ALIGN {
            unsafe { mi_malloc(layout.size()) }
        } else {
            unsafe { mi_malloc_aligned(layout.size(), layout.align()) }
        };
        p.cast()
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};
        let p = if layout.align() <= MI_MIN_ALIGN {
            unsafe { mi_zalloc(layout.size()) }
        } else {
            unsafe { mi_zalloc_aligned(layout.size(), layout.align()) }
        };
        p.cast()
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys::{mi_realloc, mi_realloc_aligned};
        let p = if layout.align() <= MI_MIN_ALIGN {
            unsafe { mi_realloc(ptr.cast(), new_size) }
        } else {
            unsafe { mi_realloc_aligned(ptr.cast(), new_size, layout.align()) }
        };
        p.cast()
    }
}

/// An element type (`ferrograd.float32`, ...).
#[pyclass(name = "dtype", module = "ferrograd", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyDType {
    pub(crate) d: DType,
}

#[pymethods]
impl PyDType {
    fn __repr__(&self) -> String {
        format!("ferrograd.{}", self.d.name())
    }
    /// Whether this is a floating point type.
    #[getter]
    fn is_floating_point(&self) -> bool {
        self.d.is_float()
    }
    /// Whether the type holds negative values (false for bool and uint8).
    #[getter]
    fn is_signed(&self) -> bool {
        !matches!(self.d, DType::Bool | DType::UInt8)
    }
    /// Always false: complex types are not supported.
    #[getter]
    fn is_complex(&self) -> bool {
        false
    }
    /// Bytes per element.
    #[getter]
    fn itemsize(&self) -> usize {
        self.d.size()
    }
    /// The NumPy dtype name.
    #[getter]
    fn _numpy_name(&self) -> &'static str {
        self.d.name()
    }
}

static DTYPES: PyOnceLock<[Py<PyDType>; 10]> = PyOnceLock::new();

/// The singleton Python object for a dtype (so `t.dtype is ferrograd.float32` holds).
pub(crate) fn dtype_object(py: Python<'_>, d: DType) -> PyResult<Py<PyDType>> {
    let all = DTYPES.get_or_try_init(py, || -> PyResult<_> {
        let mut objs = Vec::with_capacity(DType::ALL.len());
        for d in DType::ALL {
            objs.push(Py::new(py, PyDType { d })?);
        }
        objs.try_into()
            .map_err(|_| pyo3::exceptions::PyRuntimeError::new_err("internal error: dtype table"))
    })?;
    let i = DType::ALL.iter().position(|&x| x == d).unwrap_or(0);
    Ok(all[i].clone_ref(py))
}

/// The tensors of a Python iterable; TypeError naming `what` for anything else.
pub(crate) fn tensors(list: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Tensor>> {
    list.try_iter()?.map(|o| tensor_of(&o?, what)).collect()
}

/// Tensors or `None` from a Python iterable.
pub(crate) fn opt_tensors(list: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Option<Tensor>>> {
    list.try_iter()?.map(|o| opt_tensor_of(&o?, what)).collect()
}

/// The default floating type (float32 unless set).
#[pyfunction]
fn get_default_dtype(py: Python<'_>) -> PyResult<Py<PyDType>> {
    dtype_object(py, crate::tensor::dtype::default_float())
}

/// Set the default floating type: float32 or float64.
#[pyfunction]
fn set_default_dtype(d: PyRef<'_, PyDType>) -> PyResult<()> {
    crate::tensor::dtype::set_default_float(d.d).py()
}

/// Seed the random generator (negative seeds are taken as their two's complement, as torch).
#[pyfunction]
fn manual_seed(seed: &Bound<'_, PyAny>) -> PyResult<()> {
    seed_rng(args::seed(seed)?);
    Ok(())
}

/// `autograd.backward` after Python normalised the arguments.
#[pyfunction]
#[pyo3(signature = (tensors, grad_tensors, retain_graph, create_graph, inputs))]
fn _backward(
    py: Python<'_>,
    tensors: &Bound<'_, PyAny>,
    grad_tensors: &Bound<'_, PyAny>,
    retain_graph: Option<bool>,
    create_graph: bool,
    inputs: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let roots = self::tensors(tensors, "tensors")?;
    let grads = opt_tensors(grad_tensors, "grad_tensors")?;
    let inputs = inputs.map(|i| self::tensors(i, "inputs")).transpose()?;
    let opts = BackwardOptions {
        grad_tensors: grads,
        retain_graph,
        create_graph,
        inputs,
    };
    detached(py, move || autograd::backward(&roots, opts))
}

/// `autograd.grad` after Python normalised the arguments.
#[pyfunction]
#[pyo3(signature = (outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads))]
#[allow(clippy::too_many_arguments)]
fn _grad<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
    inputs: &Bound<'py, PyAny>,
    grad_outputs: &Bound<'py, PyAny>,
    retain_graph: Option<bool>,
    create_graph: bool,
    allow_unused: Option<bool>,
    materialize_grads: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let points = |list: &Bound<'py, PyAny>, what: &str| -> PyResult<Vec<autograd::GradPoint>> {
        list.try_iter()?
            .map(|o| graph::grad_point(&o?, what))
            .collect()
    };
    let outs = points(outputs, "outputs")?;
    let ins = points(inputs, "inputs")?;
    let grads = opt_tensors(grad_outputs, "grad_outputs")?;
    let opts = GradOptions {
        grad_outputs: grads,
        retain_graph,
        create_graph,
        allow_unused,
        materialize_grads,
    };
    let res = detached(py, move || autograd::grad_points(&outs, &ins, opts))?;
    let objs: Vec<Py<PyAny>> = res
        .into_iter()
        .map(|g| match g {
            Some(t) => wrap(py, t).map(|p| p.into_any()),
            None => Ok(py.None()),
        })
        .collect::<PyResult<_>>()?;
    PyTuple::new(py, objs)
}

/// Record a Python `autograd.Function` call: returns the outputs to hand back and the saved
/// tensors object.
#[pyfunction]
#[pyo3(signature = (name, args, outputs, non_differentiable, dirty, to_save, materialize_grads, backward))]
#[allow(clippy::too_many_arguments)]
fn _record_function<'py>(
    py: Python<'py>,
    name: String,
    args: &Bound<'py, PyAny>,
    outputs: &Bound<'py, PyAny>,
    non_differentiable: &Bound<'py, PyAny>,
    dirty: &Bound<'py, PyAny>,
    to_save: &Bound<'py, PyAny>,
    materialize_grads: bool,
    backward: Py<PyAny>,
) -> PyResult<(Bound<'py, PyList>, Option<PySaved>)> {
    let args = opt_tensors(args, "args")?;
    let outputs = tensors(outputs, "outputs")?;
    let non_diff = tensors(non_differentiable, "mark_non_differentiable")?;
    let dirty = tensors(dirty, "mark_dirty")?;
    let to_save = opt_tensors(to_save, "save_for_backward")?;
    let (outs, saved) = guarded(|| {
        record_custom(name, &args, outputs, &non_diff, &dirty, &to_save, |saved| {
            Box::new(PyFunctionBackward {
                backward,
                saved,
                materialize: materialize_grads,
            })
        })
    })?;
    let list = PyList::empty(py);
    for o in outs {
        list.append(wrap(py, o)?)?;
    }
    Ok((list, saved.map(|s| PySaved { inner: s })))
}

/// Save tensors outside a recorded node (forward without inputs requiring grad).
#[pyfunction]
fn _save_tensors(to_save: &Bound<'_, PyAny>, outputs: &Bound<'_, PyAny>) -> PyResult<PySaved> {
    let to_save = opt_tensors(to_save, "save_for_backward")?;
    let outputs = tensors(outputs, "outputs")?;
    let s = autograd::function::SavedVariables::new(&to_save, &outputs).py()?;
    Ok(PySaved { inner: s })
}

/// Whether ops record the graph on this thread.
#[pyfunction]
fn is_grad_enabled() -> bool {
    grad_mode::is_grad_enabled()
}
/// Turn graph recording on or off for this thread.
#[pyfunction]
fn _set_grad_enabled(enabled: bool) {
    grad_mode::set_grad_enabled(enabled);
}
/// Whether inference mode is on for this thread.
#[pyfunction]
fn is_inference_mode_enabled() -> bool {
    grad_mode::is_inference_mode_enabled()
}
/// Turn inference mode on or off for this thread.
#[pyfunction]
fn _set_inference_mode(enabled: bool) {
    grad_mode::set_inference_mode(enabled);
}
/// Turn anomaly detection on or off.
#[pyfunction]
#[pyo3(signature = (mode, check_nan=true))]
fn _set_detect_anomaly(mode: bool, check_nan: bool) {
    grad_mode::set_detect_anomaly(mode, check_nan);
}
/// Whether anomaly detection is on.
#[pyfunction]
fn is_anomaly_enabled() -> bool {
    grad_mode::is_anomaly_enabled()
}
/// Whether anomaly detection checks for NaN.
#[pyfunction]
fn is_anomaly_check_nan_enabled() -> bool {
    grad_mode::is_anomaly_check_nan_enabled()
}
/// Threads used by backward and parallel kernels.
#[pyfunction]
fn get_num_threads() -> usize {
    autograd::get_num_threads()
}
/// Set the number of threads used by backward and parallel kernels.
#[pyfunction]
fn set_num_threads(n: Int) -> PyResult<()> {
    let n = n.0;
    // 0 passes the conversion and the engine rejects it with the same message.
    let n = args::non_negative(n, || "set_num_threads expects a positive integer".into())?;
    autograd::set_num_threads(n).py()
}

fn python_stack() -> Option<String> {
    Python::attach(|py| {
        let tb = py.import("traceback").ok()?;
        let lines: Vec<String> = tb.call_method0("format_stack").ok()?.extract().ok()?;
        Some(lines.concat())
    })
}

fn warn_anomaly(node: &str, trace: Option<&str>) {
    Python::attach(|py| {
        let msg = format!(
            "Error detected in {node}. Traceback of forward call that caused the error:\n{}",
            trace.unwrap_or(
                "  (no trace was recorded: enable anomaly mode before the forward pass)\n"
            )
        );
        let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
        let _ = PyErr::warn(
            py,
            &category,
            &std::ffi::CString::new(msg).unwrap_or_default(),
            1,
        );
    });
}

/// Long work asks this every ~20 ms (see `crate::interrupt`): Python's pending signal handlers
/// run, so Ctrl-C raises `KeyboardInterrupt` out of a long backward instead of after it.
/// Off the main thread Python runs no handlers and this returns Ok.
fn check_signals() -> crate::error::Result<()> {
    Python::attach(|py| py.check_signals()).map_err(errors::from_py)
}

/// An op meeting a batched tensor without a batching rule stops with a panic that the
/// bindings turn into a RuntimeError (and that jacrev/jacfwd catch to fall back to a loop):
/// the default hook would print it to stderr as a crash first.
fn quiet_no_rule_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied());
        if msg != Some(crate::tensor::batched::NO_RULE_MESSAGE)
            && msg != Some(crate::tensor::storage::META_MESSAGE)
        {
            default(info);
        }
    }));
}

/// `torch.promote_types`: the smallest dtype both convert to within the higher category.
#[pyfunction]
fn promote_types(
    py: Python<'_>,
    type1: PyRef<'_, PyDType>,
    type2: PyRef<'_, PyDType>,
) -> PyResult<Py<PyDType>> {
    dtype_object(py, DType::promote(type1.d, type2.d))
}

/// `torch.can_cast`: whether torch's casting rules allow `from_` to `to`.
#[pyfunction]
fn can_cast(from_: PyRef<'_, PyDType>, to: PyRef<'_, PyDType>) -> bool {
    DType::can_cast(from_.d, to.d)
}

/// The dtype of an op over operands given as `(dtype, priority)`: priority 0 for a Python
/// number, 1 for a 0-d tensor, 2 for a tensor with dimensions (`torch.result_type`'s rule).
#[pyfunction]
fn _result_type(py: Python<'_>, operands: Vec<(PyRef<'_, PyDType>, u8)>) -> PyResult<Py<PyDType>> {
    use crate::tensor::dtype::Priority;
    let ops = operands
        .iter()
        .map(|(d, p)| {
            let p = match p {
                0 => Priority::Scalar,
                1 => Priority::ZeroDim,
                _ => Priority::Dim,
            };
            (d.d, p)
        })
        .collect::<Vec<_>>();
    dtype_object(py, crate::tensor::dtype::result_type(&ops))
}

/// A meta tensor (torch's `device='meta'`): a shape and dtype without data.
#[pyfunction]
fn _empty_meta(
    py: Python<'_>,
    shape: Vec<usize>,
    dtype: PyRef<'_, PyDType>,
) -> PyResult<Py<PyAny>> {
    let t = Tensor::new_meta(&shape, dtype.d);
    Ok(crate::python::tensor::wrap(py, t)?.into_any())
}

/// Bytes of the storages live tensors hold.
#[pyfunction]
fn _memory_allocated() -> usize {
    crate::memory::allocated()
}

/// The most bytes tensors owned at once since start or the last reset.
#[pyfunction]
fn _max_memory_allocated() -> usize {
    crate::memory::max_allocated()
}

/// Start a new peak from what tensors own now.
#[pyfunction]
fn _reset_peak_memory_stats() {
    crate::memory::reset_peak()
}

/// mimalloc's `allow_thp` option: its index in `mi_option_e` of the mimalloc that
/// libmimalloc-sys 0.1.49 builds by default (3.3.2, `mi_version()` 30302), which it does not
/// name.
#[cfg(target_os = "linux")]
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;
/// The mimalloc version whose option enum [`MI_OPTION_ALLOW_THP`] indexes.
#[cfg(target_os = "linux")]
const MI_VERSION_THP_AT_43: i32 = 30302;

/// Stops mimalloc from asking for transparent huge pages: with them, ferrograd's resident
/// memory grew in 2 MB steps (a 64-token attention forward took 4.9 MB; 1.4 without).
///
/// Runs when the extension is loaded, before its first allocation: mimalloc madvises each
/// region it maps when it maps it, and its first region is reserved at the first allocation.
/// mimalloc is initialised first with the option as it was, because initialising it with the
/// option off (as `MIMALLOC_ALLOW_THP=0` does) disables huge pages for the whole process,
/// NumPy's and torch's memory included. Skipped when `MIMALLOC_ALLOW_THP` is set (the user's
/// choice stands) and on another mimalloc, whose enum may differ.
#[cfg(target_os = "linux")]
extern "C" fn no_huge_pages_for_ferrograd_memory() {
    // SAFETY: `getenv` with a NUL-terminated name, and plain calls into mimalloc's init and
    // option API, before any Rust code runs; the option's index is checked against the version.
    unsafe {
        let chosen = !libc::getenv(c"MIMALLOC_ALLOW_THP".as_ptr()).is_null();
        if !chosen && libmimalloc_sys::mi_version() == MI_VERSION_THP_AT_43 {
            libmimalloc_sys::mi_process_init();
            libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0);
        }
    }
}

/// Registers [`no_huge_pages_for_ferrograd_memory`] to run at load time (`.init_array`).
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static NO_HUGE_PAGES_AT_LOAD: extern "C" fn() = no_huge_pages_for_ferrograd_memory;

#[pymodule(gil_used = true, name = "_C")]
fn c_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    grad_mode::set_anomaly_hooks(python_stack, warn_anomaly);
    crate::interrupt::set_interrupt_check(check_signals);
    quiet_no_rule_panics();
    // After a large graph is freed, mimalloc returns its pages now rather than at some later
    // allocation (a dropped million-op chain kept ~400 MB resident).
    crate::memory::set_release_hook(|| unsafe { libmimalloc_sys::mi_collect(true) });
    m.add_class::<PyTensor>()?;
    m.add_class::<PyDType>()?;
    m.add_class::<PyNode>()?;
    m.add_class::<PyHookHandle>()?;
    m.add_class::<PySaved>()?;
    m.add_class::<numpy_interop::StorageOwner>()?;
    for d in DType::ALL {
        m.add(d.name(), dtype_object(py, d)?)?;
    }
    autocast::register(m)?;
    creation::register(m)?;
    dlpack::register(m)?;
    graph::register(m)?;
    forward_ad::register(m)?;
    vmap::register(m)?;
    viz::register(m)?;
    m.add_function(wrap_pyfunction!(get_default_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(_memory_allocated, m)?)?;
    m.add_function(wrap_pyfunction!(promote_types, m)?)?;
    m.add_function(wrap_pyfunction!(can_cast, m)?)?;
    m.add_function(wrap_pyfunction!(_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(_empty_meta, m)?)?;
    m.add_function(wrap_pyfunction!(_max_memory_allocated, m)?)?;
    m.add_function(wrap_pyfunction!(_reset_peak_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(set_default_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(manual_seed, m)?)?;
    m.add_function(wrap_pyfunction!(_backward, m)?)?;
    m.add_function(wrap_pyfunction!(_grad, m)?)?;
    m.add_function(wrap_pyfunction!(_record_function, m)?)?;
    m.add_function(wrap_pyfunction!(_save_tensors, m)?)?;
    m.add_function(wrap_pyfunction!(is_grad_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_set_grad_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(is_inference_mode_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_set_inference_mode, m)?)?;
    m.add_function(wrap_pyfunction!(_set_detect_anomaly, m)?)?;
    m.add_function(wrap_pyfunction!(is_anomaly_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(is_anomaly_check_nan_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    ops::register(m)?;
    nn::register(m)?;
    optim::register(m)?;
    distributed::register(m)?;
    safetensors::register(m)?;
    Ok(())
}
