//! Fit a 2-layer MLP to y = sin(3x) * x with the crate's autograd and a hand-written SGD step
//! with momentum, then check one gradient against central finite differences.
//!
//! Run: cargo run --release --example quickstart

use ferrograd::autograd::{self, GradOptions};
use ferrograd::{DType, Result, Tensor};

fn model(x: &Tensor, p: &[Tensor]) -> Result<Tensor> {
    x.matmul(&p[0])?
        .add(&p[1])?
        .tanh()?
        .matmul(&p[2])?
        .add(&p[3])
}

fn mse(pred: &Tensor, y: &Tensor) -> Result<Tensor> {
    pred.sub(y)?.pow_scalar(2.0)?.mean()
}

fn main() -> Result<()> {
    ferrograd::tensor::creation::manual_seed(0);
    let n = 256;
    let xs: Vec<f32> = (0..n)
        .map(|i| -2.0 + 4.0 * i as f32 / (n - 1) as f32)
        .collect();
    let x = Tensor::from_vec(xs, &[n, 1])?;
    let y = x.mul_scalar(3.0)?.sin()?.mul(&x)?;

    let hidden = 32;
    let params = vec![
        Tensor::randn(&[1, hidden], DType::Float32)?.requires_grad_(true)?,
        Tensor::zeros(&[hidden], DType::Float32).requires_grad_(true)?,
        Tensor::randn(&[hidden, 1], DType::Float32)?
            .mul_scalar(1.0 / (hidden as f64).sqrt())?
            .requires_grad_(true)?,
        Tensor::zeros(&[1], DType::Float32).requires_grad_(true)?,
    ];
    let velocity: Vec<Tensor> = params.iter().map(Tensor::zeros_like).collect();
    let (lr, momentum) = (0.05, 0.9);
    let mut loss_value = f64::NAN;
    for step in 1..=3000 {
        let loss = mse(&model(&x, &params)?, &y)?;
        for p in &params {
            p.set_grad(None)?;
        }
        loss.backward()?;
        let _no_grad = autograd::no_grad();
        for (p, v) in params.iter().zip(&velocity) {
            let g = p.grad().expect("every parameter is used");
            v.mul_(&Tensor::scalar(momentum as f32))?;
            v.add_(&g)?;
            p.sub_(&v.mul_scalar(lr)?)?;
        }
        loss_value = loss.item()?;
        if step == 1 || step % 500 == 0 {
            println!("step {step:5}  loss {loss_value:.5}");
        }
    }
    assert!(
        loss_value < 0.01,
        "training did not converge (loss {loss_value})"
    );

    // d loss / d w2[3, 0] in float64: autograd against central differences.
    let p64: Vec<Tensor> = params
        .iter()
        .map(|p| p.detach().to_dtype(DType::Float64))
        .collect::<Result<_>>()?;
    let (x64, y64) = (x.to_dtype(DType::Float64)?, y.to_dtype(DType::Float64)?);
    let loss_at = |w2: &Tensor| -> Result<Tensor> {
        let p = [p64[0].clone(), p64[1].clone(), w2.clone(), p64[3].clone()];
        mse(&model(&x64, &p)?, &y64)
    };
    let w2 = p64[2].detach().requires_grad_(true)?;
    let analytic = autograd::grad(
        &[loss_at(&w2)?],
        std::slice::from_ref(&w2),
        GradOptions::default(),
    )?[0]
        .clone()
        .expect("w2 is used")
        .to_vec::<f64>()?[3];
    let eps = 1e-6;
    let base = p64[2].to_vec::<f64>()?;
    let shifted = |d: f64| -> Result<f64> {
        let mut v = base.clone();
        v[3] += d;
        loss_at(&Tensor::from_vec(v, &[hidden, 1])?)?.item()
    };
    let numeric = (shifted(eps)? - shifted(-eps)?) / (2.0 * eps);
    println!("d loss / d w2[3,0]: autograd {analytic:.8}  finite differences {numeric:.8}");
    assert!((analytic - numeric).abs() < 1e-6 * numeric.abs().max(1.0));
    println!("gradient check passed");
    Ok(())
}
