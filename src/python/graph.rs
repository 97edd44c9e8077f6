//! Bindings of `crate::graph` beyond the node itself (`ferrograd.autograd.graph`): saved-tensor
//! hooks, node pre- and post-hooks, node metadata, gradient edges and the running pass.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::errors::{from_py, guarded, IntoPyResult};
use super::node::{hook_name, type_name, wrap_node, PyHookHandle, PyNode};
use super::tensor::{opt_tensor_of, wrap, PyTensor};
use crate::autograd::node::{NodePostHook, NodePreHook};
use crate::autograd::saved_hooks::{self, Payload, SavedTensorHooks};
use crate::autograd::{engine, get_gradient_edge, Edge, GradPoint};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Make `pack`/`unpack` the active saved-tensor hooks of this thread (`saved_tensors_hooks`).
#[pyfunction]
fn _push_saved_tensors_hooks(pack: Py<PyAny>, unpack: Py<PyAny>) -> PyResult<()> {
    let hooks = SavedTensorHooks::new(
        move |t: &Tensor| {
            Python::attach(|py| {
                let arg = wrap(py, t.clone()).map_err(from_py)?;
                let packed = pack.call1(py, (arg,)).map_err(from_py)?;
                Ok(Box::new(packed) as Payload)
            })
        },
        move |p: &Payload| {
            Python::attach(|py| {
                let packed = p
                    .downcast_ref::<Py<PyAny>>()
                    .ok_or_else(|| Error::runtime("saved tensor packed by another hook"))?;
                let r = unpack.call1(py, (packed.clone_ref(py),)).map_err(from_py)?;
                match r.bind(py).cast::<PyTensor>() {
                    Ok(t) => Ok(t.get().inner.clone()),
                    Err(_) => Err(Error::type_error(format!(
                        "Output of saved tensor unpack_hook expected to be a Tensor but got result of type {}",
                        type_name(r.bind(py))
                    ))),
                }
            })
        },
    );
    saved_hooks::push(hooks).py()
}

/// An open `allow_mutation_on_saved_tensors` context; `close()` (or losing the object) ends it.
#[pyclass(module = "ferrograd._C", name = "_AllowMutationContext")]
pub struct PyAllowMutation {
    guard: Option<crate::autograd::allow_mutation::AllowMutationGuard>,
}

#[pymethods]
impl PyAllowMutation {
    /// End the context: saved tensors recorded in it can no longer be read by backward.
    fn close(&mut self) {
        self.guard = None;
    }
}

/// Open an `allow_mutation_on_saved_tensors` context on this thread.
#[pyfunction]
fn _allow_mutation_on_saved_tensors() -> PyResult<PyAllowMutation> {
    let guard = crate::autograd::allow_mutation::allow_mutation_on_saved_tensors().py()?;
    Ok(PyAllowMutation { guard: Some(guard) })
}

/// Leave the innermost `saved_tensors_hooks`.
#[pyfunction]
fn _pop_saved_tensors_hooks() {
    saved_hooks::pop();
}

/// Disable saved-tensor hooks on this thread (`message`: the error for entering them) or enable
/// them again (None); returns the previous message.
#[pyfunction]
#[pyo3(signature = (message))]
fn _set_saved_tensors_hooks_disabled(message: Option<String>) -> Option<String> {
    saved_hooks::disable_saved_tensors_hooks(message)
}

/// The id of the backward pass running on this thread (-1 outside backward).
#[pyfunction]
fn _current_graph_task_id() -> i64 {
    engine::current_graph_task_id().map_or(-1, |id| id as i64)
}

/// False inside `grad()` or `backward(inputs=...)`, which run only part of the graph.
#[pyfunction]
fn _is_checkpoint_valid() -> bool {
    engine::is_checkpoint_valid()
}

/// Whether the running backward pass will run `node`.
#[pyfunction]
fn _will_engine_execute_node(node: PyRef<'_, PyNode>) -> PyResult<bool> {
    engine::will_engine_execute_node(&node.inner).py()
}

/// Run `callback()` once the backward pass running on this thread has completed.
#[pyfunction]
fn _queue_callback(callback: Py<PyAny>) -> PyResult<()> {
    let f = Box::new(move || Python::attach(|py| callback.call0(py).map(drop).map_err(from_py)));
    engine::queue_callback(f).py()
}

/// Record an in-place change ferrograd did not see (`autograd.graph.increment_version`).
#[pyfunction]
fn _increment_version(t: PyRef<'_, PyTensor>) -> PyResult<()> {
    if t.inner.is_inference() {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "Inference tensors do not track version counter.",
        ));
    }
    t.inner.storage().bump_version();
    Ok(())
}

/// `(node, output_nr)` of a tensor's gradient edge (`autograd.graph.get_gradient_edge`).
#[pyfunction]
fn _gradient_edge(t: PyRef<'_, PyTensor>) -> PyResult<(PyNode, usize)> {
    let e = guarded(|| get_gradient_edge(&t.inner))?;
    Ok((PyNode { inner: e.node }, e.input_nr))
}

/// A tensor, or a `(node, output_nr)` pair standing for a `GradientEdge`.
pub(crate) fn grad_point(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<GradPoint> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(GradPoint::Tensor(t.get().inner.clone()));
    }
    if let Ok((node, nr)) = obj.extract::<(PyRef<'_, PyNode>, usize)>() {
        if nr < node.inner.num_outputs() {
            return Ok(GradPoint::Edge(Edge {
                node: node.inner.clone(),
                input_nr: nr,
            }));
        }
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be Tensors or GradientEdges, not {}",
        obj.get_type().name()?
    )))
}

