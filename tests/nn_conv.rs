//! Convolution and pooling from Rust: forward against direct loops, first and second
//! derivatives against float64 finite differences, and errors instead of panics.

mod common;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::conv::ConvPadding;
use ferrograd::{ErrorKind, Tensor};

fn data(n: usize, seed: f64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i as f64 + 1.0) * 0.731 + seed).sin() * 1.3)
        .collect()
}

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

/// Geometry of the direct-loop reference: stride, padding, dilation per dim (3 dims).
struct Geo {
    stride: [usize; 3],
    pad: [usize; 3],
    dil: [usize; 3],
    groups: usize,
}

/// 3-d cross-correlation by definition: x (N, C, D, H, W), w (O, C/g, kd, kh, kw).
fn conv3d_loops(
    x: &[f64],
    xs: [usize; 5],
    w: &[f64],
    ws: [usize; 5],
    g: &Geo,
) -> (Vec<f64>, [usize; 5]) {
    let [n, c, d, h, wd] = xs;
    let [o, cg, kd, kh, kw] = ws;
    let size = |i: usize, k: usize, s: usize| {
        (i + 2 * g.pad[s] - g.dil[s] * (k - 1) - 1) / g.stride[s] + 1
    };
    let (od, oh, ow) = (size(d, kd, 0), size(h, kh, 1), size(wd, kw, 2));
    let og = o / g.groups;
    let mut y = vec![0.0; n * o * od * oh * ow];
    let at = |v: usize, k: usize, s: usize| {
        (v * g.stride[s] + k * g.dil[s]) as isize - g.pad[s] as isize
    };
    for b in 0..n {
        for oc in 0..o {
            let grp = oc / og;
            for (i, j, l) in
                (0..od).flat_map(|i| (0..oh).flat_map(move |j| (0..ow).map(move |l| (i, j, l))))
            {
                let mut acc = 0.0;
                for ci in 0..cg {
                    for a in 0..kd {
                        for e in 0..kh {
                            for f in 0..kw {
                                let (p, q, r) = (at(i, a, 0), at(j, e, 1), at(l, f, 2));
                                if p < 0
                                    || q < 0
                                    || r < 0
                                    || p >= d as isize
                                    || q >= h as isize
                                    || r >= wd as isize
                                {
                                    continue;
                                }
                                let xi = (((b * c + grp * cg + ci) * d + p as usize) * h
                                    + q as usize)
                                    * wd
                                    + r as usize;
                                let wi = (((oc * cg + ci) * kd + a) * kh + e) * kw + f;
                                acc += x[xi] * w[wi];
                            }
                        }
                    }
                }
                y[(((b * o + oc) * od + i) * oh + j) * ow + l] = acc;
            }
        }
    }
    (y, [n, o, od, oh, ow])
}

#[test]
fn conv2d_matches_direct_loops() {
    for (stride, pad, dil, groups) in [
        (1i64, 0i64, 1i64, 1usize),
        (2, 1, 1, 1),
        (1, 2, 2, 2),
        (2, 1, 1, 4),
    ] {
        let (xs, ws) = ([2, 4, 7, 6], [4, 4 / groups, 3, 2]);
        let x = data(xs.iter().product(), 0.1);
        let w = data(ws.iter().product(), 0.7);
        let got = t(&x, &xs)
            .conv2d(
                &t(&w, &ws),
                None,
                &[stride],
                ConvPadding::Explicit(&[pad]),
                &[dil],
                groups as i64,
            )
            .unwrap();
        let g = Geo {
            stride: [1, stride as usize, stride as usize],
            pad: [0, pad as usize, pad as usize],
            dil: [1, dil as usize, dil as usize],
            groups,
        };
        let (want, shape) = conv3d_loops(&x, [2, 4, 1, 7, 6], &w, [4, 4 / groups, 1, 3, 2], &g);
        assert_eq!(got.shape(), &[shape[0], shape[1], shape[3], shape[4]]);
        assert_close(&got.to_vec::<f64>().unwrap(), &want, 1e-12);
    }
}

