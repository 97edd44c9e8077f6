//! The matrix-product kernels against an independent truth (a naive f64 triple loop over the
//! logical elements): f32/f64, contiguous, transposed, strided and broadcast operands, empty
//! shapes, the 1-D cases, sizes on both sides of the threading threshold, thread-count
//! independence (bitwise), the backward products (also against finite differences) and
//! outputs too big for memory.

use ferrograd::autograd::{self, set_num_threads, GradOptions};
use ferrograd::kernels::gemm::{matmul_strided, MatRef, PARALLEL_MIN_WORK};
use ferrograd::{DType, Tensor};

/// Deterministic values in [-1, 1).
fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn tensor(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(values(n, seed), shape)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

/// Naive product of row-major `a` [nb, n, k] and `b` [nb, k, m]: values and, per element,
/// sum |a_ip * b_pj| (the scale of the rounding error).
fn naive(a: &[f64], b: &[f64], nb: usize, n: usize, k: usize, m: usize) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; nb * n * m];
    let mut mag = vec![0.0; nb * n * m];
    for t in 0..nb {
        for i in 0..n {
            for j in 0..m {
                let (mut s, mut g) = (0.0, 0.0);
                for p in 0..k {
                    let x = a[t * n * k + i * k + p] * b[t * k * m + p * m + j];
                    s += x;
                    g += x.abs();
                }
                out[t * n * m + i * m + j] = s;
                mag[t * n * m + i * m + j] = g;
            }
        }
    }
    (out, mag)
}

fn unit_roundoff(d: DType) -> f64 {
    match d {
        DType::Float32 => f32::EPSILON as f64,
        _ => f64::EPSILON,
    }
}

/// The naive product of the logical operands of `a.matmul(b)` (1-D operands promoted and batch
/// dims broadcast as torch does): its shape, values and rounding-error scales.
fn reference(a: &Tensor, b: &Tensor) -> (Vec<usize>, Vec<f64>, Vec<f64>, usize) {
    let a2 = if a.dim() == 1 {
        a.unsqueeze(0).unwrap()
    } else {
        a.clone()
    };
    let b2 = if b.dim() == 1 {
        b.unsqueeze(1).unwrap()
    } else {
        b.clone()
    };
    let (sa, sb) = (a2.shape().to_vec(), b2.shape().to_vec());
    let (n, k, m) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    let batch =
        ferrograd::tensor::shape::broadcast_shapes(&sa[..sa.len() - 2], &sb[..sb.len() - 2])
            .unwrap()
            .to_vec();
    let nb: usize = batch.iter().product();
    let full = |r: usize, c: usize| {
        let mut s = batch.clone();
        s.extend([r, c]);
        s
    };
    let av = a2.expand(&full(n, k)).unwrap().to_vec::<f64>().unwrap();
    let bv = b2.expand(&full(k, m)).unwrap().to_vec::<f64>().unwrap();
    let (want, mag) = naive(&av, &bv, nb, n, k, m);
    let mut shape = batch;
    if a.dim() > 1 {
        shape.push(n);
    }
    if b.dim() > 1 {
        shape.push(m);
    }
    (shape, want, mag, k)
}

/// `got` against the naive product of `a` and `b`, within a rounding bound for `dtype`.
fn assert_is_product(got: &Tensor, a: &Tensor, b: &Tensor, dtype: DType) {
    let (shape, want, mag, k) = reference(a, b);
    assert_eq!(
        got.shape(),
        shape.as_slice(),
        "{:?} @ {:?}",
        a.shape(),
        b.shape()
    );
    let got = got.to_vec::<f64>().unwrap();
    let u = unit_roundoff(dtype);
    for (i, ((g, w), s)) in got.iter().zip(&want).zip(&mag).enumerate() {
        let tol = 2.0 * (k as f64 + 2.0) * u * s + f64::MIN_POSITIVE;
        assert!(
            (g - w).abs() <= tol,
            "{:?} @ {:?} element {i}: {g} vs {w} (tol {tol})",
            a.shape(),
            b.shape()
        );
    }
}

/// `a.matmul(b)` against the naive product of the logical (broadcast) operands.
fn check_matmul(a: &Tensor, b: &Tensor) {
    let r = a.matmul(b).unwrap();
    assert_is_product(&r, a, b, r.dtype());
}

const FLOATS: [DType; 2] = [DType::Float32, DType::Float64];

