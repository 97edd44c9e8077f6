//! Criterion benchmarks of the `torch.linalg` factorisations through the tensor API (faer
//! underneath): inv, solve, det, cholesky, qr, eigh, svd and matrix_exp of 256x256 float64
//! matrices, and the backward of svd, eigh and inv.
//!
//! Run: `cargo bench --bench linalg` (filter with e.g. `-- svd`).

/// The allocator of the Python extension, so figures compare with compare.py's.
#[cfg(not(feature = "python"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use ferrograd::autograd::{backward, BackwardOptions};
use ferrograd::ops::linalg::QrMode;
use ferrograd::{DType, Tensor};

const N: usize = 256;

/// A well-conditioned `n x n` float64 matrix (random plus `n·I`) and a symmetric
/// positive-definite one.
fn inputs() -> (Tensor, Tensor) {
    let a = Tensor::randn(&[N, N], DType::Float64)
        .unwrap()
        .add(
            &Tensor::eye(N, N, DType::Float64)
                .unwrap()
                .mul_scalar(N as f64)
                .unwrap(),
        )
        .unwrap();
    let spd = a.matmul(&a.t().unwrap()).unwrap();
    (a, spd)
}

fn forward(c: &mut Criterion) {
    let (a, spd) = inputs();
    let b = Tensor::randn(&[N, N], DType::Float64).unwrap();
    let mut g = c.benchmark_group("linalg_forward_256_f64");
    g.measurement_time(Duration::from_secs(3)).sample_size(20);
    g.bench_function("inv", |bn| bn.iter(|| a.inv().unwrap()));
    g.bench_function("solve", |bn| bn.iter(|| a.solve(&b, true).unwrap()));
    g.bench_function("det", |bn| bn.iter(|| a.det().unwrap()));
    g.bench_function("cholesky", |bn| bn.iter(|| spd.cholesky(false).unwrap()));
    g.bench_function("qr", |bn| bn.iter(|| a.qr(QrMode::Reduced).unwrap()));
    g.bench_function("eigh", |bn| bn.iter(|| spd.eigh(true).unwrap()));
    g.bench_function("svd", |bn| bn.iter(|| a.svd(false).unwrap()));
    g.bench_function("svdvals", |bn| bn.iter(|| a.svdvals().unwrap()));
    g.bench_function("matrix_exp", |bn| {
        let small = a.mul_scalar(1.0 / N as f64).unwrap();
        bn.iter(|| small.matrix_exp().unwrap())
    });
    g.finish();
}

fn backward_pass(c: &mut Criterion) {
    let (a, spd) = inputs();
    let mut g = c.benchmark_group("linalg_backward_256_f64");
    g.measurement_time(Duration::from_secs(3)).sample_size(10);
    let run = |f: &dyn Fn(&Tensor) -> Tensor, x: &Tensor| {
        let x = x.detach().requires_grad_(true).unwrap();
        let y = f(&x).sum().unwrap();
        backward(&[y], BackwardOptions::default()).unwrap();
    };
    g.bench_function("svd", |bn| {
        bn.iter(|| {
            run(
                &|x| {
                    let (u, s, vh) = x.svd(false).unwrap();
                    u.sum()
                        .unwrap()
                        .add(&s.sum().unwrap())
                        .unwrap()
                        .add(&vh.sum().unwrap())
                        .unwrap()
                },
                &a,
            )
        })
    });
    g.bench_function("eigh", |bn| {
        bn.iter(|| {
            run(
                &|x| {
                    let (l, v) = x.eigh(true).unwrap();
                    l.sum().unwrap().add(&v.sum().unwrap()).unwrap()
                },
                &spd,
            )
        })
    });
    g.bench_function("inv", |bn| bn.iter(|| run(&|x| x.inv().unwrap(), &a)));
    g.finish();
}

criterion_group!(benches, forward, backward_pass);
criterion_main!(benches);