#[test]
fn conv1d_and_conv3d_match_direct_loops() {
    let x = data(2 * 3 * 9, 0.2);
    let w = data(4 * 3 * 3, 0.3);
    let got = t(&x, &[2, 3, 9])
        .conv1d(
            &t(&w, &[4, 3, 3]),
            None,
            &[2],
            ConvPadding::Explicit(&[1]),
            &[2],
            1,
        )
        .unwrap();
    let g = Geo {
        stride: [1, 1, 2],
        pad: [0, 0, 1],
        dil: [1, 1, 2],
        groups: 1,
    };
    let (want, _) = conv3d_loops(&x, [2, 3, 1, 1, 9], &w, [4, 3, 1, 1, 3], &g);
    assert_close(&got.to_vec::<f64>().unwrap(), &want, 1e-12);

    let x = data(2 * 2 * 4 * 5 * 4, 0.4);
    let w = data(3 * 2 * 2 * 3 * 2, 0.5);
    let got = t(&x, &[2, 2, 4, 5, 4])
        .conv3d(
            &t(&w, &[3, 2, 2, 3, 2]),
            None,
            &[1, 2, 1],
            ConvPadding::Explicit(&[1, 0, 1]),
            &[2, 1, 1],
            1,
        )
        .unwrap();
    let g = Geo {
        stride: [1, 2, 1],
        pad: [1, 0, 1],
        dil: [2, 1, 1],
        groups: 1,
    };
    let (want, shape) = conv3d_loops(&x, [2, 2, 4, 5, 4], &w, [3, 2, 2, 3, 2], &g);
    assert_eq!(got.shape(), &shape);
    assert_close(&got.to_vec::<f64>().unwrap(), &want, 1e-12);
}

#[test]
fn same_padding_keeps_the_size_and_puts_the_odd_extra_after() {
    let x = data(2 * 7, 0.6);
    let w = data(2 * 2 * 4, 0.9);
    let got = t(&x, &[1, 2, 7])
        .conv1d(&t(&w, &[2, 2, 4]), None, &[1], ConvPadding::Same, &[1], 1)
        .unwrap();
    assert_eq!(got.shape(), &[1, 2, 7]);
    // total padding 3: 1 before, 2 after, as an explicitly padded input computes it
    let mut padded = vec![0.0; 2 * 10];
    for c in 0..2 {
        padded[c * 10 + 1..c * 10 + 8].copy_from_slice(&x[c * 7..c * 7 + 7]);
    }
    let want = t(&padded, &[1, 2, 10])
        .conv1d(&t(&w, &[2, 2, 4]), None, &[1], ConvPadding::Valid, &[1], 1)
        .unwrap();
    assert_close(
        &got.to_vec::<f64>().unwrap(),
        &want.to_vec::<f64>().unwrap(),
        1e-12,
    );
}

/// A scalar of a convolution's output with fixed, uneven weights, so every gradient matters.
fn weighted_sum(y: &Tensor) -> Tensor {
    let n = y.numel();
    y.mul(&t(&data(n, 2.0), y.shape())).unwrap().sum().unwrap()
}

fn grads(loss: &Tensor, inputs: &[Tensor], create_graph: bool) -> Vec<Tensor> {
    let opts = GradOptions {
        create_graph,
        ..GradOptions::default()
    };
    autograd::grad(std::slice::from_ref(loss), inputs, opts)
        .unwrap()
        .into_iter()
        .map(|g| g.unwrap())
        .collect()
}

