//! Resampling from Rust: interpolation modes against closed forms (a linear ramp is reproduced
//! exactly by linear interpolation, integer-scale nearest repeats, area averages blocks),
//! gradients against finite differences, the adjoint identity through a second derivative, the
//! shuffles as permutations, and torch's errors.

mod common;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::sampling::{
    channel_shuffle, interpolate, pixel_shuffle, pixel_unshuffle, InterpMode,
};
use ferrograd::Tensor;

/// Values `f(0..n)` as a tensor of `shape`.
fn filled(shape: &[usize], f: impl Fn(&[usize]) -> f64) -> Vec<f64> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut i| {
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = i % shape[d];
                i /= shape[d];
            }
            f(&idx)
        })
        .collect()
}

fn t(v: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(v, shape).unwrap()
}

/// Where output index `j` samples the input (torch's linear rule, before the border clamp).
fn source(j: usize, n_in: usize, n_out: usize, align: bool, scale: Option<f64>) -> f64 {
    if align {
        if n_out > 1 {
            j as f64 * (n_in - 1) as f64 / (n_out - 1) as f64
        } else {
            0.0
        }
    } else {
        let s = scale.map_or(n_in as f64 / n_out as f64, |s| 1.0 / s);
        ((j as f64 + 0.5) * s - 0.5).clamp(0.0, (n_in - 1) as f64)
    }
}

#[test]
fn linear_modes_reproduce_a_ramp_exactly() {
    let ramp = |p: &[f64]| {
        1.0 + p
            .iter()
            .enumerate()
            .map(|(d, v)| (d + 2) as f64 * v)
            .sum::<f64>()
    };
    for (sp_in, sp_out) in [
        (vec![5usize], vec![9usize]),
        (vec![4, 5], vec![7, 3]),
        (vec![3, 4, 2], vec![5, 2, 4]),
    ] {
        let mut shape = vec![2, 3];
        shape.extend(&sp_in);
        let x = t(
            filled(&shape, |i| {
                ramp(&i[2..].iter().map(|&v| v as f64).collect::<Vec<_>>())
            }),
            &shape,
        );
        for align in [false, true] {
            let size: Vec<i64> = sp_out.iter().map(|&s| s as i64).collect();
            let out = interpolate(&x, Some(&size), None, InterpMode::Linear, align, false).unwrap();
            let mut oshape = vec![2, 3];
            oshape.extend(&sp_out);
            assert_eq!(out.shape(), &oshape[..]);
            let want = filled(&oshape, |i| {
                let p: Vec<f64> = i[2..]
                    .iter()
                    .enumerate()
                    .map(|(d, &j)| source(j, sp_in[d], sp_out[d], align, None))
                    .collect();
                ramp(&p)
            });
            assert_close(&out.to_vec::<f64>().unwrap(), &want, 1e-12);
        }
    }
}

#[test]
fn a_given_scale_places_the_samples() {
    // torch uses 1 / scale_factor, not in / out, when the scale is given.
    let x = t((0..7).map(|v| v as f64 * 0.5).collect(), &[1, 1, 7]);
    let out = interpolate(&x, None, Some(&[1.7]), InterpMode::Linear, false, false).unwrap();
    assert_eq!(out.shape(), &[1, 1, 11]);
    let want: Vec<f64> = (0..11)
        .map(|j| 0.5 * source(j, 7, 11, false, Some(1.7)))
        .collect();
    assert_close(&out.to_vec::<f64>().unwrap(), &want, 1e-12);
}

#[test]
fn nearest_at_integer_scale_repeats() {
    let x = t((0..12).map(f64::from).collect(), &[1, 2, 2, 3]);
    for mode in [InterpMode::Nearest, InterpMode::NearestExact] {
        let out = interpolate(&x, None, Some(&[3.0, 2.0]), mode, false, false).unwrap();
        assert_eq!(out.shape(), &[1, 2, 6, 6]);
        let want = filled(&[1, 2, 6, 6], |i| {
            (i[1] * 6 + (i[2] / 3) * 3 + i[3] / 2) as f64
        });
        assert_eq!(out.to_vec::<f64>().unwrap(), want, "{mode:?}");
    }
    // downsampling by 2: nearest takes the first of each pair, nearest-exact the second
    let x = t((0..8).map(f64::from).collect(), &[1, 1, 8]);
    let take = |m| {
        interpolate(&x, Some(&[4]), None, m, false, false)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    };
    assert_eq!(take(InterpMode::Nearest), vec![0.0, 2.0, 4.0, 6.0]);
    assert_eq!(take(InterpMode::NearestExact), vec![1.0, 3.0, 5.0, 7.0]);
}

