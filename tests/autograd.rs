//! Behaviour of backward, grad, retain_graph, create_graph, hooks and in-place checks.

mod common;
use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, BackwardOptions, GradOptions};
use ferrograd::Tensor;
use std::sync::Arc;

fn grad_of(t: &Tensor) -> Vec<f64> {
    t.grad().expect("grad").to_vec::<f64>().unwrap()
}

#[test]
fn test_chain_rule_matches_finite_differences() {
    let xs = [0.3, -1.2, 2.0];
    let f = |x: &Tensor| {
        x.sin()
            .unwrap()
            .mul(&x.exp().unwrap())
            .unwrap()
            .tanh()
            .unwrap()
            .sum()
            .unwrap()
    };
    let x = leaf(&xs, &[3]);
    f(&x).backward().unwrap();
    assert_close(&grad_of(&x), &fd_grad(f, &xs, &[3]), 1e-6);
}

#[test]
fn test_broadcast_gradient_sums_back_to_input_shape() {
    let a = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = leaf(&[1.0, 1.0, 1.0], &[3]);
    a.mul(&b).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&b), vec![5.0, 7.0, 9.0]);
    assert_eq!(b.grad().unwrap().shape(), &[3]);
}

#[test]
fn test_second_backward_without_retain_graph_raises() {
    let x = leaf(&[1.0, 2.0], &[2]);
    let y = x.mul(&x).unwrap().sum().unwrap();
    y.backward().unwrap();
    let e = y.backward().unwrap_err();
    assert!(
        e.message()
            .starts_with("Trying to backward through the graph a second time"),
        "{e}"
    );
}

#[test]
fn test_node_without_saved_tensors_can_run_twice() {
    let x = leaf(&[1.0, 2.0], &[2]);
    let y = x.add_scalar(1.0).unwrap().sum().unwrap();
    y.backward().unwrap();
    y.backward().unwrap();
    assert_eq!(grad_of(&x), vec![2.0, 2.0]);
}

#[test]
fn test_retain_graph_accumulates() {
    let x = leaf(&[1.0, 2.0], &[2]);
    let y = x.mul(&x).unwrap().sum().unwrap();
    y.backward_with(None, Some(true), false, None).unwrap();
    y.backward().unwrap();
    assert_eq!(grad_of(&x), vec![4.0, 8.0]);
}

#[test]
fn test_create_graph_gives_second_derivative() {
    // d/dx x^3 = 3x^2, d2/dx2 = 6x
    let x = leaf(&[2.0], &[1]);
    let y = x.pow_scalar(3.0).unwrap().sum().unwrap();
    let g = autograd::grad(
        &[y],
        std::slice::from_ref(&x),
        GradOptions {
            create_graph: true,
            ..Default::default()
        },
    )
    .unwrap();
    let g = g[0].clone().unwrap();
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![12.0]);
    let gg = autograd::grad(
        &[g.sum().unwrap()],
        std::slice::from_ref(&x),
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(gg[0].clone().unwrap().to_vec::<f64>().unwrap(), vec![12.0]);
}

#[test]
fn test_third_derivative_of_tanh() {
    let xv = 0.7f64;
    let x = leaf(&[xv], &[]);
    let opts = || GradOptions {
        create_graph: true,
        ..Default::default()
    };
    let g1 = autograd::grad(&[x.tanh().unwrap()], std::slice::from_ref(&x), opts()).unwrap()[0]
        .clone()
        .unwrap();
    let g2 = autograd::grad(&[g1], std::slice::from_ref(&x), opts()).unwrap()[0]
        .clone()
        .unwrap();
    let g3 = autograd::grad(&[g2], std::slice::from_ref(&x), opts()).unwrap()[0]
        .clone()
        .unwrap();
    let t = xv.tanh();
    let s2 = 1.0 - t * t;
    // d3/dx3 tanh = -2 sech^2 (sech^2 - 2 tanh^2)
    let expected = -2.0 * s2 * (s2 - 2.0 * t * t);
    assert_close(&g3.to_vec::<f64>().unwrap(), &[expected], 1e-12);
}

