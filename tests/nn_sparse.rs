//! `embedding` from Rust: rows by index, the gradient summed per row (none for the padding
//! row, divided by the index's count with `scale_grad_by_freq`), second derivative through the
//! backward, and out-of-range indices as errors.

mod common;

use common::{assert_close, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::sparse::embedding;
use ferrograd::{ErrorKind, Tensor};

fn weight() -> Tensor {
    leaf(&(0..8).map(|i| i as f64 * 0.5).collect::<Vec<_>>(), &[4, 2])
}

#[test]
fn rows_and_gradients_by_index() {
    let w = weight();
    let idx = Tensor::from_vec(vec![3i64, 0, 3, 2], &[2, 2]).unwrap();
    let out = embedding(&w, &idx, None, false).unwrap();
    assert_eq!(out.shape(), &[2, 2, 2]);
    assert_eq!(
        out.to_vec::<f64>().unwrap(),
        vec![3.0, 3.5, 0.0, 0.5, 3.0, 3.5, 2.0, 2.5]
    );
    let g = Tensor::from_vec((1..=8).map(f64::from).collect::<Vec<_>>(), &[2, 2, 2]).unwrap();
    let grads = autograd::grad(
        &[out],
        std::slice::from_ref(&w),
        GradOptions {
            grad_outputs: vec![Some(g)],
            ..Default::default()
        },
    )
    .unwrap();
    // row 3 gets positions 0 and 2, row 0 position 1, row 2 position 3, row 1 nothing
    assert_close(
        &grads[0].as_ref().unwrap().to_vec::<f64>().unwrap(),
        &[3.0, 4.0, 0.0, 0.0, 7.0, 8.0, 1.0 + 5.0, 2.0 + 6.0],
        0.0,
    );
}

#[test]
fn padding_row_and_frequency_scaling() {
    let w = weight();
    let idx = Tensor::from_vec(vec![1i64, 1, 2, 0], &[4]).unwrap();
    let out = embedding(&w, &idx, Some(2), true).unwrap();
    let s = out.sum().unwrap();
    let g = autograd::grad(&[s], std::slice::from_ref(&w), GradOptions::default()).unwrap();
    // row 1 occurs twice: each position's gradient halved; row 2 is padding
    assert_close(
        &g[0].as_ref().unwrap().to_vec::<f64>().unwrap(),
        &[1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
        0.0,
    );
}

#[test]
fn backward_is_differentiable() {
    let w = weight();
    let idx = Tensor::from_vec(vec![1i64, 3], &[2]).unwrap();
    let out = embedding(&w, &idx, None, false).unwrap();
    let v = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let opts = GradOptions {
        grad_outputs: vec![Some(v.clone())],
        create_graph: true,
        ..Default::default()
    };
    let gw = autograd::grad(&[out], std::slice::from_ref(&w), opts).unwrap()[0]
        .clone()
        .unwrap();
    // d/dv of sum(gw * c) is c gathered at the indices
    let c = Tensor::from_vec((0..8).map(|i| i as f64).collect::<Vec<_>>(), &[4, 2]).unwrap();
    let s = gw.mul(&c).unwrap().sum().unwrap();
    let gv = autograd::grad(&[s], std::slice::from_ref(&v), GradOptions::default()).unwrap();
    assert_close(
        &gv[0].as_ref().unwrap().to_vec::<f64>().unwrap(),
        &[2.0, 3.0, 6.0, 7.0],
        0.0,
    );
}

#[test]
fn bad_indices_are_errors() {
    let w = weight();
    for bad in [vec![4i64], vec![-1]] {
        let idx = Tensor::from_vec(bad, &[1]).unwrap();
        let e = embedding(&w, &idx, None, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Index);
        assert_eq!(e.message(), "index out of range in self");
    }
    let f = Tensor::from_vec(vec![1.0f64], &[1]).unwrap();
    assert_eq!(
        embedding(&w, &f, None, false).unwrap_err().kind(),
        ErrorKind::Runtime
    );
}