#[test]
fn conv_and_conv_transpose_gradients_match_finite_differences() {
    let (xs, ws) = ([2usize, 4, 5, 4], [4usize, 2, 3, 2]);
    let (xv, wv, bv) = (data(160, 0.1), data(48, 0.2), data(4, 0.3));
    let conv = |x: &Tensor, w: &Tensor, b: &Tensor| {
        x.conv2d(
            w,
            Some(b),
            &[2, 1],
            ConvPadding::Explicit(&[1, 0]),
            &[1, 2],
            2,
        )
        .unwrap()
    };
    let (x, w, b) = (leaf(&xv, &xs), leaf(&wv, &ws), leaf(&bv, &[4]));
    let g = grads(
        &weighted_sum(&conv(&x, &w, &b)),
        &[x.clone(), w.clone(), b.clone()],
        false,
    );
    let fx = fd_grad(
        |x| weighted_sum(&conv(x, &t(&wv, &ws), &t(&bv, &[4]))),
        &xv,
        &xs,
    );
    let fw = fd_grad(
        |w| weighted_sum(&conv(&t(&xv, &xs), w, &t(&bv, &[4]))),
        &wv,
        &ws,
    );
    let fb = fd_grad(
        |b| weighted_sum(&conv(&t(&xv, &xs), &t(&wv, &ws), b)),
        &bv,
        &[4],
    );
    assert_close(&g[0].to_vec::<f64>().unwrap(), &fx, 1e-6);
    assert_close(&g[1].to_vec::<f64>().unwrap(), &fw, 1e-6);
    assert_close(&g[2].to_vec::<f64>().unwrap(), &fb, 1e-6);

    // transposed: weight (C_in, C_out / groups, k...)
    let tconv = |x: &Tensor, w: &Tensor| {
        x.conv_transpose(w, None, &[2], &[1], &[1], 2, &[1])
            .unwrap()
    };
    let (xs, ws) = ([2usize, 4, 3, 3], [4usize, 1, 2, 3]);
    let (xv, wv) = (data(72, 0.4), data(24, 0.5));
    let (x, w) = (leaf(&xv, &xs), leaf(&wv, &ws));
    let y = tconv(&x, &w);
    assert_eq!(y.shape(), &[2, 2, 5, 6]);
    let g = grads(&weighted_sum(&y), &[x.clone(), w.clone()], false);
    let fx = fd_grad(|x| weighted_sum(&tconv(x, &t(&wv, &ws))), &xv, &xs);
    let fw = fd_grad(|w| weighted_sum(&tconv(&t(&xv, &xs), w)), &wv, &ws);
    assert_close(&g[0].to_vec::<f64>().unwrap(), &fx, 1e-6);
    assert_close(&g[1].to_vec::<f64>().unwrap(), &fw, 1e-6);
}

#[test]
fn conv_second_derivatives_match_finite_differences() {
    // f(x, w) = sum(cos-weighted (dL/dx)^2) with L the weighted sum of conv(x, w): its gradient
    // in w goes through the backward's own graph.
    let (xs, ws) = ([1usize, 2, 5, 5], [3usize, 2, 2, 3]);
    let (xv, wv) = (data(50, 0.7), data(36, 0.8));
    let conv = |x: &Tensor, w: &Tensor| {
        x.conv2d(w, None, &[1, 2], ConvPadding::Explicit(&[1]), &[2, 1], 1)
            .unwrap()
    };
    let f = |x: &Tensor, w: &Tensor, create: bool| {
        let x = x.detach().requires_grad_(true).unwrap();
        let gx = grads(
            &weighted_sum(&conv(&x, w)),
            std::slice::from_ref(&x),
            create,
        )
        .remove(0);
        gx.mul(&gx)
            .unwrap()
            .mul(&t(&data(50, 3.0), &xs))
            .unwrap()
            .sum()
            .unwrap()
    };
    let w = leaf(&wv, &ws);
    let s = f(&t(&xv, &xs), &w, true);
    let got = grads(&s, std::slice::from_ref(&w), false).remove(0);
    let want = fd_grad(|w| f(&t(&xv, &xs), w, false), &wv, &ws);
    assert_close(&got.to_vec::<f64>().unwrap(), &want, 1e-5);
}

