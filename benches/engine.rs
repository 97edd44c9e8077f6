//! Criterion benchmarks of the engine without Python: a long chain of tiny ops (per-op
//! overhead, forward + backward) and a wide graph of independent matmul branches (the parallel
//! scheduler). Run: cargo bench

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ferrograd::autograd;
use ferrograd::{DType, Tensor};

fn tiny_chain(c: &mut Criterion) {
    let mut g = c.benchmark_group("tiny_chain");
    g.sample_size(20);
    for &n in &[1_000usize, 5_000] {
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let x = Tensor::ones(&[16], DType::Float32)
                .requires_grad_(true)
                .unwrap();
            b.iter(|| {
                let mut y = x.clone();
                for _ in 0..n {
                    y = y
                        .mul_scalar(0.999)
                        .unwrap()
                        .add_scalar(0.001)
                        .unwrap()
                        .tanh()
                        .unwrap()
                        .sin()
                        .unwrap();
                }
                y.sum().unwrap().backward().unwrap();
                x.set_grad(None).unwrap();
            });
        });
    }
    g.finish();
}

fn wide_graph(c: &mut Criterion) {
    let mut g = c.benchmark_group("wide_graph_16x8_192");
    g.sample_size(10);
    let x = Tensor::randn(&[192, 192], DType::Float32)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let ws: Vec<Tensor> = (0..16)
        .map(|_| {
            Tensor::randn(&[192, 192], DType::Float32)
                .unwrap()
                .mul_scalar(0.07)
                .unwrap()
        })
        .collect();
    for &threads in &[1usize, 2] {
        g.bench_with_input(
            BenchmarkId::new("threads", threads),
            &threads,
            |b, &threads| {
                autograd::set_num_threads(threads).unwrap();
                b.iter(|| {
                    let mut total: Option<Tensor> = None;
                    for w in &ws {
                        let mut h = x.clone();
                        for _ in 0..8 {
                            h = h.matmul(w).unwrap().tanh().unwrap();
                        }
                        let s = h.sum().unwrap();
                        total = Some(match total {
                            None => s,
                            Some(t) => t.add(&s).unwrap(),
                        });
                    }
                    total.unwrap().backward().unwrap();
                    x.set_grad(None).unwrap();
                });
            },
        );
    }
    g.finish();
}

criterion_group!(benches, tiny_chain, wide_graph);
criterion_main!(benches);
