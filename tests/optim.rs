//! Optimizer updates against closed forms of torch's formulas.

use ferrograd::optim::{
    adagrad_step, adam_step, rmsprop_step, sgd_step, AdagradOptions, AdamOptions, RmspropOptions,
    SgdOptions,
};
use ferrograd::{Result, Tensor};

fn t(v: &[f64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).expect("tensor")
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{a:?} vs {b:?}");
    }
}

#[test]
fn sgd_momentum_nesterov_matches_closed_form() -> Result<()> {
    let p = t(&[1.0, -2.0]);
    let g = t(&[0.5, 0.25]);
    let b = t(&[0.0, 0.0]);
    let mut opts = SgdOptions {
        lr: 0.1,
        momentum: 0.9,
        dampening: 0.0,
        nesterov: true,
        weight_decay: 0.01,
        maximize: false,
        first_step: true,
    };
    let v0 = p.version();
    sgd_step(
        std::slice::from_ref(&p),
        std::slice::from_ref(&g),
        std::slice::from_ref(&b),
        &opts,
    )?;
    assert!(p.version() > v0);
    let (mut pe, mut be) = (vec![1.0, -2.0], vec![0.0; 2]);
    for step in 0..3 {
        if step > 0 {
            opts.first_step = false;
            sgd_step(
                std::slice::from_ref(&p),
                std::slice::from_ref(&g),
                std::slice::from_ref(&b),
                &opts,
            )?;
        }
        for k in 0..2 {
            let gk = [0.5, 0.25][k] + 0.01 * pe[k];
            be[k] = if step == 0 { gk } else { 0.9 * be[k] + gk };
            pe[k] -= 0.1 * (gk + 0.9 * be[k]);
        }
    }
    close(&p.to_vec::<f64>()?, &pe);
    close(&b.to_vec::<f64>()?, &be);
    Ok(())
}

#[test]
fn adam_and_adamw_match_closed_form() -> Result<()> {
    for (decoupled, amsgrad) in [(false, false), (true, true)] {
        let p = t(&[1.0, -2.0, 0.5]);
        let gv = [0.3, -0.1, 2.0];
        let g = t(&gv);
        let (m, v, vm) = (t(&[0.0; 3]), t(&[0.0; 3]), t(&[0.0; 3]));
        let (mut pe, mut me, mut ve, mut vme) =
            (vec![1.0, -2.0, 0.5], [0.0; 3], [0.0; 3], [0.0; 3]);
        for step in 1..=5 {
            let opts = AdamOptions {
                step: step as f64,
                lr: 0.01,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.1,
                amsgrad,
                maximize: false,
                decoupled_weight_decay: decoupled,
            };
            let vms = if amsgrad { vec![vm.clone()] } else { vec![] };
            adam_step(
                std::slice::from_ref(&p),
                std::slice::from_ref(&g),
                std::slice::from_ref(&m),
                std::slice::from_ref(&v),
                &vms,
                &opts,
            )?;
            for k in 0..3 {
                let mut d = gv[k];
                if decoupled {
                    pe[k] *= 1.0 - 0.01 * 0.1;
                } else {
                    d += 0.1 * pe[k];
                }
                me[k] = 0.9 * me[k] + 0.1 * d;
                ve[k] = 0.999 * ve[k] + 0.001 * d * d;
                vme[k] = f64::max(vme[k], ve[k]);
                let sec = if amsgrad { vme[k] } else { ve[k] };
                let bc1 = 1.0 - 0.9f64.powi(step);
                let bc2 = 1.0 - 0.999f64.powi(step);
                pe[k] -= 0.01 / bc1 * me[k] / (sec.sqrt() / bc2.sqrt() + 1e-8);
            }
        }
        close(&p.to_vec::<f64>()?, &pe);
    }
    Ok(())
}

