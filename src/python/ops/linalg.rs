//! Bindings of `crate::ops::linalg`: traces, diagonals, triangles, `einsum`, and the
//! `torch.linalg` family (`_linalg_*`, wrapped by `ferrograd.linalg`).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::ops::linalg::QrMode;
use crate::python::args::Int;
use crate::python::bind::{tensor_functions, tensor_methods};
use crate::python::errors::{detached, guarded};
use crate::python::tensor::{tensor_of, wrap, wrap_all, PyItem, PyTensor};
use crate::tensor::Tensor;

tensor_methods! {
    /// Sum of the main diagonal.
    fn trace(x) => x.trace();

    /// Vector → diagonal matrix; matrix → diagonal.
    #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
    fn diag(x, diagonal: Int) => x.diag(diagonal);

    /// A diagonal as the last dim (a view).
    #[pyo3(signature = (offset = Int(0), dim1 = Int(0), dim2 = Int(1)), text_signature = "($self, offset=0, dim1=0, dim2=1)")]
    fn diagonal(x, offset: Int, dim1: Int, dim2: Int) => x.diagonal(offset, dim1, dim2);

    /// Lower triangle.
    #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
    fn tril(x, diagonal: Int) => x.tril(diagonal);

    /// Upper triangle.
    #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
    fn triu(x, diagonal: Int) => x.triu(diagonal);
}

/// Einstein summation.
#[pyfunction]
fn _einsum(py: Python<'_>, equation: &str, operands: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
    let ts = crate::python::tensors(operands, "einsum(): operands")?;
    let t = guarded(|| Tensor::einsum(equation, &ts))?;
    wrap(py, t)
}

// ----- torch.linalg ------------------------------------------------------------------------