#[test]
fn test_grad_does_not_touch_dot_grad_and_unused_inputs_raise() {
    let x = leaf(&[1.0, 2.0], &[2]);
    let z = leaf(&[1.0], &[1]);
    let y = x.mul_scalar(2.0).unwrap().sum().unwrap();
    let e = autograd::grad(
        std::slice::from_ref(&y),
        &[x.clone(), z.clone()],
        GradOptions {
            retain_graph: Some(true),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        e.message()
            .contains("index 1 appears to not have been used"),
        "{e}"
    );
    let r = autograd::grad(
        &[y],
        &[x.clone(), z.clone()],
        GradOptions {
            allow_unused: Some(true),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        r[0].clone().unwrap().to_vec::<f64>().unwrap(),
        vec![2.0, 2.0]
    );
    assert!(r[1].is_none());
    assert!(x.grad().is_none());
}

#[test]
fn test_backward_inputs_limits_accumulation_and_retains_nonleaf_grad() {
    let x = leaf(&[1.0, 2.0, 3.0], &[3]);
    let h = x.mul_scalar(2.0).unwrap();
    let y = h.mul(&h).unwrap().sum().unwrap();
    autograd::backward(
        &[y],
        BackwardOptions {
            inputs: Some(vec![h.clone()]),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(grad_of(&h), vec![4.0, 8.0, 12.0]);
    assert!(h.retains_grad());
    assert!(x.grad().is_none());
}

#[test]
fn test_implicit_grad_only_for_scalars_and_shape_mismatch() {
    let x = leaf(&[1.0, 2.0, 3.0], &[3]);
    let y = x.mul_scalar(2.0).unwrap();
    assert_eq!(
        y.backward().unwrap_err().message(),
        "grad can be implicitly created only for scalar outputs"
    );
    let e = y
        .backward_with(
            Some(Tensor::ones(&[4], ferrograd::DType::Float64)),
            None,
            false,
            None,
        )
        .unwrap_err();
    assert!(
        e.message().starts_with(
            "Mismatch in shape: grad_output[0] has a shape of [4] and output[0] has a shape of [3]"
        ),
        "{e}"
    );
}

#[test]
fn test_saved_tensor_modified_in_place_raises() {
    let x = leaf(&[1.0, 2.0, 3.0], &[3]);
    let y = x.exp().unwrap();
    y.add_(&Tensor::scalar(1.0f64)).unwrap();
    let e = y.sum().unwrap().backward().unwrap_err();
    assert!(
        e.message().contains("modified by an inplace operation"),
        "{e}"
    );
    assert!(e.message().contains("which is output 0 of Exp,"), "{e}");
    assert!(
        e.message()
            .contains("is at version 1; expected version 0 instead"),
        "{e}"
    );
}

#[test]
fn test_in_place_on_leaf_requiring_grad_raises() {
    let x = leaf(&[1.0], &[1]);
    let e = x.add_(&Tensor::scalar(1.0f64)).unwrap_err();
    assert_eq!(
        e.message(),
        "a leaf Variable that requires grad is being used in an in-place operation."
    );
}

#[test]
fn test_in_place_through_view_of_nonleaf_rebases_history() {
    // h = x * 1; h[:2] *= 2 -> grad [2, 2, 1]
    let x = leaf(&[1.0, 2.0, 3.0], &[3]);
    let h = x.mul_scalar(1.0).unwrap();
    let v = h.slice(0, Some(0), Some(2), 1).unwrap();
    v.mul_(&Tensor::scalar(2.0f64)).unwrap();
    assert_eq!(h.to_vec::<f64>().unwrap(), vec![2.0, 4.0, 3.0]);
    assert_eq!(h.grad_fn().unwrap().name(), "CopySlices");
    h.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![2.0, 2.0, 1.0]);
}

#[test]
fn test_hooks_run_in_order_and_modify_gradient() {
    let x = leaf(&[1.0, 1.0], &[2]);
    let y = x.mul_scalar(2.0).unwrap();
    y.register_hook(Arc::new(|g: &Tensor| Ok(Some(g.mul_scalar(2.0)?))))
        .unwrap();
    let h = y
        .register_hook(Arc::new(|g: &Tensor| Ok(Some(g.add_scalar(1.0)?))))
        .unwrap();
    y.sum()
        .unwrap()
        .backward_with(None, Some(true), false, None)
        .unwrap();
    // (1*2 + 1) * 2 = 6
    assert_eq!(grad_of(&x), vec![6.0, 6.0]);
    h.remove();
    h.remove();
    x.set_grad(None).unwrap();
    y.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![4.0, 4.0]);
}

#[test]
fn test_matmul_gradients_all_cases() {
    let cases: &[(&[usize], &[usize])] = &[
        (&[3], &[3]),
        (&[2, 3], &[3]),
        (&[3], &[3, 2]),
        (&[2, 3], &[3, 4]),
        (&[2, 2, 3], &[3, 4]),
        (&[2, 1, 2, 3], &[3, 3, 2]),
    ];
    for (sa, sb) in cases {
        let na: usize = sa.iter().product();
        let nb: usize = sb.iter().product();
        let av: Vec<f64> = (0..na).map(|i| (i as f64 * 0.37).sin()).collect();
        let bv: Vec<f64> = (0..nb).map(|i| (i as f64 * 0.91).cos()).collect();
        let bt = Tensor::from_vec(bv.clone(), sb).unwrap();
        let f = |a: &Tensor| a.matmul(&bt).unwrap().tanh().unwrap().sum().unwrap();
        let a = leaf(&av, sa);
        f(&a).backward().unwrap();
        assert_close(&grad_of(&a), &fd_grad(f, &av, sa), 1e-6);
        let at = Tensor::from_vec(av.clone(), sa).unwrap();
        let fb = |b: &Tensor| at.matmul(b).unwrap().tanh().unwrap().sum().unwrap();
        let b = leaf(&bv, sb);
        fb(&b).backward().unwrap();
        assert_close(&grad_of(&b), &fd_grad(fb, &bv, sb), 1e-6);
    }
}

#[test]
fn test_readme_rust_example_second_derivative() {
    // y = sum(x sin x); dy/dx = sin x + x cos x; d2y/dx2 = 2 cos x - x sin x
    let xs = [1.0f64, 2.0, 3.0];
    let x = leaf(&xs, &[3]);
    let y = x.sin().unwrap().mul(&x).unwrap().sum().unwrap();
    let opts = GradOptions {
        create_graph: true,
        ..Default::default()
    };
    let g = autograd::grad(&[y], std::slice::from_ref(&x), opts).unwrap();
    autograd::backward(
        &[g[0].clone().unwrap().sum().unwrap()],
        BackwardOptions::default(),
    )
    .unwrap();
    let expected: Vec<f64> = xs.iter().map(|v| 2.0 * v.cos() - v * v.sin()).collect();
    assert_close(&grad_of(&x), &expected, 1e-12);
}