#[test]
fn bicubic_keeps_constants_and_the_identity() {
    let x = t(vec![2.5; 2 * 3 * 4], &[1, 2, 3, 4]);
    for align in [false, true] {
        let out = interpolate(&x, Some(&[7, 5]), None, InterpMode::Cubic, align, false).unwrap();
        assert_close(&out.to_vec::<f64>().unwrap(), &[2.5; 70], 1e-12);
    }
    let v: Vec<f64> = (0..24).map(|i| (i as f64 * 0.37).sin()).collect();
    let x = t(v.clone(), &[1, 2, 3, 4]);
    let out = interpolate(&x, Some(&[3, 4]), None, InterpMode::Cubic, true, false).unwrap();
    assert_close(&out.to_vec::<f64>().unwrap(), &v, 1e-12);
}

#[test]
fn antialiased_halving_is_a_1_3_3_1_filter() {
    // Downscaling by 2 widens the triangle to 4 taps: (1, 3, 3, 1) / 8 away from the border,
    // the first output renormalised over the 3 taps that exist.
    let v: Vec<f64> = (0..12).map(|i| ((i * 7) % 5) as f64).collect();
    let x = t(v.clone(), &[1, 1, 1, 12]);
    let out = interpolate(&x, Some(&[1, 6]), None, InterpMode::Linear, false, true).unwrap();
    let mut want = vec![(0.75 * v[0] + 0.75 * v[1] + 0.25 * v[2]) / 1.75];
    for i in 1..6 {
        let j = 2 * i;
        let right = if j + 2 < 12 { v[j + 2] } else { 0.0 };
        let total = if j + 2 < 12 { 8.0 } else { 7.0 };
        want.push((v[j - 1] + 3.0 * v[j] + 3.0 * v[j + 1] + right) / total);
    }
    assert_close(&out.to_vec::<f64>().unwrap(), &want, 1e-12);
}

#[test]
fn area_averages_blocks() {
    let shape = [1, 1, 4, 4, 6];
    let v = filled(&shape, |i| ((i[2] * 31 + i[3] * 7 + i[4]) % 11) as f64);
    let out = interpolate(
        &t(v.clone(), &shape),
        Some(&[2, 2, 3]),
        None,
        InterpMode::Area,
        false,
        false,
    )
    .unwrap();
    let want = filled(&[1, 1, 2, 2, 3], |o| {
        let mut s = 0.0;
        for a in 0..2 {
            for b in 0..2 {
                for c in 0..2 {
                    let (i, j, k) = (o[2] * 2 + a, o[3] * 2 + b, o[4] * 2 + c);
                    s += v[(i * 4 + j) * 6 + k];
                }
            }
        }
        s / 8.0
    });
    assert_close(&out.to_vec::<f64>().unwrap(), &want, 1e-12);
}

