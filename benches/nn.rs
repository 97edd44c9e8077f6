//! Criterion benchmarks of the nn ops a Rust user builds models from, forward and backward at
//! compare.py's shapes (float32), and the model steps of issue 12's goals written against the
//! crate alone: the LeNet-style CNN step, torchvision's ResNet BasicBlock and a pre-norm
//! transformer block. compare.py runs the same shapes side by side with torch.
//! Run: cargo bench --bench nn

/// The allocator of the Python extension, so figures compare with compare.py's (see
/// benches/elementwise.rs).
#[cfg(not(feature = "python"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{criterion_group, criterion_main, Criterion};
use ferrograd::ops::nn::attention::{scaled_dot_product_attention, SdpaOptions};
use ferrograd::ops::nn::conv::ConvPadding;
use ferrograd::ops::nn::linear::linear;
use ferrograd::ops::nn::loss::{cross_entropy, Reduction};
use ferrograd::ops::nn::rnn::{self, CellWeights, RnnConfig, RnnMode};
use ferrograd::ops::nn::{activation, norm};
use ferrograd::{DType, Tensor};

fn randn(shape: &[usize], scale: f64) -> Tensor {
    Tensor::randn(shape, DType::Float32)
        .unwrap()
        .mul_scalar(scale)
        .unwrap()
}

fn leaf(shape: &[usize], scale: f64) -> Tensor {
    randn(shape, scale).requires_grad_(true).unwrap()
}

fn clear(ps: &[&Tensor]) {
    for p in ps {
        p.set_grad(None).unwrap();
    }
}

/// Class labels `0..classes` for `n` samples.
fn labels(n: usize, classes: usize) -> Tensor {
    let v: Vec<i64> = (0..n).map(|i| ((i * 7 + 3) % classes) as i64).collect();
    Tensor::from_vec(v, &[n]).unwrap()
}

/// `y.backward(g)` for an upstream gradient `g` of `y`'s shape.
fn backward_with(y: &Tensor, g: &Tensor) {
    y.backward_with(Some(g.clone()), None, false, None).unwrap();
}

/// Each op alone, forward and backward, as compare.py's per-op workloads.
fn ops(c: &mut Criterion) {
    let mut g = c.benchmark_group("nn_fwd_bwd");
    g.sample_size(20);

    let (x, w, b) = (
        leaf(&[32, 16, 28, 28], 1.0),
        leaf(&[32, 16, 3, 3], 0.1),
        leaf(&[32], 1.0),
    );
    let up = randn(&[32, 32, 28, 28], 1.0);
    g.bench_function("conv2d_32x16x28x28_k3", |bch| {
        bch.iter(|| {
            let y = x
                .conv2d(&w, Some(&b), &[1], ConvPadding::Explicit(&[1]), &[1], 1)
                .unwrap();
            backward_with(&y, &up);
            clear(&[&x, &w, &b]);
        })
    });

    let up = randn(&[32, 16, 14, 14], 1.0);
    g.bench_function("max_pool2d_32x16x28x28_k2", |bch| {
        bch.iter(|| {
            let (y, _) = x.max_pool2d(&[2], &[], &[0], &[1], false).unwrap();
            backward_with(&y, &up);
            clear(&[&x]);
        })
    });

    let (xl, wl, bl) = (
        leaf(&[64, 128, 512], 1.0),
        leaf(&[512], 1.0),
        leaf(&[512], 1.0),
    );
    let up = randn(&[64, 128, 512], 1.0);
    g.bench_function("layer_norm_64x128x512", |bch| {
        bch.iter(|| {
            let y = norm::layer_norm(&xl, &[512], Some(&wl), Some(&bl), 1e-5).unwrap();
            backward_with(&y, &up);
            clear(&[&xl, &wl, &bl]);
        })
    });

    let (xb, wb, bb) = (
        leaf(&[32, 64, 28, 28], 1.0),
        leaf(&[64], 1.0),
        leaf(&[64], 1.0),
    );
    let (rm, rv) = (
        Tensor::zeros(&[64], DType::Float32),
        Tensor::ones(&[64], DType::Float32),
    );
    let up = randn(&[32, 64, 28, 28], 1.0);
    g.bench_function("batch_norm2d_train_32x64x28x28", |bch| {
        bch.iter(|| {
            let y = norm::batch_norm(
                &xb,
                Some(&rm),
                Some(&rv),
                Some(&wb),
                Some(&bb),
                true,
                0.1,
                1e-5,
            )
            .unwrap();
            backward_with(&y, &up);
            clear(&[&xb, &wb, &bb]);
        })
    });

    let xs = leaf(&[256, 1024], 3.0);
    let up = randn(&[256, 1024], 1.0);
    g.bench_function("softmax_256x1024", |bch| {
        bch.iter(|| {
            backward_with(&xs.softmax(-1).unwrap(), &up);
            clear(&[&xs]);
        })
    });

    let xc = leaf(&[512, 1000], 1.0);
    let t = labels(512, 1000);
    g.bench_function("cross_entropy_512x1000", |bch| {
        bch.iter(|| {
            let l = cross_entropy(&xc, &t, None, -100, Reduction::Mean, 0.0).unwrap();
            l.backward().unwrap();
            clear(&[&xc]);
        })
    });

    let xg = leaf(&[512, 512], 1.0);
    g.bench_function("gelu_512x512", |bch| {
        bch.iter(|| {
            activation::gelu(&xg, false)
                .unwrap()
                .sum()
                .unwrap()
                .backward()
                .unwrap();
            clear(&[&xg]);
        })
    });

    // The transformer block's qkv projection: (8, 64, 128) -> (8, 64, 384) with a bias.
    let (x, w, b) = (
        leaf(&[8, 64, 128], 1.0),
        leaf(&[384, 128], 0.1),
        leaf(&[384], 0.1),
    );
    let up = randn(&[8, 64, 384], 1.0);
    g.bench_function("linear_8x64x128_to_384", |bch| {
        bch.iter(|| {
            backward_with(&linear(&x, &w, Some(&b)).unwrap(), &up);
            clear(&[&x, &w, &b]);
        })
    });

    let (q, k, v) = (
        leaf(&[1, 8, 1024, 64], 1.0),
        leaf(&[1, 8, 1024, 64], 1.0),
        leaf(&[1, 8, 1024, 64], 1.0),
    );
    let up = randn(&[1, 8, 1024, 64], 1.0);
    let opts = SdpaOptions::default();
    g.sample_size(10);
    g.bench_function("sdpa_8h_1024x64", |bch| {
        bch.iter(|| {
            let y = scaled_dot_product_attention(&q, &k, &v, &opts).unwrap();
            backward_with(&y, &up);
            clear(&[&q, &k, &v]);
        })
    });
    g.finish();
}

