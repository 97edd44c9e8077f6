//! Optimizer updates against closed forms of torch's formulas.

use ferrograd::optim::{
    adafactor_step, adagrad_step, adam_step, adamax_step, asgd_step, nadam_step, radam_step,
    rmsprop_step, rprop_step, sgd_step, AdafactorOptions, AdagradOptions, AdamOptions,
    AdamaxOptions, AsgdOptions, NadamOptions, RadamOptions, RmspropOptions, RpropOptions,
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

fn scalar32(x: f32) -> Tensor {
    Tensor::from_vec(vec![x], &[]).expect("scalar")
}

#[test]
fn nadam_matches_closed_form_with_float32_mu_product() -> Result<()> {
    for decoupled in [false, true] {
        let p = t(&[1.0, -2.0, 0.5]);
        let gv = [0.3, -0.1, 2.0];
        let g = t(&gv);
        let (m, v, mp) = (t(&[0.0; 3]), t(&[0.0; 3]), scalar32(1.0));
        let (mut pe, mut me, mut ve, mut mpe) = (vec![1.0, -2.0, 0.5], [0.0; 3], [0.0; 3], 1f32);
        for step in 1..=4 {
            let s = step as f64;
            let opts = NadamOptions {
                step: s,
                lr: 0.01,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.1,
                momentum_decay: 4e-3,
                decoupled_weight_decay: decoupled,
                maximize: true,
            };
            nadam_step(
                std::slice::from_ref(&p),
                std::slice::from_ref(&g),
                std::slice::from_ref(&m),
                std::slice::from_ref(&v),
                std::slice::from_ref(&mp),
                &opts,
            )?;
            let mu = 0.9 * (1.0 - 0.5 * 0.96f64.powf(s * 4e-3));
            let mu_next = 0.9 * (1.0 - 0.5 * 0.96f64.powf((s + 1.0) * 4e-3));
            mpe *= mu as f32;
            let mpf = mpe as f64;
            for k in 0..3 {
                let mut d = -gv[k];
                if decoupled {
                    pe[k] *= 1.0 - 0.01 * 0.1;
                } else {
                    d += 0.1 * pe[k];
                }
                me[k] = 0.9 * me[k] + 0.1 * d;
                ve[k] = 0.999 * ve[k] + 0.001 * d * d;
                let denom = (ve[k] / (1.0 - 0.999f64.powf(s))).sqrt() + 1e-8;
                pe[k] -= 0.01 * (1.0 - mu) / (1.0 - mpf) * d / denom;
                pe[k] -= 0.01 * mu_next / (1.0 - mpf * mu_next) * me[k] / denom;
            }
        }
        close(&p.to_vec::<f64>()?, &pe);
        assert_eq!(mp.to_vec::<f32>()?, vec![mpe]);
    }
    Ok(())
}

#[test]
fn radam_switches_to_rectified_update_after_rho_exceeds_five() -> Result<()> {
    let p = t(&[1.0, -2.0]);
    let gv = [0.3, -0.7];
    let g = t(&gv);
    let (m, v) = (t(&[0.0; 2]), t(&[0.0; 2]));
    let (mut pe, mut me, mut ve) = (vec![1.0, -2.0], [0.0; 2], [0.0; 2]);
    let mut rectified = 0;
    for step in 1..=8 {
        let s = step as f64;
        let opts = RadamOptions {
            step: s,
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
            maximize: false,
        };
        radam_step(
            std::slice::from_ref(&p),
            std::slice::from_ref(&g),
            std::slice::from_ref(&m),
            std::slice::from_ref(&v),
            &opts,
        )?;
        let (bc1, bc2) = (1.0 - 0.9f64.powf(s), 1.0 - 0.999f64.powf(s));
        let rho_inf = 2.0 / 0.001 - 1.0;
        let rho = rho_inf - 2.0 * s * 0.999f64.powf(s) / bc2;
        for k in 0..2 {
            me[k] = 0.9 * me[k] + 0.1 * gv[k];
            ve[k] = 0.999 * ve[k] + 0.001 * gv[k] * gv[k];
            let mhat = me[k] / bc1;
            if rho > 5.0 {
                let r = ((rho - 4.0) * (rho - 2.0) * rho_inf
                    / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho))
                    .sqrt();
                pe[k] -= 0.01 * mhat * bc2.sqrt() / (ve[k].sqrt() + 1e-8) * r;
            } else {
                pe[k] -= 0.01 * mhat;
            }
        }
        rectified += usize::from(rho > 5.0);
    }
    assert!(rectified > 0 && rectified < 8);
    close(&p.to_vec::<f64>()?, &pe);
    Ok(())
}