#[test]
fn max_pool_matches_direct_loops_and_its_gradient_is_a_scatter() {
    let xs = [2usize, 3, 5, 6];
    let xv = data(180, 0.9);
    let (y, idx) = t(&xv, &xs)
        .max_pool2d(&[3, 2], &[2], &[1, 0], &[1, 2], true)
        .unwrap();
    assert_eq!(y.shape(), &[2, 3, 3, 3]);
    let yv = y.to_vec::<f64>().unwrap();
    let iv = idx.to_vec::<i64>().unwrap();
    for p in 0..6 {
        for (i, j) in (0..3).flat_map(|i| (0..3).map(move |j| (i, j))) {
            let mut best = f64::NEG_INFINITY;
            for a in 0..3 {
                for b in 0..2 {
                    let (r, c) = ((2 * i + a) as isize - 1, 2 * j + 2 * b);
                    if r >= 0 && (r as usize) < 5 && c < 6 {
                        best = best.max(xv[p * 30 + r as usize * 6 + c]);
                    }
                }
            }
            let o = p * 9 + i * 3 + j;
            assert_eq!(yv[o], best);
            assert_eq!(xv[p * 30 + iv[o] as usize], best);
        }
    }
    let pool = |x: &Tensor| {
        x.max_pool2d(&[3, 2], &[2], &[1, 0], &[1, 2], true)
            .unwrap()
            .0
    };
    let x = leaf(&xv, &xs);
    let g = grads(&weighted_sum(&pool(&x)), std::slice::from_ref(&x), false).remove(0);
    assert_close(
        &g.to_vec::<f64>().unwrap(),
        &fd_grad(|x| weighted_sum(&pool(x)), &xv, &xs),
        1e-6,
    );
}

#[test]
fn avg_and_adaptive_pool_gradients_match_finite_differences() {
    let xs = [1usize, 2, 5, 7];
    let xv = data(70, 1.1);
    type Pool = Box<dyn Fn(&Tensor) -> Tensor>;
    let pools: Vec<Pool> = vec![
        Box::new(|x| x.avg_pool2d(&[3], &[2], &[1], true, false, None).unwrap()),
        Box::new(|x| {
            x.avg_pool2d(&[2, 3], &[], &[0], false, true, Some(4))
                .unwrap()
        }),
        Box::new(|x| {
            x.avg_pool3d(&[1, 2, 2], &[1, 2, 1], &[0, 1, 0], false, true, None)
                .unwrap()
        }),
        Box::new(|x| x.adaptive_avg_pool2d(&[3, 4]).unwrap()),
        Box::new(|x| x.adaptive_max_pool2d(&[2, 3]).unwrap().0),
        Box::new(|x| x.max_pool3d(&[2], &[1], &[1], &[1], false).unwrap().0),
    ];
    for pool in &pools {
        let x = leaf(&xv, &xs);
        let g = grads(&weighted_sum(&pool(&x)), std::slice::from_ref(&x), false).remove(0);
        assert_close(
            &g.to_vec::<f64>().unwrap(),
            &fd_grad(|x| weighted_sum(&pool(x)), &xv, &xs),
            1e-6,
        );
    }
    // adaptive average of 5 into 3: windows [0,2), [1,4), [3,5)
    let x = t(&[1.0, 2.0, 4.0, 8.0, 16.0], &[1, 1, 5]);
    let y = x.adaptive_avg_pool1d(3).unwrap();
    assert_close(&y.to_vec::<f64>().unwrap(), &[1.5, 14.0 / 3.0, 12.0], 1e-15);
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let x = t(&data(2 * 3 * 8 * 8, 0.0), &[2, 3, 8, 8]);
    let w = t(&data(4 * 3 * 3 * 3, 0.0), &[4, 3, 3, 3]);
    let cases = [
        x.conv2d(&w, None, &[0], ConvPadding::Valid, &[1], 1).err(),
        x.conv2d(&w, None, &[1], ConvPadding::Explicit(&[-1]), &[1], 1)
            .err(),
        x.conv2d(&w, None, &[1], ConvPadding::Valid, &[1], 2).err(),
        x.conv2d(
            &t(&[0.0; 4 * 3 * 81], &[4, 3, 9, 9]),
            None,
            &[1],
            ConvPadding::Valid,
            &[1],
            1,
        )
        .err(),
        x.conv1d(&w, None, &[1], ConvPadding::Valid, &[1], 1).err(),
        x.conv_transpose(&w, None, &[1], &[0], &[1], 1, &[1]).err(),
        x.max_pool2d(&[9], &[], &[0], &[1], false).err(),
        x.avg_pool2d(&[3], &[], &[2], false, true, None).err(),
        x.adaptive_avg_pool2d(&[2, 3, 4]).err(),
    ];
    for (i, e) in cases.into_iter().enumerate() {
        let e = e.unwrap_or_else(|| panic!("case {i} did not fail"));
        assert_eq!(e.kind(), ErrorKind::Runtime, "case {i}: {e}");
    }
    let e = x
        .conv2d(
            &t(&[0.0; 4 * 3 * 81], &[4, 3, 9, 9]),
            None,
            &[1],
            ConvPadding::Valid,
            &[1],
            1,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Calculated padded input size per channel: (8 x 8). Kernel size: (9 x 9). Kernel size can't be greater than actual input size"
    );
}

