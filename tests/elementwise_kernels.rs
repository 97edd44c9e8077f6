//! The vectorised elementwise kernels against independent truths: float64 std math for the
//! float32 functions (ulp bounds), plain loops for the generic kernels, a fixed summation order
//! for sums at any thread count, and the composite backward rules for the fused ones.

mod common;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::kernels::vmath::UnaryF32;
use ferrograd::{DType, Tensor};

/// Distance from `got` to the exact value `want` in float32 ulps at `want` (denormal spacing
/// below the normal range). Equal infinities and NaN-for-NaN are 0.
fn ulp_error(got: f32, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if want.is_infinite() || got.is_infinite() {
        let w = want as f32;
        return if got == w { 0.0 } else { f64::INFINITY };
    }
    let a = want.abs().max(f32::MIN_POSITIVE as f64);
    let ulp = 2f64.powi(a.log2().floor() as i32 - 23);
    let ulp = ulp.max(2f64.powi(-149));
    ((got as f64) - want).abs() / ulp
}

/// Worst ulp error of `f` over `xs` (and the worst input).
fn worst(f: UnaryF32, xs: &[f32]) -> (f64, f32) {
    let mut out = vec![0f32; xs.len()];
    f.apply(xs, &mut out);
    let mut w = (0.0, 0.0);
    for (&x, &y) in xs.iter().zip(&out) {
        let e = ulp_error(y, f.f64(x as f64));
        if e > w.0 || e.is_nan() {
            w = (e, x);
        }
    }
    w
}

/// Every `step`-th float32 bit pattern (both signs), plus special values.
fn sweep(step: u32) -> Vec<f32> {
    let mut v: Vec<f32> = (0..=u32::MAX / step)
        .map(|i| f32::from_bits(i.wrapping_mul(step)))
        .collect();
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::MAX,
        f32::MIN,
        1.0,
        -1.0,
        88.72,
        88.73,
        -87.34,
        -103.9,
        -104.0,
        std::f32::consts::PI,
        std::f32::consts::FRAC_PI_2,
        1e-8,
        -1e-8,
        9.0,
        -9.0,
        105414350.0,
        421657400.0,
        421657430.0,
    ]);
    v
}

#[test]
fn vector_math_within_one_ulp_over_a_dense_sweep() {
    let xs = sweep(61);
    for f in UnaryF32::ALL {
        let (e, x) = worst(f, &xs);
        assert!(e <= 1.0, "{f:?}: {e} ulp at {x:e} ({:#x})", x.to_bits());
    }
}

#[test]
fn vector_math_dense_near_zero_and_one() {
    // Every float in [0.5, 2) and in [-2^-10, 2^-10] (log near 1, tanh/sin near 0 cancel most).
    let mut xs: Vec<f32> = (0x3f00_0000u32..0x4000_0000)
        .step_by(7)
        .map(f32::from_bits)
        .collect();
    xs.extend(
        (0x3000_0000u32..0x3a80_0000)
            .step_by(11)
            .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)]),
    );
    for f in UnaryF32::ALL {
        let (e, x) = worst(f, &xs);
        assert!(e <= 1.0, "{f:?}: {e} ulp at {x:e}");
    }
}

#[test]
fn vector_math_special_values_match_std() {
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        -1.0,
    ];
    let std: [fn(f32) -> f32; 6] = [f32::exp, f32::ln, f32::sin, f32::cos, f32::tanh, |x| {
        1.0 / (1.0 + (-x).exp())
    }];
    for (f, s) in UnaryF32::ALL.into_iter().zip(std) {
        let mut out = [0f32; 11];
        f.apply(&specials, &mut out);
        for (&x, &y) in specials.iter().zip(&out) {
            let want = s(x);
            let same = (want.is_nan() && y.is_nan())
                || (want == y && want.is_sign_negative() == y.is_sign_negative())
                || ulp_error(y, want as f64) <= 1.0;
            assert!(same, "{f:?}({x:e}) = {y:e}, std gives {want:e}");
        }
    }
}

#[test]
fn vector_math_any_length_and_alignment() {
    for n in [0usize, 1, 7, 17, 513, 1000003] {
        let xs: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 30.0).collect();
        for f in UnaryF32::ALL {
            for off in [0usize, 1] {
                if off > n {
                    continue;
                }
                let x = &xs[off..];
                let mut out = vec![f32::NAN; x.len()];
                f.apply(x, &mut out);
                for (&a, &b) in x.iter().zip(&out) {
                    assert!(ulp_error(b, f.f64(a as f64)) <= 2.0, "{f:?} n={n} x={a}");
                }
            }
        }
    }
}

