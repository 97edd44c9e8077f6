//! Sorting, selection and counting through the crate API (`src/ops/sort.rs`): values and
//! indices against sorting by hand with `std`, gradients against float64 finite differences,
//! second derivatives through `create_graph`, and the errors for bad input.

mod common;
use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::sort::Interpolation;
use ferrograd::{DType, ErrorKind, Tensor};

/// Distinct values (no ties), in no particular order.
fn vals(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| (i as f64 * 1.37).sin() * 3.0 + 0.01 * i as f64)
        .collect()
}

fn weighted(t: &Tensor) -> Tensor {
    let n = t.numel();
    let w: Vec<f64> = (0..n).map(|i| 0.5 + (i as f64 * 0.7).cos()).collect();
    let w = Tensor::from_vec(w, t.shape()).unwrap();
    t.mul(&w).unwrap().sum().unwrap()
}

/// `sum(w * op(x)^2)`: the square makes the gradient depend on `x`, so its derivative (through
/// create_graph) is not trivially zero.
fn loss(op: &impl Fn(&Tensor) -> Tensor, t: &Tensor) -> Tensor {
    let y = op(t);
    weighted(&y.mul(&y).unwrap())
}

/// The gradient of [`loss`], with create_graph, as a function of `x`.
fn grad_of(op: &impl Fn(&Tensor) -> Tensor, x: &Tensor, create_graph: bool) -> Tensor {
    let opts = GradOptions {
        create_graph,
        ..Default::default()
    };
    autograd::grad(&[loss(op, x)], std::slice::from_ref(x), opts)
        .unwrap()
        .remove(0)
        .unwrap()
}

/// The gradient against finite differences of the loss, then the gradient of the gradient's
/// sum (backward through the backward) against finite differences of that sum.
fn check_grads(name: &str, shape: &[usize], op: impl Fn(&Tensor) -> Tensor) {
    let n: usize = shape.iter().product();
    let xs = vals(n);
    let x = leaf(&xs, shape);
    let g = grad_of(&op, &x, true);
    let want = fd_grad(|t| loss(&op, t), &xs, shape);
    assert_close(&g.to_vec::<f64>().unwrap(), &want, 1e-6);
    g.sum().unwrap().backward().unwrap();
    let got = x.grad().unwrap().to_vec::<f64>().unwrap();
    let want = fd_grad(
        |t| {
            let t = t.detach().requires_grad_(true).unwrap();
            grad_of(&op, &t, false).sum().unwrap()
        },
        &xs,
        shape,
    );
    assert!(
        got.iter().any(|v| v.abs() > 1e-3),
        "{name}: zero second derivative"
    );
    assert_close(&got, &want, 1e-5);
}

/// Row `r` of a row-major `[rows, n]` vector.
fn row(v: &[f64], r: usize, n: usize) -> Vec<f64> {
    v[r * n..(r + 1) * n].to_vec()
}

#[test]
fn sort_matches_std_sort_with_indices() {
    let xs = vals(12);
    let x = Tensor::from_vec(xs.clone(), &[3, 4]).unwrap();
    for descending in [false, true] {
        let (v, i) = x.sort(1, descending, None).unwrap();
        let (v, i) = (v.to_vec::<f64>().unwrap(), i.to_vec::<i64>().unwrap());
        for r in 0..3 {
            let mut want = row(&xs, r, 4);
            want.sort_by(|a, b| a.partial_cmp(b).unwrap());
            if descending {
                want.reverse();
            }
            assert_eq!(row(&v, r, 4), want);
            for k in 0..4 {
                assert_eq!(xs[r * 4 + i[r * 4 + k] as usize], want[k]);
            }
        }
    }
    assert!(x.sort(1, false, None).unwrap().0.grad_fn().is_none());
    let l = leaf(&xs, &[3, 4]);
    let node = l.sort(0, false, Some(true)).unwrap().0.grad_fn().unwrap();
    assert_eq!(node.name(), "SortBackward1");
}