#[test]
fn contiguous_shapes_below_and_above_threshold() {
    for d in FLOATS {
        for &(n, k, m) in &[
            (1, 2, 16),
            (16, 16, 16),
            (3, 5, 7),
            (33, 17, 65),
            (64, 64, 64),
            (128, 100, 70),
            (200, 300, 150),
            (17, 700, 40),
            (1, 1000, 300),
            (300, 1000, 1),
        ] {
            check_matmul(&tensor(&[n, k], d, 1), &tensor(&[k, m], d, 2));
        }
    }
}

#[test]
fn transposed_operands_are_read_in_place() {
    for d in FLOATS {
        for &(n, k, m) in &[(5, 3, 4), (96, 80, 112), (128, 512, 10), (130, 70, 260)] {
            let at = tensor(&[k, n], d, 3).t().unwrap();
            let bt = tensor(&[m, k], d, 4).t().unwrap();
            let a = tensor(&[n, k], d, 5);
            let b = tensor(&[k, m], d, 6);
            check_matmul(&at, &b);
            check_matmul(&a, &bt);
            check_matmul(&at, &bt);
        }
    }
}

#[test]
fn sliced_and_strided_operands() {
    for d in FLOATS {
        // Every other row and column of a bigger matrix, starting at an offset.
        let big = tensor(&[260, 300], d, 7);
        let a = big
            .slice(0, Some(3), None, 2)
            .unwrap()
            .slice(1, Some(1), Some(241), 2)
            .unwrap();
        let b = tensor(&[120, 90], d, 8)
            .narrow(1, 5, 70)
            .unwrap()
            .slice(0, None, None, 1)
            .unwrap();
        check_matmul(&a, &b);
        // A column of a matrix as a vector (stride != 1), and a permuted 3-D operand.
        let v = tensor(&[70, 4], d, 9).select(1, 2).unwrap();
        check_matmul(&b, &v);
        let p = tensor(&[6, 4, 5], d, 10).permute(&[2, 0, 1]).unwrap();
        check_matmul(&p, &tensor(&[4, 3], d, 11));
    }
}

#[test]
fn batched_with_broadcast_batch_dims() {
    for d in FLOATS {
        check_matmul(&tensor(&[2, 3, 4, 5], d, 12), &tensor(&[5, 6], d, 13));
        check_matmul(&tensor(&[4, 5], d, 14), &tensor(&[2, 3, 5, 6], d, 15));
        check_matmul(&tensor(&[2, 1, 4, 5], d, 16), &tensor(&[3, 5, 6], d, 17));
        // Expanded (stride 0) batch dims, and batches big enough for the threaded path.
        let a = tensor(&[1, 70, 90], d, 18).expand(&[6, 70, 90]).unwrap();
        check_matmul(&a, &tensor(&[6, 90, 80], d, 19));
        check_matmul(&tensor(&[3, 150, 64], d, 20), &tensor(&[1, 64, 200], d, 21));
        check_matmul(
            &tensor(&[5, 20, 30], d, 22).transpose(0, 1).unwrap(),
            &tensor(&[20, 30, 10], d, 23),
        );
    }
}

#[test]
fn empty_dims_and_zero_k() {
    for d in FLOATS {
        let r = tensor(&[3, 0], d, 1)
            .matmul(&tensor(&[0, 4], d, 2))
            .unwrap();
        assert_eq!(r.shape(), &[3, 4]);
        assert!(r.to_vec::<f64>().unwrap().iter().all(|&x| x == 0.0));
        for (a, b, s) in [
            (vec![0, 5], vec![5, 4], vec![0, 4]),
            (vec![3, 5], vec![5, 0], vec![3, 0]),
            (vec![0, 3, 5], vec![5, 4], vec![0, 3, 4]),
            (vec![2, 0, 5], vec![2, 5, 0], vec![2, 0, 0]),
        ] {
            let r = tensor(&a, d, 3).matmul(&tensor(&b, d, 4)).unwrap();
            assert_eq!(r.shape(), s.as_slice());
        }
        // k = 0 with batches, broadcasting and a vector: still all zeros.
        let r = tensor(&[2, 3, 0], d, 7)
            .matmul(&tensor(&[0, 4], d, 8))
            .unwrap();
        assert_eq!(r.shape(), &[2, 3, 4]);
        assert!(r.to_vec::<f64>().unwrap().iter().all(|&x| x == 0.0));
        let r = tensor(&[5, 0], d, 9).matmul(&tensor(&[0], d, 10)).unwrap();
        assert_eq!(r.to_vec::<f64>().unwrap(), vec![0.0; 5]);
        let dot = tensor(&[0], d, 5).matmul(&tensor(&[0], d, 6)).unwrap();
        assert_eq!(dot.item().unwrap(), 0.0);
    }
}

