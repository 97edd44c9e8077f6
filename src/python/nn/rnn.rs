//! Bindings of the recurrent layers (`crate::ops::nn::rnn`): the whole-sequence recurrence
//! behind `nn.RNN`/`nn.LSTM`/`nn.GRU` and the single-step cells.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::Error;
use crate::ops::nn::rnn::{self, CellWeights, RnnConfig, RnnMode};
use crate::python::bind::tensor_functions;
use crate::python::errors::detached;
use crate::python::tensor::{opt_tensor_of, tensor_of, wrap, PyTensor};

type Pair = (Py<PyTensor>, Py<PyTensor>);

/// `(output, h_n, c_n)`; `c_n` only for an LSTM.
type RnnResult = (Py<PyTensor>, Py<PyTensor>, Option<Py<PyTensor>>);

fn mode_of(mode: &str) -> PyResult<RnnMode> {
    Ok(match mode {
        "RNN_TANH" => RnnMode::RnnTanh,
        "RNN_RELU" => RnnMode::RnnRelu,
        "LSTM" => RnnMode::Lstm,
        "GRU" => RnnMode::Gru,
        _ => {
            return Err(PyValueError::new_err(format!(
                "Unrecognized RNN mode: {mode}"
            )))
        }
    })
}

/// The flat weight list torch keeps (`_flat_weights`: per layer and direction `w_ih, w_hh`,
/// then `b_ih, b_hh` with biases, then `w_hr` with projections) grouped per cell.
fn group_weights(
    flat: &[Bound<'_, PyAny>],
    has_biases: bool,
    has_proj: bool,
) -> PyResult<Vec<CellWeights>> {
    let per = 2 + 2 * usize::from(has_biases) + usize::from(has_proj);
    if flat.is_empty() || !flat.len().is_multiple_of(per) {
        return Err(PyValueError::new_err(format!(
            "expected a multiple of {per} weight tensors, got {}",
            flat.len()
        )));
    }
    flat.chunks(per)
        .map(|c| {
            let t = |i: usize| tensor_of(&c[i], "weight");
            let (b_ih, b_hh) = if has_biases {
                (Some(t(2)?), Some(t(3)?))
            } else {
                (None, None)
            };
            Ok(CellWeights {
                w_ih: t(0)?,
                w_hh: t(1)?,
                b_ih,
                b_hh,
                w_hr: if has_proj { Some(t(per - 1)?) } else { None },
            })
        })
        .collect()
}

/// The recurrence of `nn.RNN`/`nn.LSTM`/`nn.GRU` over a whole sequence (torch's `_VF.lstm`
/// etc.): returns `(output, h_n, c_n or None)`. `lengths` runs padded variable-length rows
/// (a packed sequence).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (mode, input, hx, cx, weights, has_biases, has_proj, num_layers, dropout, training, bidirectional, batch_first, lengths=None))]
fn _nn_rnn(
    py: Python<'_>,
    mode: &str,
    input: &Bound<'_, PyAny>,
    hx: &Bound<'_, PyAny>,
    cx: &Bound<'_, PyAny>,
    weights: Vec<Bound<'_, PyAny>>,
    has_biases: bool,
    has_proj: bool,
    num_layers: usize,
    dropout: f64,
    training: bool,
    bidirectional: bool,
    batch_first: bool,
    lengths: Option<Vec<usize>>,
) -> PyResult<RnnResult> {
    let cfg = RnnConfig {
        mode: mode_of(mode)?,
        num_layers,
        dropout,
        training,
        bidirectional,
        batch_first,
    };
    let x = tensor_of(input, "input")?;
    let h0 = tensor_of(hx, "hx")?;
    let c0 = opt_tensor_of(cx, "cx")?;
    let w = group_weights(&weights, has_biases, has_proj)?;
    let out = detached(py, || {
        rnn::rnn(&x, &h0, c0.as_ref(), &w, &cfg, lengths.as_deref())
    })?;
    Ok((
        wrap(py, out.output)?,
        wrap(py, out.h_n)?,
        out.c_n.map(|c| wrap(py, c)).transpose()?,
    ))
}

/// One step of `nn.LSTMCell`: returns `(h', c')`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _nn_lstm_cell(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    hx: &Bound<'_, PyAny>,
    cx: &Bound<'_, PyAny>,
    w_ih: &Bound<'_, PyAny>,
    w_hh: &Bound<'_, PyAny>,
    b_ih: &Bound<'_, PyAny>,
    b_hh: &Bound<'_, PyAny>,
) -> PyResult<Pair> {
    let (x, h, c) = (
        tensor_of(input, "input")?,
        tensor_of(hx, "hx")?,
        tensor_of(cx, "cx")?,
    );
    let (wi, wh) = (tensor_of(w_ih, "w_ih")?, tensor_of(w_hh, "w_hh")?);
    let (bi, bh) = (opt_tensor_of(b_ih, "b_ih")?, opt_tensor_of(b_hh, "b_hh")?);
    let (hy, cy) = detached(py, || {
        rnn::lstm_cell(&x, &h, &c, &wi, &wh, bi.as_ref(), bh.as_ref())
    })?;
    Ok((wrap(py, hy)?, wrap(py, cy)?))
}

tensor_functions! {
    register_generated;

    /// One step of `nn.RNNCell` (`nonlinearity` "tanh" or "relu").
    #[pyo3(signature = (input, hx, w_ih, w_hh, b_ih, b_hh, nonlinearity))]
    #[allow(clippy::too_many_arguments)]
    fn _nn_rnn_cell(
        input: &Bound<'_, PyAny>,
        hx: &Bound<'_, PyAny>,
        w_ih: &Bound<'_, PyAny>,
        w_hh: &Bound<'_, PyAny>,
        b_ih: Option<&Bound<'_, PyAny>>,
        b_hh: Option<&Bound<'_, PyAny>>,
        nonlinearity: &str,
    ) => {
        let relu = match nonlinearity {
            "tanh" => false,
            "relu" => true,
            _ => return Err(Error::value(format!("Unknown nonlinearity: {nonlinearity}"))),
        };
        rnn::rnn_cell(&input, &hx, &w_ih, &w_hh, b_ih.as_ref(), b_hh.as_ref(), relu)
    };

    /// One step of `nn.GRUCell`.
    #[pyo3(signature = (input, hx, w_ih, w_hh, b_ih, b_hh))]
    fn _nn_gru_cell(
        input: &Bound<'_, PyAny>,
        hx: &Bound<'_, PyAny>,
        w_ih: &Bound<'_, PyAny>,
        w_hh: &Bound<'_, PyAny>,
        b_ih: Option<&Bound<'_, PyAny>>,
        b_hh: Option<&Bound<'_, PyAny>>,
    ) => rnn::gru_cell(&input, &hx, &w_ih, &w_hh, b_ih.as_ref(), b_hh.as_ref());
}

/// Register the recurrent-layer bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_rnn, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_lstm_cell, m)?)?;
    register_generated(m)
}