#[test]
fn stride_one_input_gradient_matches_finite_differences() {
    // 'same' padding at stride 1: the input gradient runs as a convolution with the flipped
    // weight (dilated, grouped, odd total padding).
    let (xs, ws) = ([2usize, 4, 5, 6], [6usize, 2, 2, 2]);
    let (xv, wv) = (data(240, 1.3), data(48, 1.7));
    let conv = |x: &Tensor, w: &Tensor| {
        x.conv2d(w, None, &[1], ConvPadding::Same, &[1, 2], 2)
            .unwrap()
    };
    let (x, w) = (leaf(&xv, &xs), leaf(&wv, &ws));
    let y = conv(&x, &w);
    assert_eq!(y.shape(), &[2, 6, 5, 6]);
    let g = grads(&weighted_sum(&y), &[x.clone(), w.clone()], false);
    let fx = fd_grad(|x| weighted_sum(&conv(x, &t(&wv, &ws))), &xv, &xs);
    let fw = fd_grad(|w| weighted_sum(&conv(&t(&xv, &xs), w)), &wv, &ws);
    assert_close(&g[0].to_vec::<f64>().unwrap(), &fx, 1e-6);
    assert_close(&g[1].to_vec::<f64>().unwrap(), &fw, 1e-6);
}

#[test]
fn max_unpool_scatters_values_and_gathers_gradients() {
    // Indices chosen by hand in a 2x3 plane (per plane of a (2, 1, 1, 2) input).
    let x = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 1, 1, 2]);
    let idx = Tensor::from_vec(vec![5i64, 0, 2, 3], &[2, 1, 1, 2]).unwrap();
    let y = x.max_unpool(&idx, &[2, 3]).unwrap();
    assert_eq!(y.shape(), &[2, 1, 2, 3]);
    assert_eq!(
        y.to_vec::<f64>().unwrap(),
        vec![2.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0]
    );
    let w: Vec<f64> = (0..12).map(|i| i as f64 * 0.5 - 1.0).collect();
    let wt = Tensor::from_vec(w.clone(), &[2, 1, 2, 3]).unwrap();
    let f = |t: &Tensor| {
        t.max_unpool(&idx, &[2, 3])
            .unwrap()
            .mul(&wt)
            .unwrap()
            .sum()
            .unwrap()
    };
    let g = autograd::grad(&[f(&x)], std::slice::from_ref(&x), GradOptions::default()).unwrap()[0]
        .clone()
        .unwrap();
    assert_close(
        &g.to_vec::<f64>().unwrap(),
        &fd_grad(f, &[1.0, 2.0, 3.0, 4.0], &[2, 1, 1, 2]),
        1e-8,
    );
    let bad = Tensor::from_vec(vec![6i64, 0, 2, 3], &[2, 1, 1, 2]).unwrap();
    assert_eq!(
        x.max_unpool(&bad, &[2, 3]).unwrap_err().kind(),
        ErrorKind::Runtime
    );
}

