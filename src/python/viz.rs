//! Binding of `crate::graph::dot` (`ferrograd.viz.make_dot`).

use pyo3::prelude::*;

use super::errors::guarded;
use super::tensor::tensor_of;
use crate::graph::dot::{make_dot, DotOptions};
use crate::tensor::Tensor;

/// The Graphviz DOT text of the backward graph behind `outputs` (torchviz's look): `params`
/// names leaves as `(name, tensor)` pairs.
#[pyfunction]
fn _make_dot(
    outputs: Vec<Bound<'_, PyAny>>,
    params: Vec<(String, Bound<'_, PyAny>)>,
    show_attrs: bool,
    show_saved: bool,
) -> PyResult<String> {
    let outs: Vec<Tensor> = outputs
        .iter()
        .map(|o| tensor_of(o, "output"))
        .collect::<PyResult<_>>()?;
    let named: Vec<(String, Tensor)> = params
        .iter()
        .map(|(n, t)| Ok((n.clone(), tensor_of(t, "params values")?)))
        .collect::<PyResult<_>>()?;
    let roots: Vec<(Option<&str>, &Tensor)> = outs.iter().map(|t| (None, t)).collect();
    let names: Vec<(&str, &Tensor)> = named.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let opts = DotOptions {
        show_attrs,
        show_saved,
    };
    // Under the GIL: showing saved tensors may run Python unpack hooks.
    guarded(|| make_dot(&roots, &names, opts))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_make_dot, m)?)?;
    Ok(())
}
