//! `ferrograd._C._Reducer`: the crate's gradient bucketing (`crate::distributed`) for
//! `nn.parallel.DistributedDataParallel`, with the transport supplied by Python (mpi4py).

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::sync::MutexExt;

use super::errors::{from_py, guarded};
use super::tensor::{wrap, PyTensor};
use super::tensors;
use crate::distributed::{Collective, Reducer};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A Python object with `world_size: int`, `start_sum(tensor) -> int` and `wait(ticket)`.
struct PyCollective<'a, 'py> {
    obj: &'a Bound<'py, PyAny>,
    world_size: usize,
}

impl<'a, 'py> PyCollective<'a, 'py> {
    fn new(obj: &'a Bound<'py, PyAny>) -> PyResult<Self> {
        let world_size: usize = obj.getattr("world_size")?.extract()?;
        Ok(PyCollective { obj, world_size })
    }
}

impl Collective for PyCollective<'_, '_> {
    fn world_size(&self) -> usize {
        self.world_size
    }
    fn start_sum(&mut self, buffer: &Tensor) -> Result<usize> {
        let t = wrap(self.obj.py(), buffer.clone()).map_err(from_py)?;
        self.obj
            .call_method1("start_sum", (t,))
            .and_then(|r| r.extract::<usize>())
            .map_err(from_py)
    }
    fn wait(&mut self, ticket: usize) -> Result<()> {
        self.obj
            .call_method1("wait", (ticket,))
            .map(drop)
            .map_err(from_py)
    }
}

/// The gradient reducer of one data-parallel module: buckets of parameters, filled as
/// gradients are accumulated and summed across processes by the given collective.
#[pyclass(name = "_Reducer", module = "ferrograd._C", frozen)]
pub struct PyReducer {
    inner: Mutex<Reducer>,
}

impl PyReducer {
    /// Run `f` on the reducer, waiting for the lock without holding the GIL (a hook on another
    /// thread may hold the lock while its collective call has released the GIL).
    fn with<T>(&self, py: Python<'_>, f: impl FnOnce(&mut Reducer) -> Result<T>) -> PyResult<T> {
        let mut guard = self
            .inner
            .lock_py_attached(py)
            .map_err(|_| Error::runtime("the reducer was poisoned by an earlier panic"))
            .map_err(super::errors::to_py)?;
        guarded(|| f(&mut guard))
    }
}

#[pymethods]
impl PyReducer {
    /// A reducer for `params`, with buckets of `bucket_cap_bytes` and a first bucket of
    /// `first_bucket_cap_bytes`.
    #[new]
    fn new(
        params: &Bound<'_, PyAny>,
        bucket_cap_bytes: usize,
        first_bucket_cap_bytes: usize,
    ) -> PyResult<Self> {
        let params = tensors(params, "params")?;
        let r = guarded(|| Reducer::new(params, bucket_cap_bytes, first_bucket_cap_bytes))?;
        Ok(PyReducer {
            inner: Mutex::new(r),
        })
    }
    /// The parameter indices of each bucket, in the order the buckets are reduced.
    fn bucket_indices(&self, py: Python<'_>) -> PyResult<Vec<Vec<usize>>> {
        self.with(py, |r| Ok(r.bucket_indices()))
    }
    /// The flat buffer of bucket `b`.
    fn bucket_buffer(&self, py: Python<'_>, b: usize) -> PyResult<Py<PyTensor>> {
        let t = self.with(py, |r| r.bucket_buffer(b))?;
        wrap(py, t)
    }
    /// Whether a backward pass marked parameters ready and was not finalized yet.
    fn in_pass(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |r| Ok(r.in_pass()))
    }
    /// Parameter `index`'s gradient is accumulated: copy it into its bucket and start the
    /// buckets that are complete.
    fn mark_ready(
        &self,
        py: Python<'_>,
        index: usize,
        collective: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let mut c = PyCollective::new(collective)?;
        self.with(py, |r| r.mark_ready(index, &mut c))
    }
    /// End the pass: wait for every bucket and write the averaged gradients into `.grad`.
    /// Returns the indices of the parameters that got no gradient on this process.
    fn finalize(
        &self,
        py: Python<'_>,
        collective: &Bound<'_, PyAny>,
        find_unused: bool,
    ) -> PyResult<Vec<usize>> {
        let mut c = PyCollective::new(collective)?;
        self.with(py, |r| r.finalize(&mut c, find_unused))
    }
}

/// Add the reducer to `_C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyReducer>()
}