/// SGD without momentum over `ps` (the model steps' optimiser).
fn sgd(ps: &[&Tensor], lr: f64) {
    let _off = ferrograd::autograd::grad_mode::GradModeGuard::new(false);
    for p in ps {
        if let Some(gr) = p.grad() {
            p.sub_(&gr.mul_scalar(lr).unwrap()).unwrap();
        }
        p.set_grad(None).unwrap();
    }
}

/// The model steps of issue 12's goal table.
fn models(c: &mut Criterion) {
    let mut g = c.benchmark_group("nn_model_step");
    g.sample_size(10);

    // LeNet-style: two conv2d 5x5 + relu + max_pool2d, linear, cross_entropy; batch 32, 28x28.
    let x = randn(&[32, 1, 28, 28], 1.0);
    let t = labels(32, 10);
    let (w1, b1, w2, b2, w3, b3) = (
        leaf(&[6, 1, 5, 5], 0.2),
        leaf(&[6], 0.1),
        leaf(&[16, 6, 5, 5], 0.08),
        leaf(&[16], 0.1),
        leaf(&[10, 256], 0.06),
        leaf(&[10], 0.1),
    );
    let pad0 = ConvPadding::Explicit(&[0]);
    g.bench_function("cnn_train_b32", |bch| {
        bch.iter(|| {
            let h = x.conv2d(&w1, Some(&b1), &[1], pad0, &[1], 1).unwrap();
            let (h, _) = h
                .relu()
                .unwrap()
                .max_pool2d(&[2], &[], &[0], &[1], false)
                .unwrap();
            let h = h.conv2d(&w2, Some(&b2), &[1], pad0, &[1], 1).unwrap();
            let (h, _) = h
                .relu()
                .unwrap()
                .max_pool2d(&[2], &[], &[0], &[1], false)
                .unwrap();
            let logits = linear(&h.reshape(&[32, 256]).unwrap(), &w3, Some(&b3)).unwrap();
            let l = cross_entropy(&logits, &t, None, -100, Reduction::Mean, 0.0).unwrap();
            l.backward().unwrap();
            sgd(&[&w1, &b1, &w2, &b2, &w3, &b3], 0.01);
        })
    });

    // torchvision's BasicBlock: conv3x3 + batch_norm + relu twice with a skip; batch 16,
    // 64 channels, 32x32, training mode.
    let x = randn(&[16, 64, 32, 32], 1.0);
    let (c1, c2) = (leaf(&[64, 64, 3, 3], 0.04), leaf(&[64, 64, 3, 3], 0.04));
    let (g1, be1, g2, be2) = (
        Tensor::ones(&[64], DType::Float32)
            .requires_grad_(true)
            .unwrap(),
        Tensor::zeros(&[64], DType::Float32)
            .requires_grad_(true)
            .unwrap(),
        Tensor::ones(&[64], DType::Float32)
            .requires_grad_(true)
            .unwrap(),
        Tensor::zeros(&[64], DType::Float32)
            .requires_grad_(true)
            .unwrap(),
    );
    let stats: Vec<Tensor> = (0..4)
        .map(|i| {
            if i % 2 == 0 {
                Tensor::zeros(&[64], DType::Float32)
            } else {
                Tensor::ones(&[64], DType::Float32)
            }
        })
        .collect();
    let pad1 = ConvPadding::Explicit(&[1]);
    g.bench_function("resnet_block_b16_64c_32x32", |bch| {
        bch.iter(|| {
            let bn = |h: &Tensor, w: &Tensor, b: &Tensor, m: &Tensor, v: &Tensor| {
                norm::batch_norm(h, Some(m), Some(v), Some(w), Some(b), true, 0.1, 1e-5).unwrap()
            };
            let h = x.conv2d(&c1, None, &[1], pad1, &[1], 1).unwrap();
            let h = bn(&h, &g1, &be1, &stats[0], &stats[1]).relu().unwrap();
            let h = h.conv2d(&c2, None, &[1], pad1, &[1], 1).unwrap();
            let h = bn(&h, &g2, &be2, &stats[2], &stats[3]);
            let y = h.add(&x).unwrap().relu().unwrap();
            y.square().unwrap().mean().unwrap().backward().unwrap();
            sgd(&[&c1, &c2, &g1, &be1, &g2, &be2], 0.01);
        })
    });

    // Pre-norm transformer block: layer_norm, qkv linear, 4-head attention, gelu MLP;
    // batch 8, sequence 64, width 128.
    let (n, s, d, h) = (8usize, 64usize, 128usize, 4usize);
    let x = randn(&[n, s, d], 1.0);
    let ones = |len: usize| {
        Tensor::ones(&[len], DType::Float32)
            .requires_grad_(true)
            .unwrap()
    };
    let (ln1w, ln1b, ln2w, ln2b) = (ones(d), leaf(&[d], 0.05), ones(d), leaf(&[d], 0.05));
    let (qkvw, qkvb) = (leaf(&[3 * d, d], 0.05), leaf(&[3 * d], 0.05));
    let (ow, ob) = (leaf(&[d, d], 0.05), leaf(&[d], 0.05));
    let (f1w, f1b) = (leaf(&[4 * d, d], 0.05), leaf(&[4 * d], 0.05));
    let (f2w, f2b) = (leaf(&[d, 4 * d], 0.05), leaf(&[d], 0.05));
    let linear = |a: &Tensor, w: &Tensor, b: &Tensor| linear(a, w, Some(b)).unwrap();
    let opts = SdpaOptions::default();
    g.bench_function("transformer_block_b8_s64_d128", |bch| {
        bch.iter(|| {
            let y = norm::layer_norm(&x, &[d], Some(&ln1w), Some(&ln1b), 1e-5).unwrap();
            let qkv = linear(&y, &qkvw, &qkvb)
                .reshape(&[n, s, 3, h, d / h])
                .unwrap()
                .permute(&[2, 0, 3, 1, 4])
                .unwrap();
            let part = |i: i64| qkv.select(0, i).unwrap();
            let a = scaled_dot_product_attention(&part(0), &part(1), &part(2), &opts)
                .unwrap()
                .transpose(1, 2)
                .unwrap()
                .reshape(&[n, s, d])
                .unwrap();
            let x1 = x.add(&linear(&a, &ow, &ob)).unwrap();
            let y = norm::layer_norm(&x1, &[d], Some(&ln2w), Some(&ln2b), 1e-5).unwrap();
            let y = activation::gelu(&linear(&y, &f1w, &f1b), false).unwrap();
            let out = x1.add(&linear(&y, &f2w, &f2b)).unwrap();
            out.square().unwrap().mean().unwrap().backward().unwrap();
            sgd(
                &[
                    &ln1w, &ln1b, &qkvw, &qkvb, &ow, &ob, &ln2w, &ln2b, &f1w, &f1b, &f2w, &f2b,
                ],
                1e-3,
            );
        })
    });

    // Two-layer LSTM over 50 steps: batch 32, 64 inputs, 128 hidden (compare.py's lstm_train).
    let (seq, batch, input, hidden) = (50usize, 32usize, 64usize, 128usize);
    let x = randn(&[seq, batch, input], 1.0);
    let weights: Vec<CellWeights> = (0..2)
        .map(|layer| CellWeights {
            w_ih: leaf(&[4 * hidden, if layer == 0 { input } else { hidden }], 0.08),
            w_hh: leaf(&[4 * hidden, hidden], 0.08),
            b_ih: Some(leaf(&[4 * hidden], 0.08)),
            b_hh: Some(leaf(&[4 * hidden], 0.08)),
            w_hr: None,
        })
        .collect();
    let cfg = RnnConfig {
        mode: RnnMode::Lstm,
        num_layers: 2,
        dropout: 0.0,
        training: true,
        bidirectional: false,
        batch_first: false,
    };
    let h0 = Tensor::zeros(&[2, batch, hidden], DType::Float32);
    let params: Vec<&Tensor> = weights
        .iter()
        .flat_map(|w| [&w.w_ih, &w.w_hh].into_iter().chain(&w.b_ih).chain(&w.b_hh))
        .collect();
    g.bench_function("lstm_train_2x50_b32_64_128", |bch| {
        bch.iter(|| {
            let out = rnn::rnn(&x, &h0, Some(&h0), &weights, &cfg, None).unwrap();
            out.output.sum().unwrap().backward().unwrap();
            sgd(&params, 1e-3);
        })
    });
    g.finish();
}

criterion_group!(benches, ops, models);
criterion_main!(benches);
