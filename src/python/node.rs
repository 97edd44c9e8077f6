//! Python views of graph nodes, hook handles, saved tensors and the custom Function node.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::errors::{from_py, guarded};
use super::tensor::{opt_tensor_of, wrap, PyItem, PyTensor};
use crate::autograd::function::SavedVariables;
use crate::autograd::node::CustomBackward;
use crate::autograd::{HookHandle, Node};
use crate::error::{Error, Result};
use crate::tensor::{Tensor, TensorHook};

/// A node of the backward graph (`tensor.grad_fn`).
#[pyclass(name = "Node", module = "ferrograd._C", frozen, weakref)]
pub struct PyNode {
    pub(crate) inner: Arc<Node>,
}

#[pymethods]
impl PyNode {
    /// torch's name, e.g. `MulBackward0` (`torch::autograd::AccumulateGrad` for a leaf's
    /// accumulator: torch names its C++ nodes with their namespace).
    fn name(&self) -> String {
        match self.inner.name() {
            "AccumulateGrad" => "torch::autograd::AccumulateGrad".to_string(),
            n => n.to_string(),
        }
    }
    /// `((node or None, input_nr), ...)`, one per forward input.
    #[getter]
    fn next_functions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let items: Vec<Bound<'py, PyAny>> = self
            .inner
            .next_edges()
            .iter()
            .map(|e| -> PyResult<Bound<'py, PyAny>> {
                match e {
                    Some(e) => Ok(PyTuple::new(
                        py,
                        [
                            Py::new(
                                py,
                                PyNode {
                                    inner: e.node.clone(),
                                },
                            )?
                            .into_any(),
                            e.input_nr.into_pyobject(py)?.into_any().unbind(),
                        ],
                    )?
                    .into_any()),
                    None => Ok(PyTuple::new(
                        py,
                        [py.None(), 0usize.into_pyobject(py)?.into_any().unbind()],
                    )?
                    .into_any()),
                }
            })
            .collect::<PyResult<_>>()?;
        PyTuple::new(py, items)
    }
    /// For `AccumulateGrad`: the leaf it accumulates into.
    #[getter]
    fn variable(&self, py: Python<'_>) -> PyResult<Option<Py<PyTensor>>> {
        self.inner.variable().map(|t| wrap(py, t)).transpose()
    }
    /// Creation order.
    fn _sequence_nr(&self) -> u64 {
        self.inner.sequence_nr()
    }
    fn __repr__(&self) -> String {
        format!(
            "<{} object at {:#x}>",
            self.inner.name(),
            Arc::as_ptr(&self.inner) as usize
        )
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyNode>()
            .is_ok_and(|o| Arc::ptr_eq(&o.get().inner, &self.inner))
    }
    fn __hash__(&self) -> isize {
        Arc::as_ptr(&self.inner) as isize
    }
}

/// A handle that unregisters a hook.
#[pyclass(name = "RemovableHandle", module = "ferrograd._C", frozen)]
pub struct PyHookHandle {
    pub(crate) inner: Arc<HookHandle>,
}

#[pymethods]
impl PyHookHandle {
    /// Unregister the hook (idempotent).
    fn remove(&self) {
        self.inner.remove();
    }
    /// Return the handle itself.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// Remove the hook.
    fn __exit__(&self, _a: &Bound<'_, PyAny>, _b: &Bound<'_, PyAny>, _c: &Bound<'_, PyAny>) {
        self.inner.remove();
    }
}

/// Tensors a custom Function saved; read with `unpack()` (version-checked, freed with the graph).
#[pyclass(name = "SavedVariables", module = "ferrograd._C", frozen)]
pub struct PySaved {
    pub(crate) inner: Arc<SavedVariables>,
}

#[pymethods]
impl PySaved {
    /// The saved tensors (None where None was saved).
    fn unpack<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let items = guarded(|| self.inner.unpack())?;
        let objs: Vec<Py<PyAny>> = items
            .into_iter()
            .map(|t| match t {
                Some(t) => wrap(py, t).map(|p| p.into_any()),
                None => Ok(py.None()),
            })
            .collect::<PyResult<_>>()?;
        PyTuple::new(py, objs)
    }
}

/// The node of a Python `autograd.Function`: calls back into Python with the GIL.
pub(crate) struct PyFunctionBackward {
    pub backward: Py<PyAny>,
    pub saved: Option<Arc<SavedVariables>>,
    pub materialize: bool,
}