#[test]
fn one_dimensional_cases() {
    for d in FLOATS {
        check_matmul(&tensor(&[7], d, 1), &tensor(&[7], d, 2));
        check_matmul(&tensor(&[7], d, 3), &tensor(&[7, 5], d, 4));
        check_matmul(&tensor(&[5, 7], d, 5), &tensor(&[7], d, 6));
        check_matmul(&tensor(&[3, 5, 7], d, 7), &tensor(&[7], d, 8));
        check_matmul(&tensor(&[7], d, 9), &tensor(&[2, 7, 5], d, 10));
        check_matmul(&tensor(&[4000], d, 11), &tensor(&[4000], d, 12));
        check_matmul(&tensor(&[600, 700], d, 13), &tensor(&[700], d, 14));
    }
}

#[test]
fn int64_products_stay_exact() {
    let a = Tensor::from_vec((0..24i64).collect(), &[2, 3, 4]).unwrap();
    let b = Tensor::from_vec((0..20i64).map(|x| x - 7).collect(), &[5, 4]).unwrap();
    let r = a.matmul(&b.t().unwrap()).unwrap();
    assert_eq!(r.dtype(), DType::Int64);
    let bt = b.t().unwrap().to_vec::<f64>().unwrap();
    let (want, _) = naive(
        &a.to_vec::<f64>().unwrap(),
        &[bt.clone(), bt].concat(),
        2,
        3,
        4,
        5,
    );
    let got: Vec<f64> = r
        .to_vec::<i64>()
        .unwrap()
        .iter()
        .map(|&x| x as f64)
        .collect();
    assert_eq!(got, want);
}

/// The kernel entry point with explicit thread counts; every layout of the same logical
/// operands must give bitwise the same result for any thread count.
fn strided_product<T: ferrograd::kernels::gemm::GemmScalar>(
    conv: impl Fn(f64) -> T,
    (nb, n, k, m): (usize, usize, usize, usize),
    (a_t, b_t): (bool, bool),
    threads: usize,
) -> Vec<T> {
    let a: Vec<T> = values(nb * n * k, 31).into_iter().map(&conv).collect();
    let b: Vec<T> = values(nb * k * m, 32).into_iter().map(&conv).collect();
    // Stored transposed: element (i, p) of a matrix at p * n + i.
    let (ars, acs) = if a_t { (1, n) } else { (k, 1) };
    let (brs, bcs) = if b_t { (1, k) } else { (m, 1) };
    let (sa, sb) = ([n * k], [k * m]);
    let ma = MatRef {
        data: &a,
        offset: 0,
        batch_strides: &sa,
        row_stride: ars,
        col_stride: acs,
    };
    let mb = MatRef {
        data: &b,
        offset: 0,
        batch_strides: &sb,
        row_stride: brs,
        col_stride: bcs,
    };
    matmul_strided(&[nb], n, k, m, ma, mb, threads).unwrap()
}

#[test]
fn results_do_not_depend_on_thread_count() {
    let shapes = [
        (1, 64, 64, 64),
        (1, 192, 192, 192),
        // Several balancing bands per thread, k past 512 (cache-derived blocking).
        (1, 520, 600, 1030),
        (1, 1030, 600, 300),
        (1, 128, 784, 512),
        (1, 784, 128, 512),
        (1, 128, 512, 10),
        (1, 8, 4096, 40),
        (1, 96, 1000, 32),
        (1, 32, 1000, 200),
        (1, 70, 600, 70),
        (1, 200, 1000, 32),
        (1, 12, 700, 100),
        (1, 40, 700, 8),
        (1, 500, 1100, 1),
        (1, 1, 1100, 500),
        (1, 300, 17, 300),
        (3, 100, 600, 50),
        (5, 40, 40, 40),
    ];
    for s in shapes {
        for lay in [(false, false), (true, false), (false, true), (true, true)] {
            let one = strided_product(|x| x as f32, s, lay, 1);
            let one64 = strided_product(|x| x, s, lay, 1);
            for threads in [2, 3, 4] {
                assert!(
                    one == strided_product(|x| x as f32, s, lay, threads),
                    "f32 {s:?} {lay:?} with {threads} threads"
                );
                assert!(
                    one64 == strided_product(|x| x, s, lay, threads),
                    "f64 {s:?} {lay:?} with {threads} threads"
                );
            }
        }
    }
}

