//! `graph::dot::make_dot` against a walk of the same graph through `Node::next_edges`.

use std::collections::HashSet;
use std::sync::Arc;

use ferrograd::graph::dot::{make_dot, DotOptions};
use ferrograd::graph::node::Node;
use ferrograd::{DType, Tensor};

/// Every node reachable from `root`, each once.
fn walk(root: Arc<Node>) -> Vec<Arc<Node>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if seen.insert(Arc::as_ptr(&n)) {
            stack.extend(n.next_edges().iter().flatten().map(|e| e.node.clone()));
            out.push(n);
        }
    }
    out
}

#[test]
fn nodes_edges_and_leaves_match_the_graph() -> ferrograd::Result<()> {
    let w1 = Tensor::randn(&[3, 4], DType::Float64)?.requires_grad_(true)?;
    let w2 = Tensor::randn(&[4, 2], DType::Float64)?.requires_grad_(true)?;
    let x = Tensor::randn(&[5, 3], DType::Float64)?;
    let h = x.matmul(&w1)?.tanh()?;
    // `h` is used twice: its node must be drawn once.
    let y = h.matmul(&w2)?.sum()?.add(&h.sum()?)?;
    let dot = make_dot(&[(Some("loss"), &y)], &[("w1", &w1)], DotOptions::default())?;
    let nodes = walk(y.grad_fn().expect("y has a grad_fn"));
    let boxes: Vec<&str> = dot
        .lines()
        .filter(|l| l.starts_with("\tf") && l.contains("[label="))
        .collect();
    let mut drawn: Vec<String> = boxes
        .iter()
        .map(|l| l.split('"').nth(1).unwrap_or_default().to_string())
        .collect();
    let mut expect: Vec<String> = nodes.iter().map(|n| n.name().to_string()).collect();
    drawn.sort();
    expect.sort();
    assert_eq!(drawn, expect);
    let fn_edges = dot
        .lines()
        .filter(|l| l.starts_with("\tf") && l.contains(" -> f"))
        .count();
    let next: usize = nodes
        .iter()
        .map(|n| n.next_edges().iter().flatten().count())
        .sum();
    assert_eq!(fn_edges, next);
    assert!(dot.contains("[label=\"w1\\n (3, 4)\" fillcolor=lightblue]"));
    assert!(dot.contains("[label=\"\\n (4, 2)\" fillcolor=lightblue]"));
    assert!(dot.contains("[label=\"loss\\n ()\" fillcolor=darkolivegreen1]"));
    Ok(())
}

#[test]
fn saved_tensors_on_request() -> ferrograd::Result<()> {
    let x = Tensor::randn(&[4, 3], DType::Float32)?.requires_grad_(true)?;
    let y = x.sin()?.sum()?;
    let plain = make_dot(&[(None, &y)], &[], DotOptions::default())?;
    assert!(!plain.contains("orange"));
    let opts = DotOptions {
        show_saved: true,
        ..Default::default()
    };
    let saved = make_dot(&[(None, &y)], &[], opts)?;
    assert_eq!(saved.matches("fillcolor=orange").count(), 1);
    assert!(saved.contains("[label=\"saved 0\\n (4, 3)\" fillcolor=orange]"));
    assert_eq!(saved.matches("[dir=none]").count(), 1);
    Ok(())
}