#[test]
fn adamax_rprop_and_asgd_match_closed_form() -> Result<()> {
    let gv = [0.3, -0.7, 0.0];
    let g = t(&gv);
    // Adamax with L2 decay.
    let p = t(&[1.0, -2.0, 0.5]);
    let (m, u) = (t(&[0.0; 3]), t(&[0.0; 3]));
    let (mut pe, mut me, mut ue) = (vec![1.0, -2.0, 0.5], [0.0; 3], [0.0f64; 3]);
    for step in 1..=4 {
        let opts = AdamaxOptions {
            step: step as f64,
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            weight_decay: 0.1,
            maximize: false,
        };
        adamax_step(
            std::slice::from_ref(&p),
            std::slice::from_ref(&g),
            std::slice::from_ref(&m),
            std::slice::from_ref(&u),
            &opts,
        )?;
        for k in 0..3 {
            let d = gv[k] + 0.1 * pe[k];
            me[k] = 0.9 * me[k] + 0.1 * d;
            ue[k] = f64::max(0.99 * ue[k], d.abs() + 1e-8);
            pe[k] -= 0.01 / (1.0 - 0.9f64.powi(step)) * me[k] / ue[k];
        }
    }
    close(&p.to_vec::<f64>()?, &pe);

    // Rprop: the gradient flips sign on the second step, then stays.
    let p = t(&[1.0, -2.0, 0.5]);
    let (prev, ss) = (t(&[0.0; 3]), t(&[0.1; 3]));
    let opts = RpropOptions {
        etaminus: 0.5,
        etaplus: 1.2,
        step_size_min: 1e-6,
        step_size_max: 0.15,
        maximize: false,
    };
    for gs in [[1.0, 1.0, 0.0], [-1.0, 2.0, 1.0], [-1.0, 2.0, 1.0]] {
        rprop_step(
            std::slice::from_ref(&p),
            &[t(&gs)],
            std::slice::from_ref(&prev),
            std::slice::from_ref(&ss),
            &opts,
        )?;
    }
    // Element 0: -0.1 (+), flip: size 0.05 and no move, then -0.05 (x1: prev was zeroed).
    // Element 1: -0.1, then size 0.12 and 0.144 (under the max 0.15).
    // Element 2: no move (zero grad), then +1: size 0.1 twice, then 0.12.
    close(
        &p.to_vec::<f64>()?,
        &[
            1.0 - 0.1 + 0.05,
            -2.0 - 0.1 - 0.12 - 0.144,
            0.5 - 0.1 - 0.12,
        ],
    );
    close(&ss.to_vec::<f64>()?, &[0.05, 0.144, 0.12]);
    close(&prev.to_vec::<f64>()?, &[-1.0, 2.0, 1.0]);

    // ASGD with t0 = 2: the average copies the parameter for two steps, then averages.
    let p = t(&[1.0, -2.0, 0.5]);
    let (ax, eta, mu) = (t(&[0.0; 3]), scalar32(0.1), scalar32(1.0));
    let (mut pe, mut axe, mut etae, mut mue) = (vec![1.0, -2.0, 0.5], [0.0; 3], 0.1f32, 1f32);
    for step in 1..=5 {
        let s = step as f64;
        let opts = AsgdOptions {
            step: s,
            lr: 0.1,
            lambd: 0.01,
            alpha: 0.75,
            t0: 2.0,
            weight_decay: 0.0,
            maximize: false,
        };
        asgd_step(
            std::slice::from_ref(&p),
            std::slice::from_ref(&g),
            std::slice::from_ref(&ax),
            std::slice::from_ref(&eta),
            std::slice::from_ref(&mu),
            &opts,
        )?;
        let e = etae as f64;
        for k in 0..3 {
            pe[k] = pe[k] * (1.0 - 0.01 * e) - e * gv[k];
            axe[k] = if mue == 1.0 {
                pe[k]
            } else {
                axe[k] + (pe[k] - axe[k]) * mue as f64
            };
        }
        etae = (0.1 / (1.0 + 0.01 * 0.1 * s).powf(0.75)) as f32;
        mue = (1.0 / f64::max(1.0, s - 2.0)) as f32;
    }
    close(&p.to_vec::<f64>()?, &pe);
    close(&ax.to_vec::<f64>()?, &axe);
    assert_eq!(eta.to_vec::<f32>()?, vec![etae]);
    assert_eq!(mu.to_vec::<f32>()?, vec![mue]);
    Ok(())
}