#[test]
fn random_shapes_do_not_depend_on_thread_count() {
    // Shapes around the kernel's path boundaries: sides near 64, outputs near 256 elements,
    // k on both sides of 512, vectors.
    let r = values(4 * 120, 99);
    let pick = |x: f64, hi: usize| 1 + ((x + 1.0) / 2.0 * hi as f64) as usize;
    for c in r.chunks(4) {
        let (n, m) = (pick(c[0], 300), pick(c[1], 300));
        let k = pick(c[2], 1400).max(16);
        let lay = (c[3] < 0.0, c[3].abs() < 0.5);
        let s = (1, n, k, m);
        let one = strided_product(|x| x as f32, s, lay, 1);
        assert!(
            one == strided_product(|x| x as f32, s, lay, 2),
            "f32 {s:?} {lay:?}"
        );
        let one = strided_product(|x| x, s, lay, 1);
        assert!(
            one == strided_product(|x| x, s, lay, 3),
            "f64 {s:?} {lay:?}"
        );
    }
}

#[test]
fn threshold_is_where_the_docs_say() {
    // 64^3 is the first cube at the threshold; it and a product just below must both be right.
    assert_eq!(PARALLEL_MIN_WORK, 64 * 64 * 64);
    for d in FLOATS {
        check_matmul(&tensor(&[63, 64], d, 1), &tensor(&[64, 64], d, 2));
        check_matmul(&tensor(&[64, 64], d, 3), &tensor(&[64, 64], d, 4));
    }
}

#[test]
fn thread_setting_does_not_change_tensor_results() {
    let a = tensor(&[150, 257], DType::Float32, 40);
    let b = tensor(&[257, 190], DType::Float32, 41)
        .t()
        .unwrap()
        .contiguous()
        .unwrap();
    let run = || a.matmul(&b.t().unwrap()).unwrap().to_vec::<f32>().unwrap();
    set_num_threads(1).unwrap();
    let one = run();
    set_num_threads(2).unwrap();
    let two = run();
    assert!(one == two);
}

#[test]
fn out_of_bounds_strides_are_errors() {
    let data = vec![1.0f64; 12];
    let ok = MatRef {
        data: &data,
        offset: 0,
        batch_strides: &[],
        row_stride: 4,
        col_stride: 1,
    };
    assert!(matmul_strided(
        &[],
        3,
        4,
        3,
        ok,
        MatRef {
            row_stride: 3,
            ..ok
        },
        1
    )
    .is_ok());
    let bad = MatRef { offset: 1, ..ok };
    assert!(matmul_strided(&[], 3, 4, 3, bad, ok, 1).is_err());
    let bad = MatRef {
        row_stride: usize::MAX / 2,
        ..ok
    };
    assert!(matmul_strided(&[], 3, 4, 3, bad, ok, 1).is_err());
    assert!(matmul_strided(&[2], 3, 4, 3, ok, ok, 1).is_err());
}

/// Gradients of sum((a @ b) * c) are c @ b^T and a^T @ c; compared with the naive products, and
/// an input that does not require grad gets none.
#[test]
fn backward_products_match_and_skip_what_is_not_needed() {
    for d in FLOATS {
        for &(n, k, m) in &[(3, 4, 5), (70, 130, 90), (1, 300, 2)] {
            for (ga_on, gb_on) in [(true, true), (true, false), (false, true)] {
                let a = tensor(&[n, k], d, 50).requires_grad_(ga_on).unwrap();
                let b = tensor(&[k, m], d, 51).requires_grad_(gb_on).unwrap();
                let c = tensor(&[n, m], d, 52);
                let loss = a.matmul(&b).unwrap().mul(&c).unwrap().sum().unwrap();
                loss.backward().unwrap();
                if ga_on {
                    assert_is_product(&a.grad().unwrap(), &c, &b.detach().t().unwrap(), d);
                } else {
                    assert!(a.grad().is_none());
                }
                if gb_on {
                    assert_is_product(&b.grad().unwrap(), &a.detach().t().unwrap(), &c, d);
                } else {
                    assert!(b.grad().is_none());
                }
            }
        }
    }
}