#[test]
fn sort_is_stable_and_puts_nan_last() {
    let x = Tensor::from_vec(vec![2.0, f64::NAN, 1.0, 2.0, 1.0, f64::NAN], &[6]).unwrap();
    let (v, i) = x.sort(0, false, Some(true)).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![2, 4, 0, 3, 1, 5]);
    let v = v.to_vec::<f64>().unwrap();
    assert_eq!(&v[..4], &[1.0, 1.0, 2.0, 2.0]);
    assert!(v[4].is_nan() && v[5].is_nan());
    let (_, i) = x.sort(0, true, Some(true)).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 5, 0, 3, 2, 4]);
}

#[test]
fn topk_kthvalue_median_mode_pick_the_right_elements() {
    let xs = vals(10);
    let x = Tensor::from_vec(xs.clone(), &[10]).unwrap();
    let mut sorted = xs.clone();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (v, _) = x.topk(3, 0, true, true).unwrap();
    assert_eq!(
        v.to_vec::<f64>().unwrap(),
        vec![sorted[9], sorted[8], sorted[7]]
    );
    let (v, i) = x.kthvalue(4, 0, false).unwrap();
    assert_eq!(v.item().unwrap(), sorted[3]);
    assert_eq!(xs[i.to_vec::<i64>().unwrap()[0] as usize], sorted[3]);
    assert_eq!(x.median_all(false).unwrap().item().unwrap(), sorted[4]);
    let m = Tensor::from_vec(vec![3i64, 1, 3, 2, 1, 5], &[6]).unwrap();
    let (v, i) = m.mode(0, false).unwrap();
    assert_eq!(v.to_vec::<i64>().unwrap(), vec![1]);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![4]);
}

#[test]
fn cummax_follows_the_latest_record() {
    let x = Tensor::from_vec(vec![1.0, 3.0, 2.0, 3.0, 5.0], &[5]).unwrap();
    let (v, i) = x.cummax(0).unwrap();
    assert_eq!(v.to_vec::<f64>().unwrap(), vec![1.0, 3.0, 3.0, 3.0, 5.0]);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 1, 3, 4]);
    let (v, i) = x.cummin(0).unwrap();
    assert_eq!(v.to_vec::<f64>().unwrap(), vec![1.0; 5]);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0; 5]);
}

#[test]
fn quantile_interpolates_between_order_statistics() {
    let xs = vals(9);
    let x = Tensor::from_vec(xs.clone(), &[9]).unwrap();
    let mut s = xs.clone();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    // q = 0.3 over 9 points: rank 2.4 between s[2] and s[3].
    let want = [
        (Interpolation::Linear, s[2] + 0.4 * (s[3] - s[2])),
        (Interpolation::Lower, s[2]),
        (Interpolation::Higher, s[3]),
        (Interpolation::Midpoint, 0.5 * (s[2] + s[3])),
        (Interpolation::Nearest, s[2]),
    ];
    for (m, w) in want {
        let q = x.quantile_scalar(0.3, None, false, m, false).unwrap();
        assert_close(&[q.item().unwrap()], &[w], 1e-12);
    }
    assert_eq!(
        Interpolation::parse("bogus").unwrap_err().kind(),
        ErrorKind::Runtime
    );
}