tensor_functions! {
    register_single;

    /// The inverse of a square matrix (batched); singular input raises.
    fn _linalg_inv(a: &Bound<'_, PyAny>) => a.inv();

    /// `X` with `A X = B` (`left`) or `X A = B`, batched with broadcasting.
    fn _linalg_solve(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, left: bool) => a.solve(&b, left);

    /// The determinant (batched).
    fn _linalg_det(a: &Bound<'_, PyAny>) => a.det();

    /// `log det(A)`: NaN for a negative determinant (batched).
    fn _linalg_logdet(a: &Bound<'_, PyAny>) => a.logdet();

    /// The Cholesky factor, lower or `upper`; a matrix that is not positive-definite raises.
    fn _linalg_cholesky(a: &Bound<'_, PyAny>, upper: bool) => a.cholesky(upper);

    /// Eigenvalues of a symmetric matrix, ascending.
    fn _linalg_eigvalsh(a: &Bound<'_, PyAny>, lower: bool) => a.eigvalsh(lower);

    /// Singular values, descending.
    fn _linalg_svdvals(a: &Bound<'_, PyAny>) => a.svdvals();

    /// The pseudo-inverse with tolerances `atol`/`rtol` (torch's defaults when None).
    #[pyo3(signature = (a, atol, rtol, hermitian))]
    fn _linalg_pinv(a: &Bound<'_, PyAny>, atol: Option<f64>, rtol: Option<f64>, hermitian: bool) =>
        a.pinv(atol, rtol, hermitian);

    /// The least-squares solution of `A X = B`.
    #[pyo3(signature = (a, b, rcond))]
    fn _linalg_lstsq(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, rcond: Option<f64>) =>
        a.lstsq(&b, rcond);

    /// `A^n` for an integer `n`.
    fn _linalg_matrix_power(a: &Bound<'_, PyAny>, n: i64) => a.matrix_power(n);

    /// The matrix exponential.
    fn _linalg_matrix_exp(a: &Bound<'_, PyAny>) => a.matrix_exp();

    /// The cross product of 3-vectors along `dim`.
    fn _linalg_cross(input: &Bound<'_, PyAny>, other: &Bound<'_, PyAny>, dim: i64) =>
        input.linalg_cross(&other, dim);

    /// The dot product along `dim`.
    fn _linalg_vecdot(x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, dim: i64) => x.vecdot(&y, dim);
}

/// The tensors `f` returns (run with the GIL released) as a tuple.
fn tuple_of<'py>(
    py: Python<'py>,
    f: impl FnOnce() -> crate::error::Result<Vec<Tensor>> + Send,
) -> PyResult<Bound<'py, PyTuple>> {
    let ts = detached(py, f)?;
    wrap_all(py, ts)
}

/// The inverse and the int64 `info` per matrix (0: invertible).
#[pyfunction]
fn _linalg_inv_ex<'py>(py: Python<'py>, a: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let a = tensor_of(a, "A")?;
    tuple_of(py, move || {
        let (x, info) = a.inv_ex()?;
        Ok(vec![x, crate::ops::linalg::info_tensor(&info, &a)?])
    })
}

/// `(sign, log|det|)` (batched).
#[pyfunction]
fn _linalg_slogdet<'py>(py: Python<'py>, a: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let a = tensor_of(a, "A")?;
    tuple_of(py, move || a.slogdet().map(|(s, l)| vec![s, l]))
}

/// The Cholesky factor and the int64 `info` per matrix (0: positive-definite).
#[pyfunction]
fn _linalg_cholesky_ex<'py>(
    py: Python<'py>,
    a: &Bound<'_, PyAny>,
    upper: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let a = tensor_of(a, "A")?;
    tuple_of(py, move || {
        let (l, info) = a.cholesky_ex(upper)?;
        Ok(vec![l, crate::ops::linalg::info_tensor(&info, &a)?])
    })
}

/// `(Q, R)` in `mode` `'reduced'`, `'complete'` or `'r'`.
#[pyfunction]
fn _linalg_qr<'py>(
    py: Python<'py>,
    a: &Bound<'_, PyAny>,
    mode: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let a = tensor_of(a, "A")?;
    let mode = guarded(|| QrMode::parse(mode))?;
    tuple_of(py, move || a.qr(mode).map(|(q, r)| vec![q, r]))
}

/// `(eigenvalues, eigenvectors)` of a symmetric matrix from its `lower` (or upper) triangle.
#[pyfunction]
fn _linalg_eigh<'py>(
    py: Python<'py>,
    a: &Bound<'_, PyAny>,
    lower: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let a = tensor_of(a, "A")?;
    tuple_of(py, move || a.eigh(lower).map(|(l, v)| vec![l, v]))
}

/// `(U, S, Vh)`, full or thin.
#[pyfunction]
fn _linalg_svd<'py>(
    py: Python<'py>,
    a: &Bound<'_, PyAny>,
    full_matrices: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let a = tensor_of(a, "A")?;
    tuple_of(py, move || {
        a.svd(full_matrices).map(|(u, s, vh)| vec![u, s, vh])
    })
}

/// The product of a chain of matrices in the cheapest order.
#[pyfunction]
fn _linalg_multi_dot(py: Python<'_>, tensors: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
    let ts = crate::python::tensors(tensors, "multi_dot(): tensors")?;
    let t = detached(py, move || Tensor::multi_dot(&ts))?;
    wrap(py, t)
}

static OPS_LINALG: PyItem = PyItem::new("ferrograd._ops_linalg", "_tensor_method");

/// `Tensor.name(*args, **kwargs)` as `ferrograd.name(self, ...)`: the function forms hold
/// torch's argument conventions, named-tuple results and `LinAlgError`.
fn forward_method(
    slf: &Bound<'_, PyTensor>,
    name: &str,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let py = slf.py();
    let f = OPS_LINALG.get(py)?.call1((name,))?;
    let mut all = vec![slf.clone().into_any()];
    all.extend(args.iter());
    Ok(f.call(PyTuple::new(py, all)?, kwargs)?.unbind())
}

macro_rules! forwarded_methods {
    ($($(#[$doc:meta])* $name:ident $sig:literal;)*) => {
        #[pymethods]
        impl PyTensor {
            $(
                $(#[$doc])*
                #[pyo3(signature = (*args, **kwargs), text_signature = $sig)]
                fn $name(
                    slf: &Bound<'_, Self>,
                    args: &Bound<'_, PyTuple>,
                    kwargs: Option<&Bound<'_, PyDict>>,
                ) -> PyResult<Py<PyAny>> {
                    forward_method(slf, stringify!($name), args, kwargs)
                }
            )*
        }
    };
}

forwarded_methods! {
    /// The inverse of a square matrix (batched), as `torch.inverse`.
    inverse "($self)";
    /// The determinant (batched).
    det "($self)";
    /// `log det`: NaN for a negative determinant.
    logdet "($self)";
    /// `(sign, logabsdet)`.
    slogdet "($self)";
    /// `(U, S, V)` with torch.svd's `some` and `compute_uv`.
    svd "($self, some=True, compute_uv=True)";
    /// `(Q, R)`, reduced when `some`.
    qr "($self, some=True)";
    /// The Cholesky factor, lower unless `upper`.
    cholesky "($self, upper=False)";
    /// The pseudo-inverse with cutoff `rcond`.
    pinverse "($self, rcond=1e-15)";
    /// `A^n` for an integer `n`.
    matrix_power "($self, n)";
    /// The matrix exponential.
    matrix_exp "($self)";
    /// The cross product of 3-vectors along `dim` (the first dim of size 3 when None).
    cross "($self, other, dim=None)";
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_einsum, m)?)?;
    register_single(m)?;
    for f in [
        wrap_pyfunction!(_linalg_inv_ex, m)?,
        wrap_pyfunction!(_linalg_slogdet, m)?,
        wrap_pyfunction!(_linalg_cholesky_ex, m)?,
        wrap_pyfunction!(_linalg_qr, m)?,
        wrap_pyfunction!(_linalg_eigh, m)?,
        wrap_pyfunction!(_linalg_svd, m)?,
        wrap_pyfunction!(_linalg_multi_dot, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