#[test]
fn rmsprop_centered_momentum_and_adagrad_match_closed_form() -> Result<()> {
    let p = t(&[1.0, -2.0]);
    let gv = [0.3, -0.7];
    let g = t(&gv);
    let (s, b, a) = (t(&[0.0; 2]), t(&[0.0; 2]), t(&[0.0; 2]));
    let opts = RmspropOptions {
        lr: 0.01,
        alpha: 0.99,
        eps: 1e-8,
        weight_decay: 0.0,
        momentum: 0.5,
        centered: true,
        maximize: true,
    };
    let (mut pe, mut se, mut be, mut ae) = (vec![1.0, -2.0], [0.0; 2], [0.0; 2], [0.0; 2]);
    for _ in 0..4 {
        rmsprop_step(
            std::slice::from_ref(&p),
            std::slice::from_ref(&g),
            std::slice::from_ref(&s),
            std::slice::from_ref(&b),
            std::slice::from_ref(&a),
            &opts,
        )?;
        for k in 0..2 {
            let d = -gv[k];
            se[k] = 0.99 * se[k] + 0.01 * d * d;
            ae[k] += 0.01 * (d - ae[k]);
            let avg = (se[k] - ae[k] * ae[k]).sqrt() + 1e-8;
            be[k] = 0.5 * be[k] + d / avg;
            pe[k] -= 0.01 * be[k];
        }
    }
    close(&p.to_vec::<f64>()?, &pe);

    let p = t(&[1.0, -2.0]);
    let s = t(&[0.1, 0.1]);
    let (mut pe, mut se) = (vec![1.0, -2.0], [0.1; 2]);
    for step in 1..=4 {
        let opts = AdagradOptions {
            step: step as f64,
            lr: 0.1,
            lr_decay: 0.01,
            weight_decay: 0.0,
            eps: 1e-10,
            maximize: false,
        };
        adagrad_step(
            std::slice::from_ref(&p),
            std::slice::from_ref(&g),
            std::slice::from_ref(&s),
            &opts,
        )?;
        let clr = 0.1 / (1.0 + (step as f64 - 1.0) * 0.01);
        for k in 0..2 {
            se[k] += gv[k] * gv[k];
            pe[k] -= clr * gv[k] / (se[k].sqrt() + 1e-10);
        }
    }
    close(&p.to_vec::<f64>()?, &pe);
    Ok(())
}

#[test]
fn large_float32_update_does_not_depend_on_chunking() -> Result<()> {
    let n = 1 << 20;
    let vals: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.01 - 0.4).collect();
    let p = Tensor::from_vec(vals.clone(), &[n])?;
    let g = Tensor::from_vec(vals.iter().map(|x| x * 0.5).collect::<Vec<_>>(), &[n])?;
    let (m, v) = (
        Tensor::from_vec(vec![0f32; n], &[n])?,
        Tensor::from_vec(vec![0f32; n], &[n])?,
    );
    let opts = AdamOptions {
        step: 1.0,
        lr: 0.001,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        amsgrad: false,
        maximize: false,
        decoupled_weight_decay: false,
    };
    adam_step(std::slice::from_ref(&p), &[g], &[m], &[v], &[], &opts)?;
    let out = p.to_vec::<f32>()?;
    for (k, (&o, &x)) in out.iter().zip(&vals).enumerate() {
        // First Adam step: p - lr * sign(g) (up to eps, which matters for tiny gradients).
        if x.abs() < 1e-3 {
            continue;
        }
        let expected = x - 0.001 * x.signum();
        assert!(
            (o - expected).abs() < 1e-6,
            "element {k}: {o} vs {expected}"
        );
    }
    Ok(())
}

#[test]
fn errors() -> Result<()> {
    let opts = SgdOptions {
        lr: 0.1,
        momentum: 0.0,
        dampening: 0.0,
        nesterov: false,
        weight_decay: 0.0,
        maximize: false,
        first_step: true,
    };
    let p = t(&[1.0, 2.0]);
    let e = sgd_step(std::slice::from_ref(&p), &[], &[], &opts).expect_err("length");
    assert!(e.to_string().contains("same number of tensors"));
    let e = sgd_step(std::slice::from_ref(&p), &[t(&[1.0])], &[], &opts).expect_err("shape");
    assert!(e.to_string().contains("shape"));
    let g32 = Tensor::from_vec(vec![1f32, 2.0], &[2])?;
    let e = sgd_step(std::slice::from_ref(&p), &[g32], &[], &opts).expect_err("dtype");
    assert!(e.to_string().contains("dtype"));
    let m = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2])?;
    let e = sgd_step(&[m.t()?], std::slice::from_ref(&m), &[], &opts).expect_err("strided");
    assert!(e.to_string().contains("not contiguous"));
    let e = sgd_step(
        &[t(&[1.0]).expand(&[2])?],
        std::slice::from_ref(&p),
        &[],
        &opts,
    )
    .expect_err("expanded");
    assert!(e.to_string().contains("expanded"));
    let leaf = t(&[1.0, 2.0]).requires_grad_(true)?;
    let nonleaf = leaf.mul(&leaf)?;
    let e = sgd_step(&[nonleaf], std::slice::from_ref(&p), &[], &opts).expect_err("non-leaf");
    assert!(e.to_string().contains("can't optimize a non-leaf Tensor"));
    // A gradient that is the parameter itself is read before being overwritten.
    sgd_step(
        std::slice::from_ref(&p),
        std::slice::from_ref(&p),
        &[],
        &opts,
    )?;
    close(&p.to_vec::<f64>()?, &[0.9, 1.8]);
    Ok(())
}