#[test]
fn lp_pool_and_adaptive_pool3d_closed_forms() {
    let xs: Vec<f64> = (0..16).map(|i| (i as f64 - 7.5) * 0.3).collect();
    let x = leaf(&xs, &[1, 1, 4, 4]);
    // p = 2 over 2x2 windows: the Euclidean norm of each window
    let y = x
        .lp_pool(2.0, &[2, 2], &[], false)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    for (k, &(r, c)) in [(0, 0), (0, 2), (2, 0), (2, 2)].iter().enumerate() {
        let s: f64 = [(0, 0), (0, 1), (1, 0), (1, 1)]
            .iter()
            .map(|&(a, b)| xs[(r + a) * 4 + c + b].powi(2))
            .sum();
        assert!((y[k] - s.sqrt()).abs() < 1e-12);
    }
    // adaptive average to (1, 2, 1) of a (1, 1, 2, 4, 2) volume: means over halves of dim 3
    let v = leaf(&xs, &[1, 1, 2, 4, 2]);
    let a = v
        .adaptive_avg_pool3d(&[1, 2, 1])
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let half = |h: usize| -> f64 {
        let mut s = 0.0;
        for d in 0..2 {
            for r in 2 * h..2 * h + 2 {
                s += xs[d * 8 + r * 2] + xs[d * 8 + r * 2 + 1];
            }
        }
        s / 8.0
    };
    assert_close(&a, &[half(0), half(1)], 1e-14);
    let f = |t: &Tensor| {
        t.adaptive_avg_pool3d(&[1, 2, 1])
            .unwrap()
            .square()
            .unwrap()
            .sum()
            .unwrap()
    };
    let g = autograd::grad(&[f(&v)], std::slice::from_ref(&v), GradOptions::default()).unwrap()[0]
        .clone()
        .unwrap();
    assert_close(
        &g.to_vec::<f64>().unwrap(),
        &fd_grad(f, &xs, &[1, 1, 2, 4, 2]),
        1e-7,
    );
}

#[test]
fn float32_many_channel_3x3_layers_match_direct_loops() {
    // Shapes the float32 fast paths take (>= 32 channels, 3x3, stride 1): paddings 0..2,
    // odd sizes and groups, against the float64 definition.
    for (xs, ws, pad, groups) in [
        ([2, 32, 7, 6], [34, 32, 3, 3], [1usize, 1usize], 1usize),
        ([1, 64, 5, 4], [64, 32, 3, 3], [2, 0], 2),
        ([1, 32, 3, 9], [32, 32, 3, 3], [0, 2], 1),
    ] {
        let x = data(xs.iter().product(), 0.3);
        let w = data(ws.iter().product(), 0.9);
        let x32 = t(&x, &xs).to_dtype(ferrograd::DType::Float32).unwrap();
        let w32 = t(&w, &ws).to_dtype(ferrograd::DType::Float32).unwrap();
        let got = x32
            .conv2d(
                &w32,
                None,
                &[1],
                ConvPadding::Explicit(&[pad[0] as i64, pad[1] as i64]),
                &[1],
                groups as i64,
            )
            .unwrap();
        let g = Geo {
            stride: [1, 1, 1],
            pad: [0, pad[0], pad[1]],
            dil: [1, 1, 1],
            groups,
        };
        let x5 = [xs[0], xs[1], 1, xs[2], xs[3]];
        let (want, shape) = conv3d_loops(&x, x5, &w, [ws[0], ws[1], 1, 3, 3], &g);
        assert_eq!(got.shape(), &[shape[0], shape[1], shape[3], shape[4]]);
        // Within 16 float32 ulps of the sum of the products' magnitudes, per output.
        let abs = |v: &[f64]| v.iter().map(|e| e.abs()).collect::<Vec<_>>();
        let (mag, _) = conv3d_loops(&abs(&x), x5, &abs(&w), [ws[0], ws[1], 1, 3, 3], &g);
        let got = got.to_vec::<f32>().unwrap();
        for ((&a, &b), &m) in got.iter().zip(&want).zip(&mag) {
            let bound = 16.0 * f32::EPSILON as f64 * m;
            assert!((a as f64 - b).abs() <= bound, "{a} vs {b}");
        }
    }
}

