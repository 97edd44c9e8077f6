//! Bindings of scaled dot-product attention (`ferrograd.nn.functional.scaled_dot_product_attention`).

use pyo3::prelude::*;

use super::errors::detached;
use super::tensor::{opt_tensor_of, tensor_of, wrap, PyTensor};
use crate::ops::nn::attention::{scaled_dot_product_attention, SdpaOptions};

/// `softmax(q kᵀ · scale + mask) v` through the fused kernel, the GIL released while it runs.
#[pyfunction]
#[pyo3(signature = (query, key, value, attn_mask=None, dropout_p=0.0, is_causal=false, scale=None, enable_gqa=false))]
#[allow(clippy::too_many_arguments)]
fn _nn_scaled_dot_product_attention(
    py: Python<'_>,
    query: &Bound<'_, PyAny>,
    key: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    attn_mask: Option<&Bound<'_, PyAny>>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
    enable_gqa: bool,
) -> PyResult<Py<PyTensor>> {
    let q = tensor_of(query, "query")?;
    let k = tensor_of(key, "key")?;
    let v = tensor_of(value, "value")?;
    let mask = match attn_mask {
        Some(m) => opt_tensor_of(m, "attn_mask")?,
        None => None,
    };
    let out = detached(py, || {
        let opts = SdpaOptions {
            attn_mask: mask.as_ref(),
            dropout_p,
            is_causal,
            scale,
            enable_gqa,
        };
        scaled_dot_product_attention(&q, &k, &v, &opts)
    })?;
    wrap(py, out)
}

/// Register the attention bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_scaled_dot_product_attention, m)?)?;
    Ok(())
}
