//! Recurrent layers from Rust: the fused LSTM and GRU steps against their closed forms and
//! against finite differences (first and second derivatives), a two-layer bidirectional LSTM
//! against a step-by-step composition of plain ops, and shape errors.

mod common;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::rnn::{self, CellWeights, RnnConfig, RnnMode};
use ferrograd::{ErrorKind, Tensor};

fn vals(n: usize, seed: f64) -> Vec<f64> {
    (0..n).map(|i| ((i as f64 + 1.0) * seed).sin()).collect()
}

fn t(n: &[usize], seed: f64) -> Tensor {
    Tensor::from_vec(vals(n.iter().product(), seed), n).unwrap()
}

fn sig(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn lstm_step_matches_closed_form() {
    let (n, h) = (2, 3);
    let g = t(&[n, 4 * h], 0.7);
    let c = t(&[n, h], 1.3);
    let (hy, cy) = rnn::lstm_pointwise(&g, &c).unwrap();
    let (gv, cv) = (g.to_vec::<f64>().unwrap(), c.to_vec::<f64>().unwrap());
    let (mut eh, mut ec) = (vec![], vec![]);
    for b in 0..n {
        for j in 0..h {
            let r = |k: usize| gv[b * 4 * h + k * h + j];
            let cnew = sig(r(1)) * cv[b * h + j] + sig(r(0)) * r(2).tanh();
            ec.push(cnew);
            eh.push(sig(r(3)) * cnew.tanh());
        }
    }
    assert_close(&hy.to_vec::<f64>().unwrap(), &eh, 1e-14);
    assert_close(&cy.to_vec::<f64>().unwrap(), &ec, 1e-14);
}

/// d/dx of `sum(hy * w1) + sum(cy * w2)` against finite differences, for gates and cell state.
#[test]
fn lstm_step_gradients_match_finite_differences() {
    let (n, h) = (2, 2);
    let gv = vals(n * 4 * h, 0.9);
    let cv = vals(n * h, 2.1);
    let w1 = t(&[n, h], 0.4);
    let w2 = t(&[n, h], 1.7);
    let loss = |g: &Tensor, c: &Tensor| {
        let (hy, cy) = rnn::lstm_pointwise(g, c).unwrap();
        hy.mul(&w1)
            .unwrap()
            .sum()
            .unwrap()
            .add(&cy.mul(&w2).unwrap().sum().unwrap())
            .unwrap()
    };
    let (g, c) = (leaf(&gv, &[n, 4 * h]), leaf(&cv, &[n, h]));
    let grads = autograd::grad(
        &[loss(&g, &c)],
        &[g.clone(), c.clone()],
        GradOptions::default(),
    )
    .unwrap();
    let fd_g = fd_grad(
        |x| loss(x, &Tensor::from_vec(cv.clone(), &[n, h]).unwrap()),
        &gv,
        &[n, 4 * h],
    );
    let fd_c = fd_grad(
        |x| loss(&Tensor::from_vec(gv.clone(), &[n, 4 * h]).unwrap(), x),
        &cv,
        &[n, h],
    );
    assert_close(
        &grads[0].as_ref().unwrap().to_vec::<f64>().unwrap(),
        &fd_g,
        1e-7,
    );
    assert_close(
        &grads[1].as_ref().unwrap().to_vec::<f64>().unwrap(),
        &fd_c,
        1e-7,
    );
}

/// Second derivatives through the step: the create_graph gradient, summed, differentiated
/// again, against finite differences of the first gradient (computed exactly by autograd).
#[test]
fn gru_step_second_derivatives_match_finite_differences() {
    let (n, h) = (1, 2);
    let giv = vals(n * 3 * h, 0.3);
    let ghv = vals(n * 3 * h, 1.1);
    let hv = vals(n * h, 2.3);
    let gh = Tensor::from_vec(ghv.clone(), &[n, 3 * h]).unwrap();
    let hx = Tensor::from_vec(hv.clone(), &[n, h]).unwrap();
    // f(gi) = sum of d/d gi of sum(hy^2)
    let first = |gi: &Tensor, graph: bool| {
        let gi = if graph {
            gi.clone()
        } else {
            gi.detach().requires_grad_(true).unwrap()
        };
        let hy = rnn::gru_pointwise(&gi, &gh, &hx).unwrap();
        let l = hy.mul(&hy).unwrap().sum().unwrap();
        let opts = GradOptions {
            create_graph: true,
            ..GradOptions::default()
        };
        autograd::grad(&[l], &[gi], opts).unwrap()[0]
            .clone()
            .unwrap()
            .sum()
            .unwrap()
    };
    let gi = leaf(&giv, &[n, 3 * h]);
    let s = first(&gi, true);
    let gg = autograd::grad(&[s], &[gi], GradOptions::default()).unwrap();
    let fd = fd_grad(|x| first(x, false), &giv, &[n, 3 * h]);
    assert_close(&gg[0].as_ref().unwrap().to_vec::<f64>().unwrap(), &fd, 1e-6);
}

/// A two-layer bidirectional LSTM equals the same recurrence spelled out with plain ops.
#[test]
fn stacked_bidirectional_lstm_matches_composition() {
    let (seq, batch, input, hidden) = (4, 2, 3, 2);
    let weights: Vec<CellWeights> = (0..4)
        .map(|k| {
            let layer_in = if k < 2 { input } else { 2 * hidden };
            let s = k as f64 + 1.0;
            CellWeights {
                w_ih: t(&[4 * hidden, layer_in], 0.31 * s)
                    .requires_grad_(true)
                    .unwrap(),
                w_hh: t(&[4 * hidden, hidden], 0.17 * s)
                    .requires_grad_(true)
                    .unwrap(),
                b_ih: Some(t(&[4 * hidden], 0.23 * s).requires_grad_(true).unwrap()),
                b_hh: Some(t(&[4 * hidden], 0.11 * s).requires_grad_(true).unwrap()),
                w_hr: None,
            }
        })
        .collect();
    let cfg = RnnConfig {
        mode: RnnMode::Lstm,
        num_layers: 2,
        dropout: 0.0,
        training: false,
        bidirectional: true,
        batch_first: false,
    };
    let x = t(&[seq, batch, input], 0.5);
    let h0 = t(&[4, batch, hidden], 0.8);
    let c0 = t(&[4, batch, hidden], 1.9);
    let out = rnn::rnn(&x, &h0, Some(&c0), &weights, &cfg, None).unwrap();
    assert_eq!(out.output.shape(), &[seq, batch, 2 * hidden]);

    let mut layer_in = x.clone();
    let mut hs = vec![];
    for layer in 0..2 {
        let mut dirs = vec![];
        for d in 0..2 {
            let k = layer * 2 + d;
            let w = &weights[k];
            let (mut h, mut c) = (
                h0.select(0, k as i64).unwrap(),
                c0.select(0, k as i64).unwrap(),
            );
            let mut steps = vec![None; seq];
            for i in 0..seq {
                let ti = if d == 1 { seq - 1 - i } else { i };
                let g = layer_in
                    .select(0, ti as i64)
                    .unwrap()
                    .matmul(&w.w_ih.t().unwrap())
                    .unwrap()
                    .add(w.b_ih.as_ref().unwrap())
                    .unwrap()
                    .add(&h.matmul(&w.w_hh.t().unwrap()).unwrap())
                    .unwrap()
                    .add(w.b_hh.as_ref().unwrap())
                    .unwrap();
                let p = g.chunk(4, 1).unwrap();
                c = p[1]
                    .sigmoid()
                    .unwrap()
                    .mul(&c)
                    .unwrap()
                    .add(&p[0].sigmoid().unwrap().mul(&p[2].tanh().unwrap()).unwrap())
                    .unwrap();
                h = p[3].sigmoid().unwrap().mul(&c.tanh().unwrap()).unwrap();
                steps[ti] = Some(h.clone());
            }
            let steps: Vec<Tensor> = steps.into_iter().map(Option::unwrap).collect();
            dirs.push(Tensor::stack(&steps, 0).unwrap());
            hs.push(h);
        }
        layer_in = Tensor::cat(&dirs, 2).unwrap();
    }
    assert_close(
        &out.output.to_vec::<f64>().unwrap(),
        &layer_in.to_vec::<f64>().unwrap(),
        1e-13,
    );
    assert_close(
        &out.h_n.to_vec::<f64>().unwrap(),
        &Tensor::stack(&hs, 0).unwrap().to_vec::<f64>().unwrap(),
        1e-13,
    );
    // Every weight's gradient, the recurrent ones gathered over the steps into one product by
    // the layer, against the composition's (one product per step, summed by the engine); the
    // loss weighs the steps unevenly so each step's part counts.
    let params: Vec<Tensor> = weights
        .iter()
        .flat_map(|w| {
            [w.w_ih.clone(), w.w_hh.clone()]
                .into_iter()
                .chain(w.b_ih.clone())
                .chain(w.b_hh.clone())
        })
        .collect();
    let scale = t(&[seq, batch, 2 * hidden], 1.3);
    let grads = |y: &Tensor| {
        let loss = y.mul(&scale).unwrap().sum().unwrap();
        let opts = GradOptions {
            retain_graph: Some(true),
            ..GradOptions::default()
        };
        autograd::grad(&[loss], &params, opts).unwrap()
    };
    for (got, want) in grads(&out.output).iter().zip(grads(&layer_in)) {
        assert_close(
            &got.as_ref().unwrap().to_vec::<f64>().unwrap(),
            &want.unwrap().to_vec::<f64>().unwrap(),
            1e-12,
        );
    }
}

#[test]
fn wrong_shapes_are_errors_not_panics() {
    let w = CellWeights {
        w_ih: t(&[3, 2], 0.1),
        w_hh: t(&[3, 3], 0.2),
        b_ih: None,
        b_hh: None,
        w_hr: None,
    };
    let cfg = RnnConfig {
        mode: RnnMode::RnnTanh,
        num_layers: 1,
        dropout: 0.0,
        training: false,
        bidirectional: false,
        batch_first: false,
    };
    let x = t(&[4, 2, 2], 0.3);
    let e = rnn::rnn(
        &x,
        &t(&[1, 5, 3], 0.1),
        None,
        std::slice::from_ref(&w),
        &cfg,
        None,
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(
        e.to_string()
            .contains("Expected hidden size (1, 2, 3), got [1, 5, 3]"),
        "{e}"
    );
    let e = rnn::rnn(
        &t(&[4, 2, 5], 0.3),
        &t(&[1, 2, 3], 0.1),
        None,
        std::slice::from_ref(&w),
        &cfg,
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("weight_ih of layer 0"), "{e}");
    let h0 = t(&[1, 2, 3], 0.1);
    let w1 = std::slice::from_ref(&w);
    let e = rnn::rnn(&x, &h0, None, w1, &cfg, Some(&[4, 0])).unwrap_err();
    assert!(e.to_string().contains("sequence lengths in 1..=4"), "{e}");
    let e = rnn::rnn(&x, &t(&[1, 2, 3], 0.1), None, &[], &cfg, None).unwrap_err();
    assert!(e.to_string().contains("no weights"), "{e}");
    let e = rnn::lstm_pointwise(&t(&[2, 7], 0.1), &t(&[2, 2], 0.1)).unwrap_err();
    assert!(e.to_string().contains("lstm step"), "{e}");
    let (gw_ih, gw_hh) = (t(&[9, 2], 0.4), t(&[9, 3], 0.5));
    let e = rnn::gru_cell(
        &t(&[2, 2], 0.1),
        &t(&[3, 3], 0.1),
        &gw_ih,
        &gw_hh,
        None,
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("Input batch size 2 doesn't match hidden batch size 3"),
        "{e}"
    );
}

/// With lengths, each row gives what the row alone, cut to its length, gives: its outputs up to
/// its length, zeros after, and its state at its own last step (both directions).
#[test]
fn lengths_run_each_row_as_if_alone() {
    let (seq, input, hidden) = (5, 2, 3);
    let weights: Vec<CellWeights> = (0..2)
        .map(|k| CellWeights {
            w_ih: t(&[3 * hidden, input], 0.3 + k as f64),
            w_hh: t(&[3 * hidden, hidden], 0.7 + k as f64),
            b_ih: Some(t(&[3 * hidden], 0.2)),
            b_hh: Some(t(&[3 * hidden], 0.9)),
            w_hr: None,
        })
        .collect();
    let cfg = RnnConfig {
        mode: RnnMode::Gru,
        num_layers: 1,
        dropout: 0.0,
        training: false,
        bidirectional: true,
        batch_first: false,
    };
    let x = t(&[seq, 2, input], 0.45);
    let h0 = t(&[2, 2, hidden], 1.3);
    let lens = [5usize, 3];
    let all = rnn::rnn(&x, &h0, None, &weights, &cfg, Some(&lens)).unwrap();
    for (row, &len) in lens.iter().enumerate() {
        let xr = x
            .narrow(1, row as i64, 1)
            .unwrap()
            .narrow(0, 0, len)
            .unwrap();
        let hr = h0.narrow(1, row as i64, 1).unwrap().contiguous().unwrap();
        let alone = rnn::rnn(&xr, &hr, None, &weights, &cfg, None).unwrap();
        let got = all.output.narrow(1, row as i64, 1).unwrap();
        assert_close(
            &got.narrow(0, 0, len).unwrap().to_vec::<f64>().unwrap(),
            &alone.output.to_vec::<f64>().unwrap(),
            1e-14,
        );
        let rest = got
            .narrow(0, len as i64, seq - len)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        assert!(rest.iter().all(|&v| v == 0.0), "{rest:?}");
        assert_close(
            &all.h_n
                .narrow(1, row as i64, 1)
                .unwrap()
                .to_vec::<f64>()
                .unwrap(),
            &alone.h_n.to_vec::<f64>().unwrap(),
            1e-14,
        );
    }
}