#[test]
fn gradients_match_finite_differences() {
    let cases: Vec<(Vec<usize>, Vec<i64>, InterpMode, bool)> = vec![
        (vec![1, 2, 5], vec![8], InterpMode::Linear, false),
        (vec![1, 2, 3, 4], vec![5, 3], InterpMode::Linear, true),
        (vec![1, 2, 3, 4], vec![5, 7], InterpMode::Cubic, false),
        (vec![1, 2, 3, 4], vec![2, 3], InterpMode::Cubic, true),
        (
            vec![1, 1, 2, 3, 4],
            vec![3, 2, 5],
            InterpMode::Linear,
            false,
        ),
        (vec![1, 2, 3, 4], vec![5, 7], InterpMode::Nearest, false),
        (
            vec![1, 2, 3, 4],
            vec![2, 3],
            InterpMode::NearestExact,
            false,
        ),
        (vec![1, 1, 3, 4, 5], vec![2, 3, 2], InterpMode::Area, false),
    ];
    let aa = [
        (vec![1, 2, 7, 6], vec![3, 4], InterpMode::Linear, false),
        (vec![1, 2, 7, 6], vec![3, 8], InterpMode::Cubic, true),
    ];
    let cases = cases
        .into_iter()
        .map(|c| (c, false))
        .chain(aa.into_iter().map(|c| (c, true)));
    for ((shape, size, mode, align), antialias) in cases {
        let n: usize = shape.iter().product();
        let xv: Vec<f64> = (0..n).map(|i| (i as f64 * 0.71).cos()).collect();
        let mut oshape = shape[..2].to_vec();
        oshape.extend(size.iter().map(|&s| s as usize));
        let m: usize = oshape.iter().product();
        let w = t((0..m).map(|i| (i as f64 * 1.3).sin()).collect(), &oshape);
        let f = |x: &Tensor| {
            interpolate(x, Some(&size), None, mode, align, antialias)
                .unwrap()
                .mul(&w)
                .unwrap()
                .sum()
                .unwrap()
        };
        let x = leaf(&xv, &shape);
        let g = autograd::grad(&[f(&x)], std::slice::from_ref(&x), GradOptions::default()).unwrap();
        let got = g[0].as_ref().unwrap().to_vec::<f64>().unwrap();
        assert_close(&got, &fd_grad(f, &xv, &shape), 1e-6);
    }
}

#[test]
fn second_derivative_is_the_adjoint_identity() {
    // gx = Aᵀ v; d<gx, u>/dv = A u: the backward of the backward is the forward.
    let shape = [1, 2, 3, 4];
    let size = [5i64, 6];
    let x = leaf(&[0.0; 24], &shape);
    let v = leaf(
        &(0..60).map(|i| (i as f64).sin()).collect::<Vec<_>>(),
        &[1, 2, 5, 6],
    );
    let u = t((0..24).map(|i| (i as f64 * 0.3).cos()).collect(), &shape);
    for mode in [InterpMode::Linear, InterpMode::Cubic, InterpMode::Nearest] {
        let out = interpolate(&x, Some(&size), None, mode, false, false).unwrap();
        let opts = GradOptions {
            grad_outputs: vec![Some(v.clone())],
            create_graph: true,
            ..GradOptions::default()
        };
        let gx = autograd::grad(&[out], std::slice::from_ref(&x), opts).unwrap()[0]
            .clone()
            .unwrap();
        let s = gx.mul(&u).unwrap().sum().unwrap();
        let gv = autograd::grad(&[s], std::slice::from_ref(&v), GradOptions::default()).unwrap();
        let want = interpolate(&u, Some(&size), None, mode, false, false).unwrap();
        assert_close(
            &gv[0].as_ref().unwrap().to_vec::<f64>().unwrap(),
            &want.to_vec::<f64>().unwrap(),
            1e-12,
        );
    }
}

#[test]
fn float32_follows_float64() {
    let v: Vec<f64> = (0..2 * 3 * 5 * 6)
        .map(|i| (i as f64 * 0.17).sin())
        .collect();
    let x64 = t(v, &[2, 3, 5, 6]);
    let x32 = x64.to_dtype(ferrograd::DType::Float32).unwrap();
    for mode in [InterpMode::Linear, InterpMode::Cubic] {
        let a = interpolate(&x64, None, Some(&[1.7, 0.6]), mode, false, false).unwrap();
        let b = interpolate(&x32, None, Some(&[1.7, 0.6]), mode, false, false).unwrap();
        assert_close(
            &b.to_vec::<f64>().unwrap(),
            &a.to_vec::<f64>().unwrap(),
            1e-5,
        );
    }
}

