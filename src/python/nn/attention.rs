//! Binding of `crate::ops::nn::attention` (`ferrograd.nn.functional.scaled_dot_product_attention`).

use pyo3::prelude::*;

use crate::ops::nn::attention::{scaled_dot_product_attention, SdpaOptions};
use crate::python::autocast::{lowered, lowered_opt};
use crate::python::bind::tensor_functions;

tensor_functions! {
    register;

    /// `softmax(q kᵀ · scale + mask) v` through the fused kernel, the GIL released while it runs.
    #[pyo3(signature = (query, key, value, attn_mask=None, dropout_p=0.0, is_causal=false, scale=None, enable_gqa=false))]
    #[allow(clippy::too_many_arguments)]
    fn _nn_scaled_dot_product_attention(
        query: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        attn_mask: Option<&Bound<'_, PyAny>>,
        dropout_p: f64,
        is_causal: bool,
        scale: Option<f64>,
        enable_gqa: bool,
    ) => {
        let [query, key, value] = lowered([&query, &key, &value])?;
        let attn_mask = lowered_opt(attn_mask.as_ref())?;
        let opts = SdpaOptions {
            attn_mask: attn_mask.as_ref(),
            dropout_p,
            is_causal,
            scale,
            enable_gqa,
        };
        scaled_dot_product_attention(&query, &key, &value, &opts)
    };
}
