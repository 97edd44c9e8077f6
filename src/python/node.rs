//! Python views of graph nodes, hook handles, saved tensors and the custom Function node.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::errors::{from_py, guarded};
use super::tensor::{opt_tensor_of, wrap, PyTensor};
use crate::autograd::function::SavedVariables;
use crate::autograd::node::CustomBackward;
use crate::autograd::{HookHandle, Node};
use crate::error::Result;
use crate::tensor::Tensor;

/// A node of the backward graph (`tensor.grad_fn`).
#[pyclass(name = "Node", module = "ferrograd._C", frozen, weakref)]
pub struct PyNode {
    pub(crate) inner: Arc<Node>,
}

#[pymethods]
impl PyNode {
    /// torch's name, e.g. `MulBackward0`.
    fn name(&self) -> String {
        self.inner.name().to_string()
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
