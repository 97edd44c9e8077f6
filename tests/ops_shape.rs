//! Shape, indexing and linear-algebra ops through the crate API: forward values against closed
//! forms, gradients against float64 finite differences, second derivatives via create_graph.

mod common;
use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::Tensor;

fn vals(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| (i as f64 * 0.37).sin() + 0.1 * i as f64)
        .collect()
}

fn weighted(t: &Tensor) -> Tensor {
    let n = t.numel();
    let w = Tensor::from_vec(
        (0..n)
            .map(|i| 0.5 + (i as f64 * 0.7).cos())
            .collect::<Vec<_>>(),
        t.shape(),
    )
    .unwrap();
    t.mul(&w).unwrap().sum().unwrap()
}

/// Gradient of sum(w * op(x)) against finite differences.
fn check_grad(name: &str, shape: &[usize], op: impl Fn(&Tensor) -> Tensor) {
    let n: usize = shape.iter().product();
    let xs = vals(n);
    let x = leaf(&xs, shape);
    weighted(&op(&x)).backward().unwrap();
    let got = x.grad().unwrap().to_vec::<f64>().unwrap();
    let want = fd_grad(|t| weighted(&op(t)), &xs, shape);
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() < 1e-6 * (1.0 + w.abs()),
            "{name}: {got:?} vs {want:?}"
        );
    }
}

