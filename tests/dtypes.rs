//! The narrow dtypes from Rust: integer arithmetic wraps in the type's width (Rust's
//! `wrapping_*` is the truth), half types compute in float32 and round once on store (the
//! `half` crate's conversion is the truth), promotion follows torch's lattice, and float-only
//! kernels take half inputs with gradients in the half type.

use ferrograd::tensor::{bf16, f16};
use ferrograd::{DType, Tensor};

#[test]
fn int8_arithmetic_wraps_like_rust() -> ferrograd::Result<()> {
    let a: Vec<i8> = vec![100, -128, 127, -7];
    let b: Vec<i8> = vec![100, -1, 2, 3];
    let (x, y) = (
        Tensor::from_vec(a.clone(), &[4])?,
        Tensor::from_vec(b.clone(), &[4])?,
    );
    let sum = x.add(&y)?;
    let prod = x.mul(&y)?;
    assert_eq!(sum.dtype(), DType::Int8);
    let want_sum: Vec<i8> = a.iter().zip(&b).map(|(p, q)| p.wrapping_add(*q)).collect();
    let want_prod: Vec<i8> = a.iter().zip(&b).map(|(p, q)| p.wrapping_mul(*q)).collect();
    assert_eq!(sum.to_vec::<i8>()?, want_sum);
    assert_eq!(prod.to_vec::<i8>()?, want_prod);
    // Sums of integers are int64, as in torch.
    assert_eq!(x.sum()?.dtype(), DType::Int64);
    assert_eq!(
        x.sum()?.to_vec::<i64>()?,
        vec![a.iter().map(|&v| v as i64).sum::<i64>()]
    );
    // uint8 with int8 promotes to int16.
    let u = Tensor::from_vec(vec![200u8, 1, 2, 3], &[4])?;
    let mixed = u.add(&x)?;
    assert_eq!(mixed.dtype(), DType::Int16);
    assert_eq!(mixed.to_vec::<i16>()?, vec![300, -127, 129, -4]);
    Ok(())
}

#[test]
fn half_types_round_once_from_float32() -> ferrograd::Result<()> {
    let a = [0.1f32, 1.0 / 3.0, 1234.567, -2.5e-3];
    let b = [0.7f32, 3.0, 0.001, 7.0];
    let x = Tensor::from_vec(a.iter().map(|&v| f16::from_f32(v)).collect(), &[4])?;
    let y = Tensor::from_vec(b.iter().map(|&v| f16::from_f32(v)).collect(), &[4])?;
    let got = x.mul(&y)?;
    assert_eq!(got.dtype(), DType::Float16);
    let want: Vec<f16> = a
        .iter()
        .zip(&b)
        .map(|(&p, &q)| f16::from_f32(f16::from_f32(p).to_f32() * f16::from_f32(q).to_f32()))
        .collect();
    assert_eq!(got.to_vec::<f16>()?, want);
    let e = x.to_dtype(DType::BFloat16)?.exp()?;
    assert_eq!(e.dtype(), DType::BFloat16);
    let want: Vec<bf16> = a
        .iter()
        .map(|&p| bf16::from_f32(f16::from_f32(p).to_f32().exp()))
        .collect();
    assert_eq!(e.to_vec::<bf16>()?, want);
    // float16 with bfloat16 is float32.
    assert_eq!(x.add(&e)?.dtype(), DType::Float32);
    Ok(())
}

#[test]
fn a_half_linear_layer_has_half_gradients() -> ferrograd::Result<()> {
    let xv = [0.5f32, -1.0, 2.0, 0.25, 1.5, -0.75];
    let wv = [0.2f32, -0.4, 0.6, 0.1, 0.3, -0.5];
    let h = |v: &[f32]| Tensor::from_vec(v.iter().map(|&q| f16::from_f32(q)).collect(), &[2, 3]);
    let x = h(&xv)?;
    let w = h(&wv)?.requires_grad_(true)?;
    let y = ferrograd::ops::nn::linear::linear(&x, &w, None)?;
    assert_eq!(y.dtype(), DType::Float16);
    y.to_dtype(DType::Float32)?.sum()?.backward()?;
    let g = w.grad().expect("w gets a gradient");
    assert_eq!(g.dtype(), DType::Float16);
    // d sum(x wᵀ) / dw[o, i] = sum over rows of x[:, i]
    let g = g.to_vec::<f32>()?;
    for o in 0..2 {
        for i in 0..3 {
            let want = f16::from_f32(xv[i]).to_f32() + f16::from_f32(xv[3 + i]).to_f32();
            assert!(
                (g[o * 3 + i] - want).abs() <= 2e-3 * want.abs().max(1.0),
                "{o},{i}"
            );
        }
    }
    Ok(())
}

#[test]
fn every_dtype_converts_to_and_from_float64() -> ferrograd::Result<()> {
    for d in DType::ALL {
        let t = Tensor::from_vec(vec![1.0f64, 0.0, 3.0], &[3])?.to_dtype(d)?;
        assert_eq!(t.dtype(), d);
        assert_eq!(
            t.to_vec::<f64>()?,
            vec![1.0, 0.0, if d == DType::Bool { 1.0 } else { 3.0 }]
        );
    }
    Ok(())
}

#[test]
fn meta_tensors_have_shapes_and_views_but_reading_them_panics_with_the_meta_message() {
    let m = Tensor::new_meta(&[2, 3, 4], DType::Float64);
    assert!(m.is_meta());
    assert_eq!(m.dtype(), DType::Float64);
    let v = m.transpose(0, 2).unwrap();
    assert_eq!(v.shape(), &[4, 3, 2]);
    assert!(v.is_meta());
    assert_eq!(m.reshape(&[6, 4]).unwrap().shape(), &[6, 4]);
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.add(&m)))
        .expect_err("reading a meta tensor");
    let msg = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert_eq!(msg, ferrograd::tensor::storage::META_MESSAGE);
}
