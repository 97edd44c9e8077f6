//! Criterion benchmarks of the engine without Python, the workloads of `benches/compare.py`
//! (float32, forward + backward): a long chain of tiny ops (per-op overhead), a scalar MLP, an
//! MLP training step, a wide graph of independent matmul branches (the parallel scheduler, at 1
//! and 2 threads) and a Hessian-vector product. Comparing with compare.py shows what the
//! Python binding costs. Run: cargo bench --bench engine

/// The allocator of the Python extension (src/python/mod.rs), so figures compare with
/// compare.py's; glibc's malloc slowed the multithreaded wide_graph 23 -> 33 ms after the
/// allocation-heavy benchmarks before it had run. (With the `python` feature the library
/// already sets it.)
#[cfg(not(feature = "python"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::{DType, Tensor};

fn leaf(shape: &[usize], scale: f64) -> Tensor {
    Tensor::randn(shape, DType::Float32)
        .unwrap()
        .mul_scalar(scale)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

fn clear(ps: &[Tensor]) {
    for p in ps {
        p.set_grad(None).unwrap();
    }
}

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

/// A 2-16-16-1 tanh MLP on 64 single-row inputs one at a time, losses summed, one backward.
fn scalar_mlp(c: &mut Criterion) {
    autograd::set_num_threads(2).unwrap();
    let dims = [(2, 16, 0.5), (16, 16, 0.25), (16, 1, 0.25)];
    let ps: Vec<Tensor> = dims
        .iter()
        .flat_map(|&(a, b, s)| [leaf(&[a, b], s), leaf(&[b], 1.0)])
        .collect();
    let xs: Vec<Tensor> = (0..64)
        .map(|_| Tensor::randn(&[1, 2], DType::Float32).unwrap())
        .collect();
    c.bench_function("scalar_mlp_64", |b| {
        b.iter(|| {
            let mut total: Option<Tensor> = None;
            for x in &xs {
                let mut h = x.clone();
                for (i, layer) in ps.chunks(2).enumerate() {
                    h = h.matmul(&layer[0]).unwrap().add(&layer[1]).unwrap();
                    if i < 2 {
                        h = h.tanh().unwrap();
                    }
                }
                let out = h.sum().unwrap();
                total = Some(match total {
                    None => out,
                    Some(t) => t.add(&out).unwrap(),
                });
            }
            total.unwrap().backward().unwrap();
            clear(&ps);
        });
    });
}

/// 784-512-512-10 MLP with biases and relu, batch 128, mean-square loss, backward.
fn mlp_train(c: &mut Criterion) {
    autograd::set_num_threads(2).unwrap();
    let dims = [784usize, 512, 512, 10];
    let mut ps = Vec::new();
    for w in dims.windows(2) {
        ps.push(leaf(&[w[0], w[1]], (2.0 / w[0] as f64).sqrt()));
        ps.push(leaf(&[w[1]], 0.0));
    }
    let x = Tensor::randn(&[128, 784], DType::Float32).unwrap();
    let y = Tensor::randn(&[128, 10], DType::Float32).unwrap();
    let mut g = c.benchmark_group("mlp_train_784_512_512_10_b128");
    g.sample_size(20);
    g.bench_function("step", |b| {
        b.iter(|| {
            let mut h = x.clone();
            for (i, layer) in ps.chunks(2).enumerate() {
                h = h.matmul(&layer[0]).unwrap().add(&layer[1]).unwrap();
                if i < 2 {
                    h = h.relu().unwrap();
                }
            }
            let d = h.sub(&y).unwrap();
            d.mul(&d).unwrap().mean().unwrap().backward().unwrap();
            clear(&ps);
        });
    });
    g.finish();
}

/// Hessian-vector product of `((x @ w).tanh() ** 2).sum()` w.r.t. a 256x256 `w`: two `grad`
/// calls, the first with `create_graph`.
fn hvp(c: &mut Criterion) {
    autograd::set_num_threads(2).unwrap();
    let x = Tensor::randn(&[64, 256], DType::Float32).unwrap();
    let w = leaf(&[256, 256], 0.06);
    let v = Tensor::randn(&[256, 256], DType::Float32).unwrap();
    let mut g = c.benchmark_group("hvp_256");
    g.sample_size(20);
    g.bench_function("step", |b| {
        b.iter(|| {
            let t = x.matmul(&w).unwrap().tanh().unwrap();
            let loss = t.pow_scalar(2.0).unwrap().sum().unwrap();
            let first = GradOptions {
                create_graph: true,
                ..Default::default()
            };
            let gw = autograd::grad(&[loss], std::slice::from_ref(&w), first).unwrap();
            let gv = gw[0].as_ref().unwrap().mul(&v).unwrap().sum().unwrap();
            autograd::grad(&[gv], std::slice::from_ref(&w), GradOptions::default()).unwrap()
        });
    });
    g.finish();
}

criterion_group!(benches, tiny_chain, scalar_mlp, mlp_train, wide_graph, hvp);
criterion_main!(benches);
