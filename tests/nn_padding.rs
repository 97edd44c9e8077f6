//! `pad` from Rust: each mode against its closed form on a short row, cropping, the gradient
//! summed back to the source positions, and torch's errors.

mod common;

use common::leaf;
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::padding::{pad, PadMode};
use ferrograd::Tensor;

fn row() -> Tensor {
    Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[1, 4]).unwrap()
}

#[test]
fn modes_match_their_closed_forms() {
    let cases = [
        (
            PadMode::Constant(9.0),
            vec![9.0, 9.0, 1.0, 2.0, 3.0, 4.0, 9.0],
        ),
        (PadMode::Reflect, vec![3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0]),
        (PadMode::Replicate, vec![1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 4.0]),
        (PadMode::Circular, vec![3.0, 4.0, 1.0, 2.0, 3.0, 4.0, 1.0]),
    ];
    for (mode, want) in cases {
        let out = pad(&row(), &[2, 1], mode).unwrap();
        assert_eq!(out.shape(), &[1, 7]);
        assert_eq!(out.to_vec::<f64>().unwrap(), want, "{mode:?}");
    }
    // negative amounts crop; both dims padded
    let out = pad(&row(), &[-1, 0, 1, 0], PadMode::Constant(0.0)).unwrap();
    assert_eq!(out.shape(), &[2, 3]);
    assert_eq!(
        out.to_vec::<f64>().unwrap(),
        vec![0.0, 0.0, 0.0, 2.0, 3.0, 4.0]
    );
}

#[test]
fn gradient_sums_back_to_the_sources() {
    let x = leaf(&[1.0, 2.0, 3.0, 4.0], &[1, 4]);
    let out = pad(&x, &[2, 1], PadMode::Reflect).unwrap();
    let g = autograd::grad(
        &[out.sum().unwrap()],
        std::slice::from_ref(&x),
        GradOptions::default(),
    )
    .unwrap();
    // reflect [3 2 | 1 2 3 4 | 3]: element 2 read twice, element 3 three times
    assert_eq!(
        g[0].as_ref().unwrap().to_vec::<f64>().unwrap(),
        vec![1.0, 2.0, 3.0, 1.0]
    );
}

#[test]
fn bad_amounts_are_torch_errors() {
    let msg = |p: &[i64], m: PadMode| pad(&row(), p, m).unwrap_err().to_string();
    assert!(msg(&[1], PadMode::Reflect).contains("Padding length must be divisible by 2"));
    assert!(msg(&[4, 0], PadMode::Reflect).contains("Padding size should be less than"));
    assert!(msg(&[5, 0], PadMode::Circular).contains("wrapping around more than once"));
    assert!(msg(&[-5, 0], PadMode::Constant(0.0)).contains("resulted in a negative output size"));
    assert!(msg(&[0, 0, 0, 0, 0, 0], PadMode::Constant(0.0)).contains("Padding length should be"));
}
