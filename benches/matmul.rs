//! Criterion benchmarks of matrix products through the tensor API (so per-call overhead
//! counts), forward and `mm` backward, at 1 and 2 threads, plus ndarray's `general_mat_mul`
//! (matrixmultiply, one thread) as the baseline the SIMD kernel replaced. Throughput is in
//! FLOP/s ("elem/s"): 2·n·k·m per product.
//!
//! Run: `cargo bench --bench matmul` (filter with e.g. `-- forward/f32`).

/// The allocator of the Python extension (src/python/mod.rs), so figures compare with
/// compare.py's; glibc's malloc slowed the multithreaded wide_graph 23 -> 33 ms after the
/// allocation-heavy benchmarks before it had run. (With the `python` feature the library
/// already sets it.)
#[cfg(not(feature = "python"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrograd::autograd::set_num_threads;
use ferrograd::{DType, Tensor};
use ndarray::linalg::general_mat_mul;
use ndarray::Array2;

/// How an operand is stored: row-major, or the transpose of a row-major matrix.
#[derive(Clone, Copy)]
enum Layout {
    /// a @ b.
    NN,
    /// a @ b^T (the `g @ W^T` of a backward pass).
    NT,
    /// a^T @ b (the `x^T @ g` of a backward pass).
    TN,
}

const FORWARD: &[(usize, usize, usize, Layout)] = &[
    (1024, 1024, 1024, Layout::NN),
    (128, 784, 512, Layout::NN),
    (128, 512, 784, Layout::NT),
    (784, 128, 512, Layout::TN),
    (192, 192, 192, Layout::NN),
    (192, 192, 192, Layout::NT),
    // linear's forward at small batches (faer's kernel below 513 rows)
    (8, 1024, 4096, Layout::NT),
    (32, 512, 128, Layout::NT),
    (256, 256, 256, Layout::NN),
    (64, 64, 64, Layout::NN),
    (16, 16, 16, Layout::NN),
    (1, 2, 16, Layout::NN),
];

fn name(n: usize, k: usize, m: usize, l: Layout) -> String {
    let l = match l {
        Layout::NN => "NN",
        Layout::NT => "NT",
        Layout::TN => "TN",
    };
    format!("{n}x{k}x{m}_{l}")
}

fn filled(shape: &[usize], dtype: DType, seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    let v: Vec<f64> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f64 / 1000.0 - 1.0
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap().to_dtype(dtype).unwrap()
}

/// Operands of an `n x k @ k x m` product stored per `l` (transposes are views).
fn operands(n: usize, k: usize, m: usize, l: Layout, dtype: DType) -> (Tensor, Tensor) {
    let a = match l {
        Layout::TN => filled(&[k, n], dtype, 1).t().unwrap(),
        _ => filled(&[n, k], dtype, 1),
    };
    let b = match l {
        Layout::NT => filled(&[m, k], dtype, 2).t().unwrap(),
        _ => filled(&[k, m], dtype, 2),
    };
    (a, b)
}

fn flops(n: usize, k: usize, m: usize) -> u64 {
    2 * (n * k * m) as u64
}

fn forward(c: &mut Criterion) {
    let mut g = c.benchmark_group("forward");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for (dtype, tag) in [(DType::Float32, "f32"), (DType::Float64, "f64")] {
        for &(n, k, m, l) in FORWARD {
            if dtype == DType::Float64 && !matches!((n, l), (1024 | 192 | 16, Layout::NN)) {
                continue;
            }
            let (a, b) = operands(n, k, m, l, dtype);
            g.throughput(Throughput::Elements(flops(n, k, m)));
            for threads in [1, 2] {
                set_num_threads(threads).unwrap();
                let id = BenchmarkId::new(format!("{tag}/{}", name(n, k, m, l)), threads);
                g.bench_function(id, |bench| bench.iter(|| a.matmul(&b).unwrap()));
            }
        }
    }
    g.finish();
}

/// `(a @ b).sum().backward()`: one forward and the two backward products (or one, when only
/// `a` needs a gradient, as for a weight that is frozen).
fn backward(c: &mut Criterion) {
    let mut g = c.benchmark_group("mm_backward");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for &(n, k, m, both) in &[
        (1024, 1024, 1024, true),
        (128, 784, 512, true),
        (192, 192, 192, true),
        (192, 192, 192, false),
    ] {
        let (a, b) = operands(n, k, m, Layout::NN, DType::Float32);
        let a = a.requires_grad_(true).unwrap();
        let b = b.requires_grad_(both).unwrap();
        let products = if both { 3 } else { 2 };
        g.throughput(Throughput::Elements(products * flops(n, k, m)));
        for threads in [1, 2] {
            set_num_threads(threads).unwrap();
            let tag = if both { "both" } else { "a_only" };
            let id = BenchmarkId::new(format!("f32/{}/{tag}", name(n, k, m, Layout::NN)), threads);
            g.bench_function(id, |bench| {
                bench.iter(|| {
                    a.matmul(&b).unwrap().sum().unwrap().backward().unwrap();
                    a.set_grad(None).unwrap();
                    b.set_grad(None).unwrap();
                })
            });
        }
    }
    g.finish();
}

/// The previous kernel: ndarray's `general_mat_mul` (matrixmultiply, single-threaded).
fn ndarray_baseline(c: &mut Criterion) {
    let mut g = c.benchmark_group("ndarray_general_mat_mul");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for &(n, k, m, l) in FORWARD {
        let a: Array2<f32> = match l {
            Layout::TN => Array2::from_elem((k, n), 0.5).reversed_axes(),
            _ => Array2::from_elem((n, k), 0.5),
        };
        let b: Array2<f32> = match l {
            Layout::NT => Array2::from_elem((m, k), 0.25).reversed_axes(),
            _ => Array2::from_elem((k, m), 0.25),
        };
        let mut out = Array2::<f32>::zeros((n, m));
        g.throughput(Throughput::Elements(flops(n, k, m)));
        g.bench_function(format!("f32/{}", name(n, k, m, l)), |bench| {
            bench.iter(|| general_mat_mul(1.0, &a, &b, 0.0, &mut out))
        });
    }
    g.finish();
}

criterion_group!(benches, forward, backward, ndarray_baseline);
criterion_main!(benches);