#[test]
fn adafactor_factors_matrices_and_matches_closed_form() -> Result<()> {
    let (rows, cols) = (2, 3);
    let p0 = [1.0, -2.0, 0.5, 0.25, 3.0, -1.0];
    let gv: [f64; 6] = [0.3, -0.7, 0.1, 2.0, -0.2, 0.05];
    let p = Tensor::from_vec(p0.to_vec(), &[rows, cols])?;
    let g = Tensor::from_vec(gv.to_vec(), &[rows, cols])?;
    let (rv, cv) = (
        Tensor::from_vec(vec![0.0f64; rows], &[rows, 1])?,
        Tensor::from_vec(vec![0.0f64; cols], &[1, cols])?,
    );
    let b = t(&[0.5, -0.5]);
    let bg = t(&[0.1, 0.2]);
    let var = t(&[0.0; 2]);
    let eps1 = f64::EPSILON;
    let (mut pe, mut rve, mut cve) = (p0.to_vec(), vec![0.0; rows], vec![0.0; cols]);
    let (mut be, mut vare) = (vec![0.5, -0.5], [0.0; 2]);
    let rms = |x: &[f64]| (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64).sqrt();
    for step in 1..=3 {
        let s = step as f64;
        let opts = AdafactorOptions {
            step: s,
            lr: 0.05,
            beta2_decay: -0.8,
            eps1: None,
            eps2: 1e-3,
            d: 1.0,
            weight_decay: 0.1,
            maximize: false,
        };
        adafactor_step(
            &[p.clone(), b.clone()],
            &[g.clone(), bg.clone()],
            std::slice::from_ref(&rv),
            std::slice::from_ref(&cv),
            std::slice::from_ref(&var),
            &opts,
        )?;
        let w = s.powf(-0.8);
        let rho = f64::min(0.05, 1.0 / s.sqrt());
        // The matrix.
        let alpha = f64::max(1e-3, rms(&pe)) * rho;
        for r in 0..rows {
            let m = (0..cols).map(|c| gv[r * cols + c].powi(2)).sum::<f64>() / cols as f64;
            rve[r] = (1.0 - w) * rve[r] + w * m;
        }
        for c in 0..cols {
            let m = (0..rows).map(|r| gv[r * cols + c].powi(2)).sum::<f64>() / rows as f64;
            cve[c] = (1.0 - w) * cve[c] + w * m;
        }
        let den = f64::max(rve.iter().sum::<f64>() / rows as f64, eps1);
        let u: Vec<f64> = (0..rows * cols)
            .map(|k| gv[k] / f64::max(rve[k / cols] * cve[k % cols] / den, eps1 * eps1).sqrt())
            .collect();
        let clip = f64::max(1.0, rms(&u));
        for k in 0..rows * cols {
            pe[k] = pe[k] * (1.0 - 0.05 * 0.1) - alpha / clip * u[k];
        }
        // The vector.
        let alpha = f64::max(1e-3, rms(&be)) * rho;
        let bgv = [0.1, 0.2];
        let u: Vec<f64> = (0..2)
            .map(|k| {
                vare[k] = (1.0 - w) * vare[k] + w * bgv[k] * bgv[k];
                bgv[k] / f64::max(vare[k], eps1 * eps1).sqrt()
            })
            .collect();
        let clip = f64::max(1.0, rms(&u));
        for k in 0..2 {
            be[k] = be[k] * (1.0 - 0.05 * 0.1) - alpha / clip * u[k];
        }
    }
    close(&p.to_vec::<f64>()?, &pe);
    close(&rv.to_vec::<f64>()?, &rve);
    close(&cv.to_vec::<f64>()?, &cve);
    close(&b.to_vec::<f64>()?, &be);
    close(&var.to_vec::<f64>()?, &vare);
    // A row variance of the wrong shape is an error, not a panic.
    let opts = AdafactorOptions {
        step: 4.0,
        lr: 0.05,
        beta2_decay: -0.8,
        eps1: None,
        eps2: 1e-3,
        d: 1.0,
        weight_decay: 0.0,
        maximize: false,
    };
    let e = adafactor_step(
        std::slice::from_ref(&p),
        std::slice::from_ref(&g),
        std::slice::from_ref(&cv),
        std::slice::from_ref(&rv),
        &[],
        &opts,
    )
    .expect_err("shape");
    assert!(e.to_string().contains("row_var of parameter 0"), "{e}");
    let e = adafactor_step(
        std::slice::from_ref(&p),
        std::slice::from_ref(&g),
        &[],
        &[],
        &[],
        &opts,
    )
    .expect_err("missing");
    assert!(e.to_string().contains("same number of tensors"), "{e}");
    Ok(())
}
