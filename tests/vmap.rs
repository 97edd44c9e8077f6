//! `ferrograd::autograd::vmap` against explicit loops over the samples.

use ferrograd::autograd::{grad, vmap, GradOptions};
use ferrograd::{Result, Tensor};

fn rand(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    // a small LCG: deterministic values in [-1, 1)
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let v = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn close(a: &Tensor, b: &Tensor) {
    assert_eq!(a.shape(), b.shape());
    for (x, y) in a
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .zip(b.to_vec::<f64>().unwrap())
    {
        assert!((x - y).abs() < 1e-12, "{x} vs {y}");
    }
}

/// tanh(W x + b) · v, one sample x at a time.
fn layer(w: &Tensor, b: &Tensor, v: &Tensor, x: &Tensor) -> Result<Tensor> {
    w.matmul(x)?.add(b)?.tanh()?.dot(v)
}

#[test]
fn vmap_matches_a_loop_and_leaves_no_level_open() {
    let (w, b, v, xs) = (
        rand(&[4, 3], 1),
        rand(&[4], 2),
        rand(&[4], 3),
        rand(&[3, 5], 4),
    );
    let got = vmap(std::slice::from_ref(&xs), &[Some(1)], |a| {
        Ok(vec![layer(&w, &b, &v, &a[0])?])
    })
    .unwrap();
    let want: Vec<Tensor> = (0..5)
        .map(|i| layer(&w, &b, &v, &xs.select(1, i).unwrap()).unwrap())
        .collect();
    close(&got[0], &Tensor::stack(&want, 0).unwrap());
    assert!(ferrograd::tensor::batched::current_level().is_none());
}

#[test]
fn gradients_flow_through_vmap_and_per_sample_gradients_inside() {
    let (w, b, v, xs) = (
        rand(&[4, 3], 5),
        rand(&[4], 6),
        rand(&[4], 7),
        rand(&[6, 3], 8),
    );
    let w = w.requires_grad_(true).unwrap();
    let out = vmap(std::slice::from_ref(&xs), &[Some(0)], |a| {
        Ok(vec![layer(&w, &b, &v, &a[0])?])
    })
    .unwrap();
    let total = out[0].sum().unwrap();
    let gw = grad(&[total], std::slice::from_ref(&w), GradOptions::default()).unwrap()[0]
        .clone()
        .unwrap();
    // the same sum computed on the whole batch at once
    let direct = w
        .matmul(&xs.t().unwrap())
        .unwrap()
        .t()
        .unwrap()
        .add(&b)
        .unwrap()
        .tanh()
        .unwrap();
    let direct = direct.matmul(&v).unwrap().sum().unwrap();
    let want = grad(&[direct], std::slice::from_ref(&w), GradOptions::default()).unwrap()[0]
        .clone()
        .unwrap();
    close(&gw, &want);

    // per-sample gradients with respect to the (shared) weight
    let shared = w.detach().unsqueeze(0).unwrap().expand(&[6, 4, 3]).unwrap();
    let per = vmap(&[shared, xs.clone()], &[Some(0), Some(0)], |a| {
        let wi = a[0].detach().requires_grad_(true)?;
        let g = grad(&[layer(&wi, &b, &v, &a[1])?], &[wi], GradOptions::default())?;
        Ok(vec![g[0].clone().expect("used")])
    })
    .unwrap();
    for i in 0..6 {
        let wi = w.detach().requires_grad_(true).unwrap();
        let l = layer(&wi, &b, &v, &xs.select(0, i as i64).unwrap()).unwrap();
        let g = grad(&[l], &[wi], GradOptions::default()).unwrap()[0]
            .clone()
            .unwrap();
        close(&per[0].select(0, i as i64).unwrap(), &g);
    }
}

#[test]
fn bad_in_dims_are_errors_and_close_the_level() {
    let x = rand(&[3, 2], 9);
    assert!(vmap(std::slice::from_ref(&x), &[Some(2)], |a| Ok(a.to_vec())).is_err());
    assert!(
        vmap(&[x.clone(), rand(&[4], 1)], &[Some(0), Some(0)], |a| Ok(
            a.to_vec()
        ))
        .is_err()
    );
    assert!(vmap(std::slice::from_ref(&x), &[None], |a| Ok(a.to_vec())).is_err());
    let failing = vmap(std::slice::from_ref(&x), &[Some(0)], |_| {
        Err(ferrograd::Error::runtime("inside"))
    });
    assert!(failing.is_err());
    assert!(ferrograd::tensor::batched::current_level().is_none());
}

/// `f` of each sample of `xs` (along dimension 0), stacked.
fn per_sample(xs: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Tensor {
    let outs: Vec<Tensor> = (0..xs.shape()[0])
        .map(|i| f(&xs.select(0, i as i64).unwrap()).unwrap())
        .collect();
    Tensor::stack(&outs, 0).unwrap()
}

#[test]
fn in_place_ops_write_each_sample_into_the_batched_tensors_memory() {
    let (xs, ys, w) = (rand(&[4, 3], 10), rand(&[3, 4], 11), rand(&[3], 12));
    // batch along dimension 1 of `ys`: the write goes through the physical strides
    let target = xs.clone_tensor().unwrap();
    let out = vmap(&[target.clone(), ys.clone()], &[Some(0), Some(1)], |a| {
        a[0].addcmul_(&a[1], &w, 0.5)?;
        a[0].clamp_(None, Some(&Tensor::scalar(0.25)))?;
        Ok(vec![a[0].clone()])
    })
    .unwrap();
    let want = xs
        .add(&ys.t().unwrap().mul(&w).unwrap().mul_scalar(0.5).unwrap())
        .unwrap()
        .clamp_max(&Tensor::scalar(0.25))
        .unwrap();
    close(&target, &want);
    close(&out[0], &want);
    assert!(target.version() > 0);

    // an unbatched value (same for every sample) written into each sample, through a view
    let target = xs.clone_tensor().unwrap();
    vmap(std::slice::from_ref(&target), &[Some(0)], |a| {
        a[0].narrow(0, 1, 2)?.copy_(&w.narrow(0, 0, 2)?)?;
        Ok(vec![])
    })
    .unwrap();
    let want = per_sample(&xs, |x| {
        let x = x.clone_tensor()?;
        x.narrow(0, 1, 2)?.copy_(&w.narrow(0, 0, 2)?)?;
        Ok(x)
    });
    close(&target, &want);
}

#[test]
fn batched_values_cannot_be_written_into_an_unbatched_tensor() {
    let (xs, w) = (rand(&[4, 3], 13), rand(&[3], 14));
    let shared = w.clone_tensor().unwrap();
    let err = vmap(std::slice::from_ref(&xs), &[Some(0)], |a| {
        shared.mul_(&a[0])?;
        Ok(vec![])
    })
    .unwrap_err();
    assert!(err.to_string().starts_with(
        "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor `other`"
    ));
    // refused before anything was written
    close(&shared, &w);
    assert!(ferrograd::tensor::batched::current_level().is_none());
}

#[test]
fn scans_and_products_batch_with_their_gradients() {
    // a zero in one sample only: the exact (zero-aware) gradient path runs for the batch
    let xs = rand(&[3, 4], 15)
        .mul(
            &Tensor::from_vec(
                vec![1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                &[3, 4],
            )
            .unwrap(),
        )
        .unwrap();
    let f = |x: &Tensor| -> Result<Tensor> {
        let x = x.detach().requires_grad_(true)?;
        let y = x.cumsum(0)?.mul(&x.cumprod(0)?)?.sum()?.add(&x.prod()?)?;
        let g = grad(&[y], &[x], GradOptions::default())?;
        Ok(g[0].clone().expect("used"))
    };
    let got = vmap(std::slice::from_ref(&xs), &[Some(0)], |a| {
        Ok(vec![f(&a[0])?])
    })
    .unwrap();
    close(&got[0], &per_sample(&xs, f));
}

#[test]
fn selections_batch_with_per_sample_picks_and_gradients() {
    let xs = rand(&[3, 2, 5], 16);
    // sort, topk, kthvalue, cummax, median and max along a dim pick different positions in each sample
    let f = |x: &Tensor| -> Result<Vec<Tensor>> {
        let x = x.detach().requires_grad_(true)?;
        let (s, si) = x.sort(1, true, None)?;
        let (t, ti) = x.topk(2, 0, false, true)?;
        let (k, ki) = x.kthvalue(3, 1, false)?;
        let (c, ci) = x.cummax(1)?;
        let (m, mi) = x.median_dim(-1, true, false)?;
        let (mx, mxi) = x.extreme_dim(0, false, true)?;
        let y = s
            .mul(&s)?
            .sum()?
            .add(&t.sum()?)?
            .add(&k.exp()?.sum()?)?
            .add(&c.mul(&c)?.sum()?)?
            .add(&m.sum()?)?
            .add(&mx.exp()?.sum()?)?;
        let g = grad(&[y], &[x], GradOptions::default())?[0]
            .clone()
            .expect("used");
        let idx = Tensor::cat(
            &[
                si.reshape(&[10])?,
                ti.reshape(&[10])?,
                ki,
                ci.reshape(&[10])?,
                mi.reshape(&[2])?,
                mxi,
            ],
            0,
        )?;
        Ok(vec![g, idx.to_dtype(ferrograd::DType::Float64)?])
    };
    let got = vmap(std::slice::from_ref(&xs), &[Some(0)], |a| f(&a[0])).unwrap();
    for (j, got) in got.iter().enumerate() {
        close(got, &per_sample(&xs, |x| Ok(f(x)?[j].clone())));
    }
}

#[test]
fn norms_along_a_dim_batch_with_their_gradients() {
    use ferrograd::ops::nn::distance::{normalize, p_norm};
    let xs = rand(&[3, 2, 4], 17);
    let f = |x: &Tensor| -> Result<Tensor> {
        let x = x.detach().requires_grad_(true)?;
        let y = normalize(&x, 2.0, 1, 1e-12)?
            .mul(&x)?
            .sum()?
            .add(&p_norm(&x, 3.0, 0, false)?.sum()?)?;
        let g = grad(&[y], &[x], GradOptions::default())?;
        Ok(g[0].clone().expect("used"))
    };
    let got = vmap(std::slice::from_ref(&xs), &[Some(0)], |a| {
        Ok(vec![f(&a[0])?])
    })
    .unwrap();
    close(&got[0], &per_sample(&xs, f));
}

/// Per-sample gradients of `f` at each sample of `xs` (dim 0), through vmap and by a loop.
fn per_sample_grads(xs: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> (Tensor, Tensor) {
    let got = vmap(std::slice::from_ref(xs), &[Some(0)], |a| {
        let x = a[0].detach().requires_grad_(true)?;
        let g = grad(&[f(&x)?], &[x], GradOptions::default())?;
        Ok(vec![g[0].clone().expect("used")])
    })
    .unwrap();
    let want = (0..xs.shape()[0])
        .map(|i| {
            let x = xs.select(0, i as i64)?.detach().requires_grad_(true)?;
            let g = grad(&[f(&x)?], &[x], GradOptions::default())?;
            Ok(g[0].clone().expect("used"))
        })
        .collect::<Result<Vec<_>>>()
        .unwrap();
    (got[0].clone(), Tensor::stack(&want, 0).unwrap())
}

#[test]
fn linalg_kernels_take_the_samples_as_a_leading_batch_dim() {
    // A + 4I is well conditioned; the samples go through inv/det/solve/svd at once.
    let xs = rand(&[5, 3, 3], 11);
    let f = |a: &Tensor| -> Result<Tensor> {
        let a = a.add(&Tensor::eye(3, 3, a.dtype())?.mul_scalar(4.0)?)?;
        let s = a.svd(false)?.1;
        a.inv()?
            .mul(&a.det()?)?
            .add(&a.solve(&a.t()?, true)?)?
            .sum()?
            .add(&s.sum()?)
    };
    close(
        &vmap(std::slice::from_ref(&xs), &[Some(0)], |a| {
            Ok(vec![f(&a[0])?])
        })
        .unwrap()[0],
        &per_sample(&xs, f),
    );
    let (got, want) = per_sample_grads(&xs, f);
    close(&got, &want);
}

#[test]
fn index_dependent_ops_run_per_sample_and_pooling_folds_the_samples_into_dim_0() {
    use ferrograd::ops::nn::sparse::embedding;
    // embedding with per-sample indices (batching::per_sample_op), weights per sample
    let idx = Tensor::from_vec(vec![0i64, 2, 2, 1, 0, 0, 3, 1], &[2, 4]).unwrap();
    let ws = rand(&[2, 4, 3], 12);
    let got = vmap(&[ws.clone(), idx.clone()], &[Some(0), Some(0)], |a| {
        let w = a[0].detach().requires_grad_(true)?;
        let y = embedding(&w, &a[1], Some(2), true)?;
        let g = grad(&[y.mul(&y)?.sum()?], &[w], GradOptions::default())?;
        Ok(vec![g[0].clone().expect("used")])
    })
    .unwrap();
    for i in 0..2 {
        let w = ws.select(0, i).unwrap().requires_grad_(true).unwrap();
        let y = embedding(&w, &idx.select(0, i).unwrap(), Some(2), true).unwrap();
        let l = y.mul(&y).unwrap().sum().unwrap();
        let g = grad(&[l], &[w], GradOptions::default()).unwrap()[0]
            .clone()
            .unwrap();
        close(&got[0].select(0, i).unwrap(), &g);
    }
    // adaptive pooling folds the samples into its leading dim (batching::fold_front)
    let xs = rand(&[3, 2, 4, 4, 5], 13);
    let pool = |x: &Tensor| x.adaptive_avg_pool3d(&[2, 3, 2])?.exp()?.sum();
    let (got, want) = per_sample_grads(&xs, pool);
    close(&got, &want);
}