impl CustomBackward for PyFunctionBackward {
    fn apply(&self, _node: &Arc<Node>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        Python::attach(|py| {
            let args: Vec<Py<PyAny>> = grads
                .into_iter()
                .map(|g| match g {
                    Some(t) => wrap(py, t).map(|p| p.into_any()),
                    None => Ok(py.None()),
                })
                .collect::<PyResult<_>>()
                .map_err(from_py)?;
            let args = PyTuple::new(py, args).map_err(from_py)?;
            let out = self.backward.call1(py, args).map_err(from_py)?;
            let items: Vec<Bound<'_, PyAny>> = out.bind(py).extract().map_err(from_py)?;
            items
                .iter()
                .map(|o| opt_tensor_of(o, "gradient").map_err(from_py))
                .collect()
        })
    }
    fn release(&self) {
        if let Some(s) = &self.saved {
            s.release();
        }
    }
    fn materialize_grads(&self) -> bool {
        self.materialize
    }
}

/// Where `grad_fn` nodes get their Python face (`ferrograd._tensor._wrap_node`).
static WRAP_NODE: PyItem = PyItem::new("ferrograd._tensor", "_wrap_node");

/// A node's Python face (`ferrograd._tensor._wrap_node`: the class named after the op).
pub(crate) fn wrap_node(py: Python<'_>, node: Arc<Node>) -> PyResult<Py<PyAny>> {
    Ok(WRAP_NODE
        .get(py)?
        .call1((PyNode { inner: node },))?
        .unbind())
}

// The tensor's graph-facing methods live here, beside the node and handle types they return,
// so that the tensor's bindings do not import the node's (which import the tensor's).
#[pymethods]
impl PyTensor {
    /// The node that produced this tensor, or None for leaves.
    #[getter]
    fn grad_fn(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let Some(node) = self.inner.grad_fn() else {
            return Ok(None);
        };
        wrap_node(py, node).map(Some)
    }
    /// Register `hook(grad) -> Tensor | None` on this tensor's gradient.
    fn register_hook(&self, hook: Py<PyAny>) -> PyResult<PyHookHandle> {
        let name = Python::attach(|py| hook_name(hook.bind(py)));
        let h = python_hook(hook, name);
        let handle = guarded(|| self.inner.register_hook(h))?;
        Ok(PyHookHandle {
            inner: Arc::new(handle),
        })
    }
    /// Register `hook(tensor) -> None` run after this leaf's `.grad` was accumulated.
    fn register_post_accumulate_grad_hook(&self, hook: Py<PyAny>) -> PyResult<PyHookHandle> {
        let h: crate::tensor::PostAccumulateHook = Arc::new(move |t: &Tensor| {
            Python::attach(|py| {
                let arg = wrap(py, t.clone()).map_err(from_py)?;
                let r = hook.call1(py, (arg,)).map_err(from_py)?;
                if r.is_none(py) {
                    Ok(())
                } else {
                    Err(Error::runtime(
                        "Tensor post accumulate grad hooks should return None.",
                    ))
                }
            })
        });
        let handle = guarded(|| self.inner.register_post_accumulate_grad_hook(h))?;
        Ok(PyHookHandle {
            inner: Arc::new(handle),
        })
    }
}

/// The name of `obj`'s type, for messages.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// A short name for a hook in messages (`<lambda>`, the function's `__name__`).
pub(crate) fn hook_name(hook: &Bound<'_, PyAny>) -> String {
    hook.getattr("__name__")
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| "hook".into())
}

/// A tensor hook that calls a Python callable, with torch's checks on what it returns.
pub(crate) fn python_hook(hook: Py<PyAny>, name: String) -> TensorHook {
    Arc::new(move |g: &Tensor| {
        Python::attach(|py| {
            let arg = wrap(py, g.clone()).map_err(from_py)?;
            let r = hook.call1(py, (arg,)).map_err(from_py)?;
            let r = r.bind(py);
            if r.is_none() {
                return Ok(None);
            }
            let Ok(t) = r.cast::<PyTensor>() else {
                return Err(Error::type_error(format!(
                    "expected Variable, but hook returned '{}'",
                    type_name(r)
                )));
            };
            let t = t.get().inner.clone();
            if t.shape() != g.shape() {
                return Err(Error::runtime(format!(
                    "hook '{name}' has changed the size of value"
                )));
            }
            if t.dtype() != g.dtype() {
                return Err(Error::runtime(format!(
                    "hook '{name}' has changed the type of value (was ferrograd.{} got ferrograd.{})",
                    g.dtype().legacy_name(),
                    t.dtype().legacy_name()
                )));
            }
            Ok(Some(t))
        })
    })
}
