//! `embedding_bag` at sizes that take the parallel kernels (bags split among threads forward,
//! table rows split among threads backward): outputs and weight gradients against closed
//! forms summed here in position order, bitwise the same at 1, 2 and 3 threads, with sample
//! weights, padding, frequency scaling, empty bags and an unused tail of indices.

mod common;

use common::{assert_close, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::sparse::{embedding_bag, BagMode};
use ferrograd::{DType, Tensor};

const NUM: usize = 300;
const D: usize = 70; // one full block of 64 f32 columns and a partial one

struct Case {
    idx: Vec<usize>,
    offs: Vec<usize>,
    psw: Vec<f64>,
    include_last: bool,
}

fn case() -> Case {
    let mut s = 12345u64;
    let mut next = |m: usize| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) % m as u64) as usize
    };
    let idx: Vec<usize> = (0..6000).map(|_| next(NUM)).collect();
    // Bags of 0..40 positions; the last offset leaves an unused tail with include_last_offset.
    let mut offs = vec![0usize];
    while *offs.last().unwrap() < 5900 {
        let step = next(40);
        offs.push(offs.last().unwrap() + step);
    }
    let psw = (0..idx.len())
        .map(|i| ((i % 13) as f64 - 6.0) / 7.0)
        .collect();
    Case {
        idx,
        offs,
        psw,
        include_last: true,
    }
}

/// Output rows and weight gradient (of Σ out · g) computed directly.
fn closed_form(
    c: &Case,
    w: &[f64],
    g: &[f64],
    mode: BagMode,
    psw: bool,
    pad: Option<usize>,
    freq: bool,
) -> (Vec<f64>, Vec<f64>) {
    let nb = c.offs.len() - 1;
    // Counts of the indices in bags (the unused tail after the last offset not counted, as
    // torch's float64 kernel does).
    let mut counts = vec![0.0; NUM];
    for &r in &c.idx[..*c.offs.last().unwrap()] {
        counts[r] += 1.0;
    }
    let mut out = vec![0.0; nb * D];
    let mut gw = vec![0.0; NUM * D];
    for b in 0..nb {
        let pos: Vec<usize> = (c.offs[b]..c.offs[b + 1])
            .filter(|&p| Some(c.idx[p]) != pad)
            .collect();
        let n = pos.len().max(1) as f64;
        for &p in &pos {
            let r = c.idx[p];
            let mut s = if psw { c.psw[p] } else { 1.0 };
            if mode == BagMode::Mean {
                s /= n;
            }
            let gs = if freq { s / counts[r] } else { s };
            for k in 0..D {
                out[b * D + k] += s * w[r * D + k];
                gw[r * D + k] += gs * g[b * D + k];
            }
        }
    }
    (out, gw)
}

#[test]
fn parallel_bags_and_row_split_gradient_match_closed_forms_at_any_thread_count() {
    let c = case();
    let nb = c.offs.len() - 1;
    let wv: Vec<f64> = (0..NUM * D)
        .map(|i| ((i * 7919) % 1000) as f64 / 500.0 - 1.0)
        .collect();
    let gv: Vec<f64> = (0..nb * D)
        .map(|i| ((i * 104729) % 997) as f64 / 400.0 - 1.2)
        .collect();
    let idx = Tensor::from_vec(c.idx.iter().map(|&i| i as i64).collect(), &[c.idx.len()]).unwrap();
    let offs =
        Tensor::from_vec(c.offs.iter().map(|&i| i as i64).collect(), &[c.offs.len()]).unwrap();
    let before = autograd::get_num_threads();
    let settings = [
        (BagMode::Sum, false, None, false),
        (BagMode::Sum, true, Some(7), false),
        (BagMode::Mean, false, None, false),
        (BagMode::Mean, false, Some(3), true),
        (BagMode::Sum, false, None, true),
    ];
    for dtype in [DType::Float64, DType::Float32] {
        let tol = if dtype == DType::Float64 { 1e-12 } else { 1e-4 };
        for &(mode, use_psw, pad, freq) in &settings {
            let (want_out, want_gw) = closed_form(&c, &wv, &gv, mode, use_psw, pad, freq);
            let mut first: Option<(Vec<f64>, Vec<f64>)> = None;
            for threads in [1, 2, 3] {
                autograd::set_num_threads(threads).unwrap();
                let w = leaf(&wv, &[NUM, D]).to_dtype(dtype).unwrap();
                let w = w.detach().requires_grad_(true).unwrap();
                let p = Tensor::from_vec(c.psw.clone(), &[c.psw.len()])
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let out = embedding_bag(
                    &w,
                    &idx,
                    &offs,
                    mode,
                    use_psw.then_some(&p),
                    c.include_last,
                    pad,
                    freq,
                )
                .unwrap();
                let g = Tensor::from_vec(gv.clone(), &[nb, D])
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let grads = autograd::grad(
                    std::slice::from_ref(&out),
                    std::slice::from_ref(&w),
                    GradOptions {
                        grad_outputs: vec![Some(g)],
                        ..Default::default()
                    },
                )
                .unwrap();
                let got_out = out.to_vec::<f64>().unwrap();
                let got_gw = grads[0].as_ref().unwrap().to_vec::<f64>().unwrap();
                assert_close(&got_out, &want_out, tol);
                assert_close(&got_gw, &want_gw, tol);
                match &first {
                    None => first = Some((got_out, got_gw)),
                    Some((o, gw)) => {
                        assert_eq!(o, &got_out, "{mode:?} at {threads} threads");
                        assert_eq!(gw, &got_gw, "{mode:?} at {threads} threads");
                    }
                }
            }
        }
    }
    autograd::set_num_threads(before).unwrap();
}