#[test]
fn unique_searchsorted_bincount_histc_count() {
    let x = Tensor::from_vec(vec![3i64, 1, 3, 2, 1], &[5]).unwrap();
    let (v, inv, c) = x.unique(None).unwrap();
    assert_eq!(v.to_vec::<i64>().unwrap(), vec![1, 2, 3]);
    assert_eq!(inv.to_vec::<i64>().unwrap(), vec![2, 0, 2, 1, 0]);
    assert_eq!(c.to_vec::<i64>().unwrap(), vec![2, 1, 2]);
    let (v, _, c) = x.unique_consecutive(None).unwrap();
    assert_eq!(v.to_vec::<i64>().unwrap(), vec![3, 1, 3, 2, 1]);
    assert_eq!(c.to_vec::<i64>().unwrap(), vec![1; 5]);
    let seq = Tensor::from_vec(vec![1.0, 2.0, 2.0, 4.0], &[4]).unwrap();
    let q = Tensor::from_vec(vec![0.0, 2.0, 3.0, 9.0], &[4]).unwrap();
    let left = seq.searchsorted(&q, false, None).unwrap();
    let right = seq.searchsorted(&q, true, None).unwrap();
    assert_eq!(left.to_vec::<i64>().unwrap(), vec![0, 1, 3, 4]);
    assert_eq!(right.to_vec::<i64>().unwrap(), vec![0, 3, 3, 4]);
    assert_eq!(
        q.bucketize(&seq, false).unwrap().to_vec::<i64>().unwrap(),
        vec![0, 1, 3, 4]
    );
    let b = x.bincount(None, 6).unwrap();
    assert_eq!(b.to_vec::<i64>().unwrap(), vec![0, 2, 1, 2, 0, 0]);
    let h = seq.histc(3, 1.0, 4.0).unwrap();
    assert_eq!(h.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 1.0]);
    let z = Tensor::from_vec(vec![0.0, 1.0, 0.0, 2.0, 3.0, 0.0], &[2, 3]).unwrap();
    assert_eq!(
        z.count_nonzero(&[1]).unwrap().to_vec::<i64>().unwrap(),
        vec![1, 2]
    );
    assert_eq!(z.argwhere().unwrap().shape(), &[3, 2]);
}

#[test]
fn gradients_scatter_back_and_are_twice_differentiable() {
    check_grads("sort", &[3, 4], |t| t.sort(1, true, None).unwrap().0);
    check_grads("msort", &[3, 4], |t| t.msort().unwrap());
    check_grads("topk", &[3, 4], |t| t.topk(2, 0, false, true).unwrap().0);
    check_grads("kthvalue", &[3, 4], |t| t.kthvalue(2, 1, true).unwrap().0);
    check_grads("median_dim", &[3, 5], |t| {
        t.median_dim(1, false, false).unwrap().0
    });
    check_grads("nanmedian_all", &[3, 5], |t| t.median_all(true).unwrap());
    check_grads("cummax", &[3, 4], |t| t.cummax(1).unwrap().0);
    check_grads("cummin", &[3, 4], |t| t.cummin(0).unwrap().0);
    let q = Tensor::from_vec(vec![0.2, 0.7], &[2]).unwrap();
    check_grads("quantile", &[3, 5], |t| {
        t.quantile(&q, Some(1), false, Interpolation::Linear, false)
            .unwrap()
    });
}

#[test]
fn bad_input_gives_errors_not_panics() {
    let x = Tensor::from_vec(vals(6), &[2, 3]).unwrap();
    assert_eq!(
        x.topk(4, 1, true, true).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(
        x.kthvalue(0, 1, false).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(x.sort(2, false, None).unwrap_err().kind(), ErrorKind::Index);
    let e = Tensor::zeros(&[2, 0], DType::Float64);
    assert_eq!(e.mode(1, false).unwrap_err().kind(), ErrorKind::Index);
    let bad = Tensor::from_vec(vec![1i64, -1], &[2]).unwrap();
    assert_eq!(
        bad.bincount(None, 0).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(
        x.quantile_scalar(1.5, None, false, Interpolation::Linear, false)
            .unwrap_err()
            .kind(),
        ErrorKind::Runtime
    );
    let rows = Tensor::from_vec(vals(6), &[3, 2]).unwrap();
    assert_eq!(
        x.searchsorted(&rows, false, None).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(x.histc(0, 0.0, 0.0).unwrap_err().kind(), ErrorKind::Runtime);
}
