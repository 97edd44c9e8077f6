//! Criterion benchmarks of the elementwise kernels: the vectorised float32 math against std's
//! scalar functions, big tensor ops (parallel, uninitialised outputs), the sum reduction, the
//! `elementwise_big` workload of compare.py and the fused backward rules on tiny tensors.
//! Run: cargo bench --bench elementwise

/// The allocator of the Python extension (src/python/mod.rs), so figures compare with
/// compare.py's; glibc's malloc slowed the multithreaded wide_graph 23 -> 33 ms after the
/// allocation-heavy benchmarks before it had run. (With the `python` feature the library
/// already sets it.)
#[cfg(not(feature = "python"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrograd::kernels::vmath::UnaryF32;
use ferrograd::Tensor;

fn inputs(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f64 * 0.618_034).fract() * 6.0 - 3.0) as f32)
        .collect()
}

/// The slice kernels against a plain loop over std (libm) at an L1-resident size.
fn vmath(c: &mut Criterion) {
    let n = 4096;
    let x: Vec<f32> = inputs(n).iter().map(|v| v.abs() + 1e-3).collect();
    let mut out = vec![0f32; n];
    let mut g = c.benchmark_group("vmath_4096");
    g.throughput(Throughput::Elements(n as u64));
    let std_fns: [fn(f32) -> f32; 6] = [f32::exp, f32::ln, f32::sin, f32::cos, f32::tanh, |v| {
        1.0 / (1.0 + (-v).exp())
    }];
    for (f, s) in UnaryF32::ALL.into_iter().zip(std_fns) {
        g.bench_function(BenchmarkId::new("vector", format!("{f:?}")), |b| {
            b.iter(|| f.apply(black_box(&x), &mut out))
        });
        g.bench_function(BenchmarkId::new("std", format!("{f:?}")), |b| {
            b.iter(|| {
                for (o, &v) in out.iter_mut().zip(black_box(&x)) {
                    *o = s(v);
                }
            })
        });
    }
    g.finish();
}

/// Whole-tensor ops at compare.py's size (4M float32).
fn big_ops(c: &mut Criterion) {
    let n = 4_000_000;
    let x = Tensor::from_vec(inputs(n), &[n]).unwrap();
    let y = x.mul_scalar(0.5).unwrap();
    let mut g = c.benchmark_group("tensor_4M");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("sin", |b| b.iter(|| x.sin().unwrap()));
    g.bench_function("exp", |b| b.iter(|| x.exp().unwrap()));
    g.bench_function("mul", |b| b.iter(|| x.mul(&y).unwrap()));
    g.bench_function("mul_scalar", |b| b.iter(|| x.mul_scalar(0.5).unwrap()));
    g.bench_function("sum", |b| b.iter(|| x.sum().unwrap()));
    g.finish();
}

/// compare.py's elementwise_big: `(x.sin() * x + x.exp() * 0.5).sum().backward()`.
fn elementwise_big(c: &mut Criterion) {
    let mut g = c.benchmark_group("elementwise_big");
    g.sample_size(10);
    for &n in &[1_000_000usize, 4_000_000] {
        let x = Tensor::from_vec(inputs(n), &[n])
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let s = x.sin().unwrap().mul(&x).unwrap();
                let e = x.exp().unwrap().mul_scalar(0.5).unwrap();
                s.add(&e).unwrap().sum().unwrap().backward().unwrap();
                x.set_grad(None).unwrap();
            })
        });
    }
    g.finish();
}

/// A tensor op to benchmark.
type UnaryOp = fn(&Tensor) -> Tensor;

/// Forward + fused backward of one op on 16 elements: the per-op cost tiny_chain pays.
fn tiny_fused(c: &mut Criterion) {
    let mut g = c.benchmark_group("tiny_op_fwd_bwd_16");
    let x = Tensor::from_vec(inputs(16), &[16])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let ops: [(&str, UnaryOp); 3] = [
        ("tanh", |t| t.tanh().unwrap()),
        ("sin", |t| t.sin().unwrap()),
        ("exp", |t| t.exp().unwrap()),
    ];
    for (name, op) in ops {
        g.bench_function(name, |b| {
            b.iter(|| {
                op(&x).sum().unwrap().backward().unwrap();
                x.set_grad(None).unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, vmath, big_ops, elementwise_big, tiny_fused);
criterion_main!(benches);
