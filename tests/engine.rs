//! The engine: determinism across thread counts, deep chains, memory release.

mod common;
use common::leaf;
use ferrograd::autograd;
use ferrograd::{DType, Tensor};

fn wide_graph_grad() -> Vec<f32> {
    let x = Tensor::from_vec(
        (0..64 * 64)
            .map(|i| ((i as f32) * 0.01).sin())
            .collect::<Vec<_>>(),
        &[64, 64],
    )
    .unwrap();
    let x = x.requires_grad_(true).unwrap();
    let mut total: Option<Tensor> = None;
    for b in 0..16 {
        let w = Tensor::from_vec(
            (0..64 * 64)
                .map(|i| (((i + b * 7) as f32) * 0.013).cos() * 0.1)
                .collect::<Vec<_>>(),
            &[64, 64],
        )
        .unwrap();
        let mut h = x.clone();
        for _ in 0..4 {
            h = h.matmul(&w).unwrap().tanh().unwrap();
        }
        let s = h.sum().unwrap();
        total = Some(match total {
            None => s,
            Some(t) => t.add(&s).unwrap(),
        });
    }
    total.unwrap().backward().unwrap();
    x.grad().unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn test_results_are_bitwise_identical_for_any_thread_count() {
    autograd::set_num_threads(1).unwrap();
    let one = wide_graph_grad();
    autograd::set_num_threads(4).unwrap();
    for _ in 0..3 {
        let many = wide_graph_grad();
        assert!(one
            .iter()
            .zip(&many)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
    autograd::set_num_threads(2).unwrap();
}

#[test]
fn test_million_op_chain_runs_backward_and_frees_without_stack_overflow() {
    let x = leaf(&[1.0], &[1]);
    let mut y = x.clone();
    for _ in 0..1_000_000 {
        y = y.mul_scalar(1.0).unwrap();
    }
    y.sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![1.0]);
    // Dropping y frees the million-node graph iteratively (this would overflow if recursive).
    let weak = std::sync::Arc::downgrade(&y.grad_fn().unwrap());
    drop(y);
    assert!(weak.upgrade().is_none());
}

#[test]
fn test_saved_tensors_released_after_backward() {
    let x = leaf(&[1.0, 2.0], &[2]);
    let big = Tensor::ones(&[1000], DType::Float64);
    let y = x.sum().unwrap().mul(&big).unwrap().sum().unwrap();
    let storage = std::sync::Arc::downgrade(big.storage());
    drop(big);
    assert!(storage.upgrade().is_some(), "saved by the graph");
    y.backward().unwrap();
    assert!(storage.upgrade().is_none(), "released after backward");
}