#[test]
fn float32_few_channel_layers_match_direct_loops_and_float64_gradients() {
    // Shapes the float32 direct kernels take (stride 1, few channels): partial blocks of output
    // channels, positions and reduction items, dilation and groups, against the float64
    // definition; the gradients against the float64 path.
    // The strided ones run as stride-1 layers over the input's phases.
    let one = [1usize, 1usize];
    for (xs, ws, stride, pad, dil, groups) in [
        ([3, 16, 11, 13], [10, 16, 3, 3], one, one, one, 1usize),
        ([2, 1, 12, 12], [6, 1, 5, 5], one, [0, 0], one, 1),
        ([2, 8, 9, 7], [6, 4, 3, 2], one, [2, 1], [2, 1], 2),
        ([2, 6, 15, 14], [8, 6, 4, 4], [2, 2], one, one, 1),
        ([2, 4, 13, 11], [6, 2, 6, 4], [3, 2], [1, 0], one, 2),
    ] {
        let x = data(xs.iter().product(), 0.3);
        let w = data(ws.iter().product(), 0.9);
        let run = |dtype: ferrograd::DType| {
            let xt = t(&x, &xs)
                .to_dtype(dtype)
                .unwrap()
                .requires_grad_(true)
                .unwrap();
            let wt = t(&w, &ws)
                .to_dtype(dtype)
                .unwrap()
                .requires_grad_(true)
                .unwrap();
            let y = xt
                .conv2d(
                    &wt,
                    None,
                    &[stride[0] as i64, stride[1] as i64],
                    ConvPadding::Explicit(&[pad[0] as i64, pad[1] as i64]),
                    &[dil[0] as i64, dil[1] as i64],
                    groups as i64,
                )
                .unwrap();
            let gs = grads(&weighted_sum(&y), &[xt, wt], false);
            let f64s = |t: &Tensor| {
                t.to_dtype(ferrograd::DType::Float64)
                    .unwrap()
                    .to_vec::<f64>()
                    .unwrap()
            };
            (f64s(&y), f64s(&gs[0]), f64s(&gs[1]))
        };
        let (y32, gx32, gw32) = run(ferrograd::DType::Float32);
        let (_, gx64, gw64) = run(ferrograd::DType::Float64);
        let g = Geo {
            stride: [1, stride[0], stride[1]],
            pad: [0, pad[0], pad[1]],
            dil: [1, dil[0], dil[1]],
            groups,
        };
        let x5 = [xs[0], xs[1], 1, xs[2], xs[3]];
        let w5 = [ws[0], ws[1], 1, ws[2], ws[3]];
        let (want, _) = conv3d_loops(&x, x5, &w, w5, &g);
        let abs = |v: &[f64]| v.iter().map(|e| e.abs()).collect::<Vec<_>>();
        let (mag, _) = conv3d_loops(&abs(&x), x5, &abs(&w), w5, &g);
        assert_eq!(y32.len(), want.len());
        for ((&a, &b), &m) in y32.iter().zip(&want).zip(&mag) {
            assert!(
                (a - b).abs() <= 16.0 * f32::EPSILON as f64 * m,
                "{a} vs {b}"
            );
        }
        for (a, b) in [(&gx32, &gx64), (&gw32, &gw64)] {
            let scale = b.iter().fold(0.0f64, |s, v| s.max(v.abs()));
            for (&p, &q) in a.iter().zip(b.iter()) {
                assert!((p - q).abs() <= 1e-5 * scale, "{p} vs {q}");
            }
        }
    }
}
