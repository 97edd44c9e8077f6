//! Pictures of the backward graph: Graphviz DOT text in torchviz's look (`make_dot`).
//!
//! One box per node, named as its `grad_fn` (`MmBackward0`, `AccumulateGrad`), an edge from each
//! node to the node it sends gradients to (one per non-empty entry of `next_functions`, so the
//! arrows point the way the forward ran), leaves in light blue labelled with their names and
//! shapes, outputs in green, and on request the tensors a node saved (orange) and the shapes and
//! dtypes of its forward outputs.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use super::node::{Node, NodeKind};
use crate::error::Result;
use crate::tensor::{Tensor, TensorImpl};

/// What [`make_dot`] draws besides the nodes, edges, leaves and outputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct DotOptions {
    /// Under each node's name, the shapes and dtypes of its forward outputs: what a ferrograd
    /// node keeps besides tensors (it has no named scalar attributes such as torch's
    /// `_saved_dim`).
    pub show_attrs: bool,
    /// The tensors each node saved for its backward, with their shapes (orange, joined to the
    /// node by an undirected edge). An error once they were freed by a backward.
    pub show_saved: bool,
}

/// `(4, 3)`, as torchviz writes a size.
fn size_str(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("({})", dims.join(", "))
}

/// A DOT string literal (quotes and backslashes escaped, newlines as `\n`).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Builds the DOT text; ids are handed out in visiting order so the text is deterministic.
struct Writer<'a> {
    out: String,
    names: HashMap<*const TensorImpl, &'a str>,
    nodes: HashMap<*const Node, String>,
    tensors: HashMap<*const TensorImpl, String>,
    opts: DotOptions,
}

impl Writer<'_> {
    fn tensor_label(&self, t: &Tensor, name: Option<&str>) -> String {
        let name = name
            .or_else(|| self.names.get(&Arc::as_ptr(&t.0)).copied())
            .unwrap_or("");
        format!("{name}\n {}", size_str(t.shape()))
    }

    /// Draws `t` once as a coloured tensor box and returns its id.
    fn tensor(&mut self, t: &Tensor, label: String, color: &str) -> String {
        let key = Arc::as_ptr(&t.0);
        if let Some(id) = self.tensors.get(&key) {
            return id.clone();
        }
        let id = format!("t{}", self.tensors.len());
        let _ = writeln!(
            self.out,
            "\t{id} [label={} fillcolor={color}]",
            quote(&label)
        );
        self.tensors.insert(key, id.clone());
        id
    }

    fn node_label(&self, node: &Node) -> String {
        let mut label = node.name().to_string();
        if self.opts.show_attrs && !matches!(node.kind, NodeKind::Accumulate { .. }) {
            let lines: Vec<String> = node
                .output_meta
                .iter()
                .enumerate()
                .map(|(i, m)| format!("output {i}: {} {}", m.dtype.name(), size_str(&m.shape)))
                .collect();
            let width = lines.iter().map(|l| l.len()).max().unwrap_or(0);
            label.push('\n');
            label.push_str(&"-".repeat(width.max(label.len() - 1)));
            for l in lines {
                label.push('\n');
                label.push_str(&l);
            }
        }
        label
    }

    /// Draws `root` and everything it reaches (depth first, each node once); returns its id.
    fn graph(&mut self, root: &Arc<Node>) -> Result<String> {
        let root_id = self.visit(root)?;
        // Explicit stack: graphs of a million ops must not overflow the call stack.
        let mut stack = vec![root.clone()];
        while let Some(node) = stack.pop() {
            let id = self.nodes[&Arc::as_ptr(&node)].clone();
            if let Some(leaf) = node.variable() {
                let label = self.tensor_label(&leaf, None);
                let t = self.tensor(&leaf, label, "lightblue");
                let _ = writeln!(self.out, "\t{t} -> {id}");
            }
            if self.opts.show_saved {
                for (i, s) in node.unpack_saved()?.iter().enumerate() {
                    // Each saved tensor gets a box of its own: the same leaf saved by two
                    // nodes is drawn twice, as torchviz draws one per `_saved_*` attribute.
                    let sid = format!("{id}_s{i}");
                    let label = format!("saved {i}\n {}", size_str(s.shape()));
                    let _ = writeln!(
                        self.out,
                        "\t{sid} [label={} fillcolor=orange]",
                        quote(&label)
                    );
                    let _ = writeln!(self.out, "\t{id} -> {sid} [dir=none]");
                }
            }
            // Children pushed in reverse so they are numbered in `next_functions` order.
            let mut fresh = Vec::new();
            for e in node.next_edges().iter().flatten() {
                let known = self.nodes.contains_key(&Arc::as_ptr(&e.node));
                let child = self.visit(&e.node)?;
                let _ = writeln!(self.out, "\t{child} -> {id}");
                if !known {
                    fresh.push(e.node.clone());
                }
            }
            stack.extend(fresh.into_iter().rev());
        }
        Ok(root_id)
    }

    /// Declares `node`'s box the first time it is met; returns its id.
    fn visit(&mut self, node: &Arc<Node>) -> Result<String> {
        let key = Arc::as_ptr(node);
        if let Some(id) = self.nodes.get(&key) {
            return Ok(id.clone());
        }
        let id = format!("f{}", self.nodes.len());
        let label = self.node_label(node);
        let _ = writeln!(self.out, "\t{id} [label={}]", quote(&label));
        self.nodes.insert(key, id.clone());
        Ok(id)
    }
}

/// The backward graph behind `outputs` as Graphviz DOT text, in torchviz's `make_dot` look.
///
/// `outputs` are the tensors drawn in green, each with an optional label (otherwise its name in
/// `params`, or none) and its shape. `params` names tensors: a leaf whose accumulator the graph
/// reaches is labelled with its name and shape. Each node is drawn once, however many paths
/// reach it; the text is deterministic (ids in visiting order).
///
/// ```
/// use ferrograd::graph::dot::{make_dot, DotOptions};
/// use ferrograd::Tensor;
///
/// # fn main() -> ferrograd::Result<()> {
/// let w = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2])?.requires_grad_(true)?;
/// let x = Tensor::from_vec(vec![0.5f64, -1.0], &[1, 2])?;
/// let y = x.matmul(&w)?.relu()?.sum()?;
/// let dot = make_dot(&[(None, &y)], &[("w", &w)], DotOptions::default())?;
/// assert!(dot.contains("SumBackward0") && dot.contains("ReluBackward0"));
/// assert!(dot.contains("label=\"w\\n (2, 2)\" fillcolor=lightblue"));
/// # Ok(())
/// # }
/// ```
pub fn make_dot(
    outputs: &[(Option<&str>, &Tensor)],
    params: &[(&str, &Tensor)],
    opts: DotOptions,
) -> Result<String> {
    let mut w = Writer {
        out: String::from("digraph {\n\tgraph [size=\"12,12\"]\n\tnode [align=left fontname=monospace fontsize=10 height=0.2 ranksep=0.1 shape=box style=filled]\n"),
        names: params
            .iter()
            .map(|&(name, t)| (Arc::as_ptr(&t.0), name))
            .collect(),
        nodes: HashMap::new(),
        tensors: HashMap::new(),
        opts,
    };
    for &(name, t) in outputs {
        let label = w.tensor_label(t, name);
        let tid = w.tensor(t, label, "darkolivegreen1");
        if let Some(f) = t.grad_fn() {
            let fid = w.graph(&f)?;
            let _ = writeln!(w.out, "\t{fid} -> {tid}");
        }
    }
    w.out.push_str("}\n");
    Ok(w.out)
}