/// The gradient that `sum(x @ w)` gives a weight broadcast over x's batch: sum_t x_t^T @ 1.
#[test]
fn batched_mv_and_dot_backward_with_one_side_needing_grad() {
    let d = DType::Float64;
    let x = tensor(&[3, 4, 5], d, 60);
    let w = tensor(&[5, 6], d, 61).requires_grad_(true).unwrap();
    x.matmul(&w).unwrap().sum().unwrap().backward().unwrap();
    let xv = x.to_vec::<f64>().unwrap();
    let got = w.grad().unwrap().to_vec::<f64>().unwrap();
    assert_eq!(w.grad().unwrap().shape(), &[5, 6]);
    for p in 0..5 {
        let col: f64 = (0..3)
            .flat_map(|t| (0..4).map(move |i| (t, i)))
            .map(|(t, i)| xv[t * 20 + i * 5 + p])
            .sum();
        for j in 0..6 {
            assert!((got[p * 6 + j] - col).abs() < 1e-12);
        }
    }
    // mv: only the vector needs grad (m^T @ 1); dot: only the first operand (q).
    let m = tensor(&[4, 5], d, 62);
    let v = tensor(&[5], d, 63).requires_grad_(true).unwrap();
    m.mv(&v).unwrap().sum().unwrap().backward().unwrap();
    assert_is_product(
        &v.grad().unwrap(),
        &m.t().unwrap(),
        &Tensor::ones(&[4], d),
        d,
    );
    let p = tensor(&[5], d, 64).requires_grad_(true).unwrap();
    let q = tensor(&[5], d, 65);
    p.dot(&q).unwrap().backward().unwrap();
    assert_eq!(
        p.grad().unwrap().to_vec::<f64>().unwrap(),
        q.to_vec::<f64>().unwrap()
    );
}

/// d/da of sum((a @ b) * c) by central differences, for a transposed, batched, broadcast case.
#[test]
fn gradients_match_finite_differences() {
    let d = DType::Float64;
    let a0 = tensor(&[2, 5, 3], d, 80);
    let b = tensor(&[4, 5], d, 81).t().unwrap();
    let c = tensor(&[2, 4, 3], d, 82).transpose(1, 2).unwrap();
    let f = |a: &Tensor| a.matmul(&b).unwrap().mul(&c).unwrap().sum().unwrap();
    let a = a0.transpose(1, 2).unwrap().requires_grad_(true).unwrap();
    f(&a).backward().unwrap();
    let g = a.grad().unwrap().to_vec::<f64>().unwrap();
    let base = a0.transpose(1, 2).unwrap().contiguous().unwrap();
    let x = base.to_vec::<f64>().unwrap();
    let h = 1e-6;
    for i in 0..x.len() {
        let at = |delta: f64| {
            let mut y = x.clone();
            y[i] += delta;
            f(&Tensor::from_vec(y, base.shape()).unwrap())
                .item()
                .unwrap()
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        assert!((fd - g[i]).abs() < 1e-7, "element {i}: {fd} vs {}", g[i]);
    }
}

#[test]
fn double_backward_through_matmul() {
    // d/dw of sum((x @ w)^2) is 2 x^T x w; differentiating sum of that again w.r.t. w gives
    // 2 x^T x 1 summed appropriately. Compare create_graph against the closed form.
    let d = DType::Float64;
    let x = tensor(&[6, 4], d, 70);
    let w = tensor(&[4, 3], d, 71).requires_grad_(true).unwrap();
    let y = x.matmul(&w).unwrap();
    let loss = y.mul(&y).unwrap().sum().unwrap();
    let opts = GradOptions {
        create_graph: true,
        ..Default::default()
    };
    let g = autograd::grad(&[loss], std::slice::from_ref(&w), opts).unwrap()[0]
        .clone()
        .unwrap();
    let xtx = x.t().unwrap().matmul(&x).unwrap();
    let want = xtx.matmul(&w.detach()).unwrap().mul_scalar(2.0).unwrap();
    let gv = g.to_vec::<f64>().unwrap();
    for (a, b) in gv.iter().zip(want.to_vec::<f64>().unwrap()) {
        assert!((a - b).abs() < 1e-12);
    }
    let h = autograd::grad(
        &[g.sum().unwrap()],
        std::slice::from_ref(&w),
        GradOptions::default(),
    )
    .unwrap()[0]
        .clone()
        .unwrap();
    let want = xtx
        .matmul(&Tensor::ones(&[4, 3], d))
        .unwrap()
        .mul_scalar(2.0)
        .unwrap();
    for (a, b) in h
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .zip(want.to_vec::<f64>().unwrap())
    {
        assert!((a - b).abs() < 1e-12);
    }
}

#[test]
fn outputs_too_big_for_memory_are_errors() {
    let a = Tensor::ones(&[10_000_000, 1], DType::Float32);
    let b = Tensor::ones(&[1, 10_000_000], DType::Float32);
    let e = a.matmul(&b).unwrap_err().to_string();
    assert!(e.contains("can't allocate memory"), "{e}");
    // Below the pre-check's size, the kernel's own fallible reservation still reports overflow
    // of the element count instead of wrapping.
    let data = [1.0f32; 4];
    let one = MatRef {
        data: &data,
        offset: 0,
        batch_strides: &[0],
        row_stride: 1,
        col_stride: 1,
    };
    assert!(matmul_strided(&[usize::MAX / 2], 4, 1, 4, one, one, 1).is_err());
}
