//! The sliding-window primitives (im2col / col2im and the padded gather/scatter): forward
//! against closed forms, adjointness, first and second derivatives against finite differences,
//! and their errors.

mod common;
use std::sync::Arc;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::conv::{GatherNames, IM2COL, PAD_INDEX};
use ferrograd::{ErrorKind, Tensor};

fn seq(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

fn weights(n: usize) -> Tensor {
    Tensor::from_vec(
        (0..n)
            .map(|i| 0.5 + (i as f64 * 0.7).sin())
            .collect::<Vec<_>>(),
        &[n],
    )
    .unwrap()
}

#[test]
fn im2col_matches_closed_form() {
    // x = [[0 1 2] [3 4 5] [6 7 8]], 2x2 windows, stride 1: rows are the kernel offsets.
    let x = Tensor::from_vec(seq(9), &[1, 1, 3, 3]).unwrap();
    let cols = x.im2col(&[2, 2], &[1, 1], &[0, 0], &[1, 1]).unwrap();
    assert_eq!(cols.shape(), &[1, 4, 4]);
    let expected = [
        0., 1., 3., 4., // offset (0,0) at the 4 window positions
        1., 2., 4., 5., // (0,1)
        3., 4., 6., 7., // (1,0)
        4., 5., 7., 8., // (1,1)
    ];
    assert_close(&cols.to_vec::<f64>().unwrap(), &expected, 0.0);
}

#[test]
fn im2col_pads_with_zeros_and_honours_stride_and_dilation() {
    let x = Tensor::from_vec(seq(4).iter().map(|v| v + 1.0).collect(), &[1, 1, 4]).unwrap();
    // 1-D: x = [1 2 3 4], kernel 2, dilation 2, padding 1, stride 2 -> windows at -1 and 1.
    let cols = x.im2col(&[2], &[2], &[1], &[2]).unwrap();
    assert_eq!(cols.shape(), &[1, 2, 2]);
    // offset 0: x[-1]=0, x[1]=2 ; offset 1 (at +2): x[1]=2, x[3]=4
    assert_close(&cols.to_vec::<f64>().unwrap(), &[0., 2., 2., 4.], 0.0);
}

#[test]
fn col2im_is_the_adjoint_of_im2col() {
    let shape = [2, 3, 4, 5];
    let x = Tensor::from_vec(
        (0..120).map(|i| ((i * 37) % 11) as f64 - 5.0).collect(),
        &shape,
    )
    .unwrap();
    let (k, d, p, s) = ([2, 3], [1, 2], [1, 0], [2, 1]);
    let cols = x.im2col(&k, &d, &p, &s).unwrap();
    let y = Tensor::from_vec(
        (0..cols.numel())
            .map(|i| ((i * 13) % 7) as f64 - 3.0)
            .collect(),
        cols.shape(),
    )
    .unwrap();
    let back = y.col2im(&[4, 5], &k, &d, &p, &s).unwrap();
    assert_eq!(back.shape(), &shape);
    let lhs = cols.mul(&y).unwrap().sum().unwrap().item().unwrap();
    let rhs = x.mul(&back).unwrap().sum().unwrap().item().unwrap();
    assert!(
        (lhs - rhs).abs() < 1e-9,
        "<unfold x, y> = {lhs} but <x, fold y> = {rhs}"
    );
}

#[test]
fn fold_of_unfold_counts_window_overlaps() {
    let x = Tensor::from_vec(vec![1.0; 9], &[1, 1, 3, 3]).unwrap();
    let cols = x.im2col(&[2, 2], &[1, 1], &[0, 0], &[1, 1]).unwrap();
    let back = cols
        .col2im(&[3, 3], &[2, 2], &[1, 1], &[0, 0], &[1, 1])
        .unwrap();
    // corners are in 1 window, edges in 2, the centre in 4
    assert_close(
        &back.to_vec::<f64>().unwrap(),
        &[1., 2., 1., 2., 4., 2., 1., 2., 1.],
        0.0,
    );
}

fn unfold_loss(x: &Tensor) -> Tensor {
    let c = x.im2col(&[2, 2], &[1, 1], &[1, 1], &[1, 2]).unwrap();
    let w = weights(c.numel()).reshape_i(&[1, 4, -1]).unwrap();
    c.mul(&c).unwrap().mul(&w).unwrap().sum().unwrap()
}

#[test]
fn im2col_gradient_and_second_derivative_match_finite_differences() {
    let xs: Vec<f64> = (0..12).map(|i| (i as f64 * 0.9).cos()).collect();
    let shape = [1, 1, 3, 4];
    let x = leaf(&xs, &shape);
    let opts = GradOptions {
        create_graph: true,
        ..Default::default()
    };
    let g = autograd::grad(&[unfold_loss(&x)], std::slice::from_ref(&x), opts).unwrap()[0]
        .clone()
        .unwrap();
    assert_close(
        &g.to_vec::<f64>().unwrap(),
        &fd_grad(unfold_loss, &xs, &shape),
        1e-6,
    );
    // Hessian-vector product against finite differences of the gradient.
    let v = Tensor::from_vec((0..12).map(|i| (i as f64).sin()).collect(), &shape).unwrap();
    let hv = autograd::grad(
        &[g.mul(&v).unwrap().sum().unwrap()],
        std::slice::from_ref(&x),
        GradOptions::default(),
    )
    .unwrap()[0]
        .clone()
        .unwrap();
    let gv = |t: &Tensor| {
        let t = t.detach().requires_grad_(true).unwrap();
        let g = autograd::grad(
            &[unfold_loss(&t)],
            std::slice::from_ref(&t),
            GradOptions::default(),
        )
        .unwrap()[0]
            .clone()
            .unwrap();
        g.mul(&v).unwrap().sum().unwrap()
    };
    assert_close(
        &hv.to_vec::<f64>().unwrap(),
        &fd_grad(gv, &xs, &shape),
        1e-5,
    );
}

#[test]
fn col2im_gradient_is_im2col() {
    let xs: Vec<f64> = (0..16).map(|i| (i as f64 * 0.3).sin()).collect();
    let shape = [1, 4, 4];
    let f = |y: &Tensor| {
        let img = y
            .col2im(&[3, 3], &[2, 2], &[1, 1], &[0, 0], &[1, 1])
            .unwrap();
        let w = weights(9).reshape_i(&[1, 1, 3, 3]).unwrap();
        img.mul(&img).unwrap().mul(&w).unwrap().sum().unwrap()
    };
    let y = leaf(&xs, &shape);
    f(&y).backward().unwrap();
    let g = y.grad().unwrap();
    assert_close(&g.to_vec::<f64>().unwrap(), &fd_grad(f, &xs, &shape), 1e-6);
    assert_eq!(
        f(&y).grad_fn().unwrap().next_edges()[0]
            .as_ref()
            .unwrap()
            .node
            .name(),
        "MulBackward0"
    );
}

#[test]
fn gather_padded_reads_zero_at_pad_and_scatters_back() {
    let x = leaf(&[1.0, 2.0, 3.0], &[3]);
    let idx = Arc::new(vec![2, PAD_INDEX, 0, 2]);
    let y = x.gather_padded(&idx, &[2, 2], IM2COL).unwrap();
    assert_close(&y.to_vec::<f64>().unwrap(), &[3.0, 0.0, 1.0, 3.0], 0.0);
    assert_eq!(y.grad_fn().unwrap().name(), "Im2ColBackward0");
    y.sum().unwrap().backward().unwrap();
    assert_close(
        &x.grad().unwrap().to_vec::<f64>().unwrap(),
        &[1.0, 0.0, 2.0],
        0.0,
    );
}

#[test]
fn errors_name_the_problem() {
    let x = Tensor::from_vec(seq(9), &[1, 1, 3, 3]).unwrap();
    let e = x.im2col(&[4, 4], &[1, 1], &[0, 0], &[1, 1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(
        e.message().contains("larger than the padded input"),
        "{}",
        e.message()
    );
    let e = x.im2col(&[2, 2], &[1, 1], &[0, 0], &[0, 1]).unwrap_err();
    assert!(
        e.message().contains("stride should be greater than zero"),
        "{}",
        e.message()
    );
    let e = x.im2col(&[2], &[1], &[0], &[1]).unwrap_err();
    assert!(
        e.message().contains("expected a 3-D (batched) input"),
        "{}",
        e.message()
    );
    let cols = Tensor::from_vec(seq(12), &[1, 4, 3]).unwrap();
    let e = cols
        .col2im(&[3, 3], &[2, 2], &[1, 1], &[0, 0], &[1, 1])
        .unwrap_err();
    assert!(
        e.message()
            .contains("calculated number of sliding blocks 2 * 2 = 4, but got input.size(2)=3."),
        "{}",
        e.message()
    );
    let e = cols
        .col2im(&[3, 3], &[3, 3], &[1, 1], &[0, 0], &[1, 1])
        .unwrap_err();
    assert!(
        e.message()
            .contains("divisible by the product of kernel_size"),
        "{}",
        e.message()
    );
    let i = Tensor::from_vec(vec![1i64, 2, 3], &[1, 1, 3]).unwrap();
    let e = i.im2col(&[1], &[1], &[0], &[1]).unwrap_err();
    assert!(
        e.message().contains("not implemented for 'Long'"),
        "{}",
        e.message()
    );
    let names = GatherNames {
        gather: "G",
        scatter: "S",
    };
    let e = x
        .gather_padded(&Arc::new(vec![9]), &[1], names)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Index);
}

#[test]
fn window_arguments_are_checked_in_torchs_order_with_torchs_text() {
    use ferrograd::ops::nn::conv::{col2im_shape_check, im2col_args_check};
    let x = Tensor::from_vec(seq(16), &[1, 1, 4, 4]).unwrap();
    let e = x.im2col(&[0, 2], &[1, 1], &[0, 0], &[1, 1]).unwrap_err();
    assert_eq!(
        e.message(),
        "kernel size should be greater than zero, but got kernel_height: 0 kernel_width: 2"
    );
    // im2col: kernel, dilation, padding, stride
    let e = im2col_args_check(&[2, 2], &[1, 0], &[-1, 0], &[0, 0]).unwrap_err();
    assert_eq!(
        e.message(),
        "dilation should be greater than zero, but got dilation_height: 1 dilation_width: 0"
    );
    let e = im2col_args_check(&[2, 2], &[1, 1], &[-1, 0], &[0, 0]).unwrap_err();
    assert_eq!(
        e.message(),
        "padding should be non-negative, but got pad_height: -1 pad_width: 0"
    );
    // col2im: kernel, stride, dilation, padding
    let e =
        col2im_shape_check(&[1, 4, 9], &[4, 4], &[2, 2], &[0, 1], &[-1, 0], &[0, 1]).unwrap_err();
    assert_eq!(
        e.message(),
        "stride should be greater than zero, but got stride_height: 0 stride_width: 1"
    );
    let cols = Tensor::from_vec(seq(4), &[1, 4, 1]).unwrap();
    let e = cols
        .col2im(&[0, 0], &[2, 2], &[1, 1], &[0, 0], &[1, 1])
        .unwrap_err();
    assert_eq!(
        e.message(),
        "Given output_size=(0, 0), kernel_size=(2, 2), dilation=(1, 1), padding=(0, 0), stride=(1, 1), calculated shape of the array of sliding blocks as (-1, -1), which is too small (non-positive)"
    );
    let e =
        col2im_shape_check(&[1, 4, 9], &[-1, -1], &[2, 2], &[1, 1], &[0, 0], &[1, 1]).unwrap_err();
    assert!(
        e.message()
            .contains("sliding blocks -2 * -2 = 4, but got input.size(2)=9."),
        "{}",
        e.message()
    );
}