/// The gradients a Python tuple stands for, one per slot; torch's checks on what a hook
/// returned (`expected` values).
fn hook_result(
    r: &Bound<'_, PyAny>,
    name: &str,
    expected: usize,
) -> Result<Option<Vec<Option<Tensor>>>> {
    if r.is_none() {
        return Ok(None);
    }
    if !(r.is_instance_of::<PyTuple>() || r.is_instance_of::<pyo3::types::PyList>()) {
        return Err(Error::type_error(format!(
            "expected tuple, but hook returned '{}'",
            type_name(r)
        )));
    }
    let items: Vec<Bound<'_, PyAny>> = r.extract().map_err(from_py)?;
    if items.len() != expected {
        return Err(Error::runtime(format!(
            "hook '{name}' has returned an incorrect number of values (got {}, but expected {expected})",
            items.len()
        )));
    }
    items
        .iter()
        .map(|o| opt_tensor_of(o, "hook result").map_err(from_py))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

fn grads_tuple<'py>(py: Python<'py>, grads: &[Option<Tensor>]) -> Result<Bound<'py, PyTuple>> {
    let objs: Vec<Py<PyAny>> = grads
        .iter()
        .map(|g| match g {
            Some(t) => wrap(py, t.clone()).map(|p| p.into_any()),
            None => Ok(py.None()),
        })
        .collect::<PyResult<_>>()
        .map_err(from_py)?;
    PyTuple::new(py, objs).map_err(from_py)
}

#[pymethods]
impl PyNode {
    /// Register `hook(grad_outputs) -> tuple | None`, run on the gradients arriving at this
    /// node before it runs.
    fn register_prehook(&self, hook: Py<PyAny>) -> PyResult<PyHookHandle> {
        let name = Python::attach(|py| hook_name(hook.bind(py)));
        let h: NodePreHook = Arc::new(move |grads: &[Option<Tensor>]| {
            Python::attach(|py| {
                let r = hook
                    .call1(py, (grads_tuple(py, grads)?,))
                    .map_err(from_py)?;
                hook_result(r.bind(py), &name, grads.len())
            })
        });
        Ok(PyHookHandle {
            inner: Arc::new(self.inner.register_prehook(h)),
        })
    }

    /// Register `hook(grad_inputs, grad_outputs) -> tuple | None`, run after this node computed
    /// its gradients.
    fn register_hook(&self, hook: Py<PyAny>) -> PyResult<PyHookHandle> {
        let name = Python::attach(|py| hook_name(hook.bind(py)));
        let h: NodePostHook = Arc::new(
            move |grad_inputs: &[Option<Tensor>], grad_outputs: &[Option<Tensor>]| {
                Python::attach(|py| {
                    let r = hook
                        .call1(
                            py,
                            (
                                grads_tuple(py, grad_inputs)?,
                                grads_tuple(py, grad_outputs)?,
                            ),
                        )
                        .map_err(from_py)?;
                    hook_result(r.bind(py), &name, grad_inputs.len())
                })
            },
        );
        Ok(PyHookHandle {
            inner: Arc::new(self.inner.register_hook(h)),
        })
    }

    /// A dict kept with the node (empty until something is put in it).
    #[getter]
    fn metadata(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        if let Some(m) = self.inner.metadata() {
            if let Some(d) = m.downcast_ref::<Py<PyDict>>() {
                return Ok(d.clone_ref(py));
            }
        }
        let d = PyDict::new(py).unbind();
        self.inner.set_metadata(Arc::new(d.clone_ref(py)));
        Ok(d)
    }
}

/// Call `hook(node)` for every node created on this thread until the matching pop.
#[pyfunction]
fn _push_node_creation_hook(hook: Py<PyAny>) {
    crate::graph::creation_hooks::push(Arc::new(move |node: &Arc<crate::autograd::Node>| {
        Python::attach(|py| {
            let n = wrap_node(py, node.clone()).map_err(from_py)?;
            hook.call1(py, (n,)).map(drop).map_err(from_py)
        })
    }));
}

/// Remove this thread's innermost node-creation hook.
#[pyfunction]
fn _pop_node_creation_hook() {
    crate::graph::creation_hooks::pop();
}

/// Let backward passes started on this thread use the pool, or not.
#[pyfunction]
fn _set_multithreading_enabled(enabled: bool) {
    engine::set_multithreading_enabled(enabled);
}

/// Whether backward passes started on this thread may use the pool.
#[pyfunction]
fn _is_multithreading_enabled() -> bool {
    engine::is_multithreading_enabled()
}

/// Register the module functions.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_push_saved_tensors_hooks, m)?)?;
    m.add_function(wrap_pyfunction!(_allow_mutation_on_saved_tensors, m)?)?;
    m.add_class::<PyAllowMutation>()?;
    m.add_function(wrap_pyfunction!(_pop_saved_tensors_hooks, m)?)?;
    m.add_function(wrap_pyfunction!(_set_saved_tensors_hooks_disabled, m)?)?;
    m.add_function(wrap_pyfunction!(_current_graph_task_id, m)?)?;
    m.add_function(wrap_pyfunction!(_is_checkpoint_valid, m)?)?;
    m.add_function(wrap_pyfunction!(_will_engine_execute_node, m)?)?;
    m.add_function(wrap_pyfunction!(_gradient_edge, m)?)?;
    m.add_function(wrap_pyfunction!(_queue_callback, m)?)?;
    m.add_function(wrap_pyfunction!(_increment_version, m)?)?;
    m.add_function(wrap_pyfunction!(_push_node_creation_hook, m)?)?;
    m.add_function(wrap_pyfunction!(_pop_node_creation_hook, m)?)?;
    m.add_function(wrap_pyfunction!(_set_multithreading_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_is_multithreading_enabled, m)?)?;
    Ok(())
}