#[test]
fn pixel_shuffle_moves_channel_blocks_to_pixels() {
    let (c, r, h, w) = (2, 3, 2, 2);
    let shape = [1, c * r * r, h, w];
    let v: Vec<f64> = (0..shape.iter().product::<usize>())
        .map(|i| i as f64)
        .collect();
    let x = t(v.clone(), &shape);
    let out = pixel_shuffle(&x, r as i64).unwrap();
    assert_eq!(out.shape(), &[1, c, h * r, w * r]);
    let want = filled(&[1, c, h * r, w * r], |o| {
        let (ci, y, z) = (o[1], o[2], o[3]);
        let ch = ci * r * r + (y % r) * r + z % r;
        v[(ch * h + y / r) * w + z / r]
    });
    assert_eq!(out.to_vec::<f64>().unwrap(), want);
    let back = pixel_unshuffle(&out, r as i64).unwrap();
    assert_eq!(back.shape(), &shape);
    assert_eq!(back.to_vec::<f64>().unwrap(), v);
}

#[test]
fn shuffle_gradients_are_the_inverse_permutations() {
    let x = leaf(&(0..32).map(f64::from).collect::<Vec<_>>(), &[2, 4, 2, 2]);
    let w = t(
        (0..32).map(|i| i as f64 * 0.5 - 3.0).collect(),
        &[2, 1, 4, 4],
    );
    let out = pixel_shuffle(&x, 2).unwrap();
    let g = autograd::grad(
        &[out.mul(&w).unwrap().sum().unwrap()],
        std::slice::from_ref(&x),
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(
        g[0].as_ref().unwrap().to_vec::<f64>().unwrap(),
        pixel_unshuffle(&w, 2).unwrap().to_vec::<f64>().unwrap()
    );
    let y = channel_shuffle(&x, 2).unwrap();
    let w2 = t((0..32).map(|i| (i * i % 7) as f64).collect(), &[2, 4, 2, 2]);
    let g = autograd::grad(
        &[y.mul(&w2).unwrap().sum().unwrap()],
        std::slice::from_ref(&x),
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(
        g[0].as_ref().unwrap().to_vec::<f64>().unwrap(),
        channel_shuffle(&w2, 2).unwrap().to_vec::<f64>().unwrap()
    );
}

#[test]
fn channel_shuffle_interleaves_groups() {
    let x = t((0..6).map(f64::from).collect(), &[1, 6, 1]);
    let out = channel_shuffle(&x, 2).unwrap();
    assert_eq!(
        out.to_vec::<f64>().unwrap(),
        vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    );
}

#[test]
fn bad_input_gives_torch_errors() {
    let x = t(vec![0.0; 12], &[1, 1, 3, 4]);
    let err = |r: ferrograd::error::Result<Tensor>| r.unwrap_err().to_string();
    assert!(err(interpolate(&x, Some(&[0, 2]), None, InterpMode::Linear, false, false)).contains(
        "Input and output sizes should be greater than 0, but got input (H: 3, W: 4) output (H: 0, W: 2)"
    ));
    assert!(err(interpolate(
        &x,
        None,
        Some(&[0.1, 1.0]),
        InterpMode::Nearest,
        false,
        false
    ))
    .contains("output (H: 0, W: 4)"));
    assert!(err(interpolate(
        &x,
        Some(&[2]),
        None,
        InterpMode::Linear,
        false,
        false
    ))
    .contains("It is expected input_size equals to 3"));
    assert!(err(interpolate(
        &x,
        Some(&[2, 2]),
        Some(&[2.0, 2.0]),
        InterpMode::Linear,
        false,
        false
    ))
    .contains("exactly one of output_size and scale_factors"));
    let i = Tensor::from_vec(vec![0i64; 12], &[1, 1, 3, 4]).unwrap();
    assert!(err(interpolate(
        &i,
        Some(&[2, 2]),
        None,
        InterpMode::Linear,
        false,
        false
    ))
    .contains("not implemented for 'Long'"));
    assert!(err(pixel_shuffle(&x, 2)).contains(
        "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)=1 is not divisible by 4"
    ));
    assert!(err(pixel_shuffle(&x, 0)).contains("expects a positive upscale_factor, but got 0"));
    assert!(err(pixel_unshuffle(&x, 2)).contains(
        "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=3 is not divisible by 2"
    ));
    assert!(err(channel_shuffle(&x, 3))
        .contains("Number of channels must be divisible by groups. Got 1 channels and 3 groups."));
    assert!(err(channel_shuffle(&t(vec![0.0; 4], &[2, 2]), 2))
        .contains("channel_shuffle expects input with > 2 dims, but got input with sizes [2, 2]"));
}