fn long(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

#[test]
fn flip_roll_repeat_values() {
    let x = Tensor::from_vec(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[2, 3]).unwrap();
    let f = x.flip(&[1]).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(f, vec![2.0, 1.0, 0.0, 5.0, 4.0, 3.0]);
    let r = x.roll(&[1], &[1]).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(r, vec![2.0, 0.0, 1.0, 5.0, 3.0, 4.0]);
    let r = x.roll(&[-1], &[]).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(r, vec![1.0, 2.0, 3.0, 4.0, 5.0, 0.0]);
    let t = x.repeat(&[1, 2]).unwrap();
    assert_eq!(t.shape(), &[2, 6]);
    assert_eq!(
        t.to_vec::<f64>().unwrap()[..6].to_vec(),
        vec![0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    );
    assert_eq!(x.tile(&[2]).unwrap().shape(), &[2, 6]);
}

#[test]
fn cat_stack_split_values_and_grads() {
    let a = Tensor::from_vec(vec![1.0, 2.0], &[1, 2]).unwrap();
    let b = Tensor::from_vec(vec![3.0, 4.0, 5.0, 6.0], &[2, 2]).unwrap();
    let c = Tensor::cat(&[a.clone(), b.clone()], 0).unwrap();
    assert_eq!(c.shape(), &[3, 2]);
    assert_eq!(
        c.to_vec::<f64>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    let s = Tensor::stack(&[a.clone(), a.clone()], 2).unwrap();
    assert_eq!(s.shape(), &[1, 2, 2]);
    assert_eq!(s.to_vec::<f64>().unwrap(), vec![1.0, 1.0, 2.0, 2.0]);
    check_grad("cat", &[2, 3], |x| {
        Tensor::cat(&[x.clone(), x.mul(x).unwrap()], 1).unwrap()
    });
    check_grad("stack", &[2, 3], |x| {
        Tensor::stack(&[x.clone(), x.exp().unwrap()], 1).unwrap()
    });
    check_grad("split", &[5, 2], |x| {
        let p = x.split(2, 0).unwrap();
        Tensor::cat(&[p[2].clone(), p[0].mul(&p[1]).unwrap()], 0).unwrap()
    });
    check_grad("unbind", &[3, 2], |x| {
        let p = x.unbind(0).unwrap();
        p[0].mul(&p[2]).unwrap()
    });
}

#[test]
fn multi_output_views_reject_inplace() {
    let x = leaf(&vals(4), &[4]).mul_scalar(1.0).unwrap();
    let parts = x.unbind(0).unwrap();
    let err = parts[1]
        .add_(&Tensor::scalar(1.0f64))
        .expect_err("in-place on an unbind output must fail")
        .to_string();
    assert!(err.contains("Output 1 of Unbind is a view"), "{err}");
    let parts = x.chunk(2, 0).unwrap();
    let err = parts[0]
        .mul_(&Tensor::scalar(2.0f64))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("Output 0 of Split is a view"), "{err}");
}

#[test]
fn gather_scatter_index_grads() {
    let idx = long(&[0, 2, 1, 1], &[2, 2]);
    check_grad("gather", &[2, 3], |x| x.gather(1, &idx).unwrap());
    check_grad("index_select", &[2, 3], |x| {
        x.index_select(1, &long(&[2, 2, 0], &[3])).unwrap()
    });
    check_grad("scatter_add", &[2, 3], |x| {
        x.scatter_add(1, &idx, &x.narrow(1, 0, 2).unwrap().exp().unwrap())
            .unwrap()
    });
    check_grad("index", &[3, 4], |x| {
        x.index(&[Some(long(&[2, 0, 2], &[3])), None]).unwrap()
    });
    check_grad("index_put", &[3, 4], |x| {
        let v = x.select(0, 0).unwrap().narrow(0, 0, 2).unwrap();
        x.index_put(
            &[Some(long(&[1, 2], &[2])), Some(long(&[3, 0], &[2]))],
            &v,
            false,
        )
        .unwrap()
    });
}

#[test]
fn index_values_follow_numpy_placement() {
    let x = Tensor::from_vec((0..24).map(|v| v as f64).collect::<Vec<_>>(), &[2, 3, 4]).unwrap();
    // separated advanced indices: broadcast dims first
    let r = x
        .index(&[Some(long(&[0, 1], &[2])), None, Some(long(&[3, 0], &[2]))])
        .unwrap();
    assert_eq!(r.shape(), &[2, 3]);
    assert_eq!(
        r.to_vec::<f64>().unwrap(),
        vec![3.0, 7.0, 11.0, 12.0, 16.0, 20.0]
    );
    // adjacent: in place
    let r = x
        .index(&[None, Some(long(&[2, 0], &[2])), Some(long(&[1, 1], &[2]))])
        .unwrap();
    assert_eq!(r.shape(), &[2, 2]);
    assert_eq!(r.to_vec::<f64>().unwrap(), vec![9.0, 1.0, 21.0, 13.0]);
    let bad = x
        .index(&[Some(long(&[2], &[1]))])
        .err()
        .unwrap()
        .to_string();
    assert!(
        bad.contains("index 2 is out of bounds for dimension 0 with size 2"),
        "{bad}"
    );
}

#[test]
fn linalg_values_and_grads() {
    let m = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    assert_eq!(m.trace().unwrap().item().unwrap(), 5.0);
    assert_eq!(
        m.tril(0).unwrap().to_vec::<f64>().unwrap(),
        vec![1.0, 0.0, 3.0, 4.0]
    );
    assert_eq!(
        m.triu(1).unwrap().to_vec::<f64>().unwrap(),
        vec![0.0, 2.0, 0.0, 0.0]
    );
    assert_eq!(m.diag(0).unwrap().to_vec::<f64>().unwrap(), vec![1.0, 4.0]);
    let v = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
    assert_eq!(
        v.diag(1).unwrap().to_vec::<f64>().unwrap(),
        vec![0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0]
    );
    let e = Tensor::einsum("ij,jk->ik", &[m.clone(), m.clone()]).unwrap();
    assert_close(
        &e.to_vec::<f64>().unwrap(),
        &m.matmul(&m).unwrap().to_vec::<f64>().unwrap(),
        1e-12,
    );
    check_grad("einsum_bilinear", &[2, 3], |x| {
        let w = x.t().unwrap().matmul(x).unwrap();
        let w = w.unsqueeze(0).unwrap().expand(&[2, 3, 3]).unwrap();
        Tensor::einsum("bn,anm,bm->ba", &[x.clone(), w, x.clone()]).unwrap()
    });
    check_grad("einsum_trace", &[3, 3], |x| {
        Tensor::einsum("ii", std::slice::from_ref(x)).unwrap()
    });
    check_grad("tril", &[3, 3], |x| x.mul(x).unwrap().tril(-1).unwrap());
    check_grad("bmm", &[2, 2, 2], |x| x.bmm(&x.exp().unwrap()).unwrap());
    let err = m.bmm(&m).err().unwrap().to_string();
    assert!(err.contains("batch1 must be a 3D tensor"), "{err}");
}

#[test]
fn second_derivative_through_gather_and_flip() {
    // f(x) = sum(gather(x)^2 * flip(x)) has a non-zero, x-dependent Hessian.
    let xs = vals(6);
    let idx = long(&[2, 0, 1, 1], &[2, 2]);
    let x = leaf(&xs, &[2, 3]);
    let f = |t: &Tensor| -> Tensor {
        let g = t.gather(1, &idx).unwrap();
        let fl = t.flip(&[0, 1]).unwrap().narrow(1, 0, 2).unwrap();
        g.mul(&g).unwrap().mul(&fl).unwrap().sum().unwrap()
    };
    let y = f(&x);
    let g = autograd::grad(
        &[y],
        std::slice::from_ref(&x),
        GradOptions {
            create_graph: true,
            ..Default::default()
        },
    )
    .unwrap()
    .remove(0)
    .unwrap();
    let s = g.sum().unwrap();
    s.backward().unwrap();
    let got = x.grad().unwrap().to_vec::<f64>().unwrap();
    // finite differences of sum(grad f)
    let want = fd_grad(
        |t| {
            let t = t.detach().requires_grad_(true).unwrap();
            let y = f(&t);
            let g = autograd::grad(&[y], std::slice::from_ref(&t), GradOptions::default())
                .unwrap()
                .remove(0)
                .unwrap();
            g.sum().unwrap()
        },
        &xs,
        &[2, 3],
    );
    assert_close(&got, &want, 1e-5);
}

#[test]
fn narrow_checks_start_and_length_like_torch() {
    use ferrograd::ErrorKind;
    let x = Tensor::from_vec(vals(12), &[3, 4]).unwrap();
    let e = x.narrow(0, 4, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Index);
    assert_eq!(
        e.message(),
        "start out of range (expected to be in range of [-3, 3], but got 4)"
    );
    let e = x.narrow(1, -1, 2).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert_eq!(
        e.message(),
        "start (3) + length (2) exceeds dimension size (4)."
    );
    let e = x.narrow(0, 0, usize::MAX).unwrap_err();
    assert!(e.message().contains("exceeds dimension size (3)"), "{e:?}");
    let e = x.sum().unwrap().narrow(0, 0, 0).unwrap_err();
    assert_eq!(e.message(), "narrow() cannot be applied to a 0-dim tensor.");
    // start == size is an empty view; a negative start counts from the end
    assert_eq!(x.narrow(0, 3, 0).unwrap().shape(), &[0, 4]);
    assert_eq!(
        x.narrow(1, -2, 2).unwrap().to_vec::<f64>().unwrap(),
        x.slice(1, Some(2), None, 1)
            .unwrap()
            .contiguous()
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    );
}

#[test]
fn repeat_reports_the_negative_target_size() {
    let x = Tensor::from_vec(vals(12), &[3, 4]).unwrap();
    let e = x.repeat(&[2, -1, 1]).unwrap_err();
    assert_eq!(
        e.message(),
        "Trying to create tensor with negative dimension -3: [2, -3, 4]"
    );
    let e = x.tile(&[-2]).unwrap_err();
    assert_eq!(
        e.message(),
        "Trying to create tensor with negative dimension -8: [3, -8]"
    );
    let empty = Tensor::from_vec(Vec::<f64>::new(), &[0, 2]).unwrap();
    assert_eq!(empty.repeat(&[-1, 2]).unwrap().shape(), &[0, 4]);
}

/// Copies of strided views (permuted, sliced with steps, expanded) against each element read by
/// its coordinates: the strided gather behind `contiguous()` merges dims and copies runs.
#[test]
fn strided_copies_match_elementwise_reads() {
    let shape = [3usize, 4, 5, 6];
    let n: usize = shape.iter().product();
    let x = Tensor::from_vec((0..n).map(|i| i as f64).collect::<Vec<_>>(), &shape).unwrap();
    let at = |c: [usize; 4]| (((c[0] * 4 + c[1]) * 5 + c[2]) * 6 + c[3]) as f64;
    // permuted (0, 2, 1, 3): last dim still unit-stride
    let p = x.permute(&[0, 2, 1, 3]).unwrap();
    let mut want = vec![];
    for a in 0..3 {
        for c in 0..5 {
            for b in 0..4 {
                for d in 0..6 {
                    want.push(at([a, b, c, d]));
                }
            }
        }
    }
    assert_eq!(p.contiguous().unwrap().to_vec::<f64>().unwrap(), want);
    // fully reversed dims: no unit-stride run
    let r = x.permute(&[3, 2, 1, 0]).unwrap();
    let mut want = vec![];
    for d in 0..6 {
        for c in 0..5 {
            for b in 0..4 {
                for a in 0..3 {
                    want.push(at([a, b, c, d]));
                }
            }
        }
    }
    assert_eq!(r.to_vec::<f64>().unwrap(), want);
    // a stepped slice of a narrowed view, then an expanded size-1 dim
    let s = x
        .narrow(1, 1, 3)
        .unwrap()
        .slice(3, Some(1), Some(6), 2)
        .unwrap();
    let mut want = vec![];
    for a in 0..3 {
        for b in 1..4 {
            for c in 0..5 {
                for d in (1..6).step_by(2) {
                    want.push(at([a, b, c, d]));
                }
            }
        }
    }
    assert_eq!(s.to_vec::<f64>().unwrap(), want);
    let e = x.narrow(0, 2, 1).unwrap().expand(&[2, 4, 5, 6]).unwrap();
    let v = e.to_vec::<f64>().unwrap();
    assert_eq!(v.len(), 240);
    assert_eq!(v[..120], v[120..]);
    assert_eq!(v[0], at([2, 0, 0, 0]));
}