/// Exhaustive check over all 2^32 inputs: `cargo test --release -- --ignored exhaustive`.
#[test]
#[ignore]
fn vector_math_exhaustive() {
    for f in UnaryF32::ALL {
        let mut worst_e = (0.0, 0.0f32);
        let mut xs = vec![0f32; 1 << 20];
        for hi in 0..(1u32 << 12) {
            for (i, x) in xs.iter_mut().enumerate() {
                *x = f32::from_bits((hi << 20) | i as u32);
            }
            let (e, x) = worst(f, &xs);
            if e > worst_e.0 {
                worst_e = (e, x);
            }
        }
        println!("{f:?}: worst {} ulp at {:e}", worst_e.0, worst_e.1);
        assert!(worst_e.0 <= 2.0);
    }
}

// ----- wired ops: forward, fused backward, double backward -----------------------------------

type Op = (&'static str, fn(&Tensor) -> Tensor);

/// The six functions with a vectorised forward and a fused backward.
const OPS: [Op; 6] = [
    ("exp", |x| x.exp().unwrap()),
    ("log", |x| x.log().unwrap()),
    ("sin", |x| x.sin().unwrap()),
    ("cos", |x| x.cos().unwrap()),
    ("tanh", |x| x.tanh().unwrap()),
    ("sigmoid", |x| x.sigmoid().unwrap()),
];

/// Positive points (log's domain), not all distinct gradients of one sign.
const XS: [f64; 6] = [0.3, 1.7, 0.05, 2.9, 0.8, 4.2];
/// Weights so the incoming gradient differs per element.
const WS: [f64; 6] = [1.0, -0.5, 2.0, 0.25, -3.0, 1.5];

fn weights() -> Tensor {
    Tensor::from_vec(WS.to_vec(), &[6]).unwrap()
}

#[test]
fn fused_backward_matches_finite_differences_in_f64() {
    for (name, op) in OPS {
        let f = |x: &Tensor| op(x).mul(&weights()).unwrap().sum().unwrap();
        let x = leaf(&XS, &[6]);
        f(&x).backward().unwrap();
        let got = x.grad().unwrap().to_vec::<f64>().unwrap();
        let want = fd_grad(f, &XS, &[6]);
        assert_close(&got, &want, 1e-6);
        assert!(
            x.grad().unwrap().grad_fn().is_none(),
            "{name}: plain backward built a graph"
        );
    }
}

/// Gradient of `sum(op(x) * w)` with respect to `x`, with or without a graph of it.
fn grad_of(op: fn(&Tensor) -> Tensor, x: &Tensor, w: &Tensor, create_graph: bool) -> Tensor {
    let y = op(x).mul(w).unwrap().sum().unwrap();
    let opts = GradOptions {
        create_graph,
        ..Default::default()
    };
    autograd::grad(&[y], std::slice::from_ref(x), opts).unwrap()[0]
        .clone()
        .unwrap()
}

#[test]
fn fused_backward_equals_composite_rule_in_f32() {
    // The fused kernels do the composite rule's float32 operations in the same order, so the
    // two agree exactly; 300K elements take the parallel path.
    for n in [16usize, 1000, 300_000] {
        let xv: Vec<f32> = (0..n)
            .map(|i| 0.05 + (i as f32 * 0.618).fract() * 3.0)
            .collect();
        let wv: Vec<f32> = (0..n).map(|i| ((i * 7919) % 13) as f32 - 6.0).collect();
        let x = Tensor::from_vec(xv, &[n])
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let w = Tensor::from_vec(wv, &[n]).unwrap();
        for (name, op) in OPS {
            let fused = grad_of(op, &x, &w, false);
            let composite = grad_of(op, &x, &w, true);
            assert!(
                composite.requires_grad(),
                "{name}: create_graph gave no graph"
            );
            let (a, b) = (
                fused.to_vec::<f32>().unwrap(),
                composite.to_vec::<f32>().unwrap(),
            );
            assert_eq!(a, b, "{name} n={n}: fused and composite rules differ");
        }
    }
}

#[test]
fn double_backward_through_fused_ops_matches_finite_differences() {
    // h(x) = sum(v * d/dx sum(op(x) * w)): its gradient needs the backward's own graph.
    let v = Tensor::from_vec(vec![0.7, -1.1, 0.4, 2.0, -0.3, 1.2], &[6]).unwrap();
    let chains: [Op; 4] = [
        ("tanh", |x| x.tanh().unwrap()),
        ("sin", |x| x.sin().unwrap()),
        ("exp", |x| x.exp().unwrap()),
        ("tanh(sin(exp))", |x| {
            x.exp().unwrap().sin().unwrap().tanh().unwrap()
        }),
    ];
    for (_name, op) in chains {
        let h = |x: &Tensor, create_graph: bool| {
            let x = if create_graph {
                x.clone()
            } else {
                x.detach().requires_grad_(true).unwrap()
            };
            grad_of(op, &x, &weights(), create_graph)
                .mul(&v)
                .unwrap()
                .sum()
                .unwrap()
        };
        let x = leaf(&XS, &[6]);
        h(&x, true).backward().unwrap();
        let got = x.grad().unwrap().to_vec::<f64>().unwrap();
        let want = fd_grad(|x| h(x, false), &XS, &[6]);
        assert_close(&got, &want, 1e-5);
    }
}

#[test]
fn forward_matches_scalar_std_on_strided_integer_and_f64_inputs() {
    // A transposed (strided) float32 input goes through one contiguous copy.
    let m: Vec<f32> = (0..12).map(|i| i as f32 * 0.37 - 2.0).collect();
    let t = Tensor::from_vec(m.clone(), &[3, 4]).unwrap().t().unwrap();
    let got = t.exp().unwrap().to_vec::<f32>().unwrap();
    let want: Vec<f32> = (0..4)
        .flat_map(|j| (0..3).map(move |i| (j, i)))
        .map(|(j, i)| m[i * 4 + j].exp())
        .collect();
    for (g, w) in got.iter().zip(&want) {
        assert!(ulp_error(*g, *w as f64) <= 2.0, "{g} vs {w}");
    }
    // Integers become float32; float64 stays float64 and uses std.
    let i = Tensor::from_vec(vec![0i64, 1, 2], &[3]).unwrap();
    assert_eq!(i.sin().unwrap().dtype(), DType::Float32);
    let d = Tensor::from_vec(vec![0.5f64, -1.0], &[2]).unwrap();
    assert_eq!(
        d.tanh().unwrap().to_vec::<f64>().unwrap(),
        vec![0.5f64.tanh(), (-1f64).tanh()]
    );
}

// ----- generic kernels: broadcast operands, parallel chunks, sums ------------------------------

#[test]
fn zip_fast_paths_match_plain_loops() {
    for n in [5usize, 300_000] {
        let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).sin()).collect();
        let b: Vec<f32> = (0..n).map(|i| (i % 17) as f32 - 8.0).collect();
        let ta = Tensor::from_vec(a.clone(), &[n]).unwrap();
        let tb = Tensor::from_vec(b.clone(), &[n]).unwrap();
        // Same shape, contiguous.
        let got = ta.mul(&tb).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(
            got,
            a.iter().zip(&b).map(|(x, y)| x * y).collect::<Vec<_>>()
        );
        // One value expanded to the full shape (sum's gradient), on either side.
        let e = Tensor::from_vec(vec![2.5f32], &[1])
            .unwrap()
            .expand(&[n])
            .unwrap();
        let got = e.sub(&ta).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(got, a.iter().map(|x| 2.5 - x).collect::<Vec<_>>());
        let got = ta.div(&e).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(got, a.iter().map(|x| x / 2.5).collect::<Vec<_>>());
        // A number.
        let got = ta.mul_scalar(3.0).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(got, a.iter().map(|x| x * 3.0).collect::<Vec<_>>());
        // Both uniform: every element the same.
        let got = e.add(&e).unwrap().to_vec::<f32>().unwrap();
        assert!(got.len() == n && got.iter().all(|&v| v == 5.0));
    }
    // Strided and row-broadcast operands take the general path.
    let m = Tensor::from_vec((0..6).map(|i| i as f32).collect(), &[2, 3]).unwrap();
    let row = Tensor::from_vec(vec![10f32, 20.0, 30.0], &[3]).unwrap();
    let got = m.add(&row).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got, vec![10.0, 21.0, 32.0, 13.0, 24.0, 35.0]);
    let got = m
        .t()
        .unwrap()
        .mul_scalar(2.0)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(got, vec![0.0, 6.0, 2.0, 8.0, 4.0, 10.0]);
}

#[test]
fn sum_is_accurate_and_independent_of_thread_count() {
    let n = 3_000_001;
    let v: Vec<f32> = (0..n)
        .map(|i| ((i as f64 * 0.754_877_666).fract() as f32 - 0.3) * 1e3)
        .collect();
    let exact: f64 = v.iter().map(|&x| x as f64).sum();
    let abs: f64 = v.iter().map(|&x| (x as f64).abs()).sum();
    let t = Tensor::from_vec(v.clone(), &[n]).unwrap();
    let before = autograd::get_num_threads();
    let mut sums = Vec::new();
    for threads in [1, 2, 3] {
        autograd::set_num_threads(threads).unwrap();
        sums.push(t.sum().unwrap().item().unwrap());
    }
    autograd::set_num_threads(before).unwrap();
    assert!(sums.iter().all(|&s| s == sums[0]), "{sums:?}");
    // Pairwise summation: error ~ eps * log2(n) * sum|x|, far below a running sum's eps * n.
    let bound = f32::EPSILON as f64 * (n as f64).log2() * abs;
    assert!(
        (sums[0] - exact).abs() <= bound,
        "sum {} vs exact {exact} (bound {bound})",
        sums[0]
    );
    let naive = v.iter().fold(0f32, |a, &x| a + x) as f64;
    assert!((sums[0] - exact).abs() <= (naive - exact).abs().max(1.0));
}
