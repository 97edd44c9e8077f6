//! `contiguous()` of permuted, transposed, sliced and expanded views (the tiled copy kernel)
//! against `Layout::offsets`, an element-by-element walk of the same strides, for every dtype,
//! at one and two threads; and pixel_shuffle's copies against its closed-form index map.

use ferrograd::autograd;
use ferrograd::ops::nn::sampling::{pixel_shuffle, pixel_unshuffle};
use ferrograd::{DType, Tensor};

/// A small deterministic generator (no dependency on a random crate).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % below as u64) as usize
    }
}

/// The truth: `view`'s elements read one by one through `Layout::offsets` from `base`, the
/// row-major data the view was cut from.
fn by_offsets(view: &Tensor, base: &[f64]) -> Vec<f64> {
    view.layout()
        .offsets()
        .unwrap()
        .iter()
        .map(|&o| base[o])
        .collect()
}

/// A random view: slices `(dim, start, step)`, then a permutation.
struct Plan {
    slices: Vec<(i64, i64, i64)>,
    perm: Vec<i64>,
}

impl Plan {
    fn random(rng: &mut Lcg, shape: &[usize]) -> Plan {
        let mut slices = Vec::new();
        for (d, &n) in shape.iter().enumerate() {
            if rng.next(3) == 0 {
                slices.push((d as i64, rng.next(n.max(1)) as i64, 1 + rng.next(3) as i64));
            }
        }
        let mut perm: Vec<i64> = (0..shape.len() as i64).collect();
        for i in (1..perm.len()).rev() {
            perm.swap(i, rng.next(i + 1));
        }
        Plan { slices, perm }
    }

    fn apply(&self, t: &Tensor) -> Tensor {
        let mut t = t.clone();
        for &(d, start, step) in &self.slices {
            t = t.slice(d, Some(start), None, step).unwrap();
        }
        t.permute(&self.perm).unwrap()
    }
}

/// `base` in `dtype`, viewed through `view` and copied, checked against the offset walk.
fn copy_in(dtype: DType, base: &[f64], shape: &[usize], view: &dyn Fn(&Tensor) -> Tensor) {
    let t = Tensor::from_vec(base.to_vec(), shape)
        .unwrap()
        .to_dtype(dtype)
        .unwrap();
    let v = view(&t);
    let want: Vec<f64> = by_offsets(&v, base)
        .into_iter()
        .map(|x| match dtype {
            DType::Bool => f64::from(u8::from(x != 0.0)),
            _ => x,
        })
        .collect();
    let got = v.contiguous().unwrap();
    assert!(got.is_contiguous());
    assert_eq!(got.shape(), v.shape());
    assert_eq!(got.dtype(), dtype);
    let got = got
        .to_dtype(DType::Float64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(got, want, "{dtype:?} {:?}", v.layout());
}

const DTYPES: [DType; 4] = [DType::Float32, DType::Float64, DType::Int64, DType::Bool];

#[test]
fn contiguous_of_random_permuted_and_sliced_views_matches_an_offset_walk() {
    let mut rng = Lcg(7);
    let before = autograd::get_num_threads();
    for threads in [1, 2] {
        autograd::set_num_threads(threads).unwrap();
        for trial in 0..400 {
            let nd = 1 + rng.next(5);
            let shape: Vec<usize> = (0..nd)
                .map(|_| {
                    if trial % 20 == 0 {
                        rng.next(4)
                    } else {
                        1 + rng.next(9)
                    }
                })
                .collect();
            let n: usize = shape.iter().product();
            // Distinct values with one zero, so bool copies are checked too.
            let base: Vec<f64> = (0..n).map(|i| i as f64 - 3.0).collect();
            let plan = Plan::random(&mut rng, &shape);
            copy_in(DTYPES[trial % 4], &base, &shape, &|t| plan.apply(t));
        }
    }
    autograd::set_num_threads(before).unwrap();
}

#[test]
fn large_transposes_are_copied_exactly_at_any_thread_count() {
    // Large enough to be tiled and split among threads; odd sizes leave partial tiles.
    let before = autograd::get_num_threads();
    for &(r, c) in &[
        (512usize, 784usize),
        (333, 517),
        (1000, 3),
        (3, 1000),
        (65, 4099),
    ] {
        let base: Vec<f64> = (0..r * c).map(|i| i as f64).collect();
        let views: [&dyn Fn(&Tensor) -> Tensor; 3] = [
            &|t| t.t().unwrap(),
            &|t| t.slice(1, Some(1), None, 2).unwrap().t().unwrap(),
            &|t| t.slice(0, Some(2), None, 3).unwrap().t().unwrap(),
        ];
        for view in views {
            for threads in [1, 2, 3] {
                autograd::set_num_threads(threads).unwrap();
                for dtype in DTYPES {
                    copy_in(dtype, &base, &[r, c], view);
                }
            }
        }
    }
    autograd::set_num_threads(before).unwrap();
}

#[test]
fn expanded_and_scalar_views_repeat_their_element() {
    let t = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3, 1]).unwrap();
    let e = t.expand(&[3, 4]).unwrap();
    let want: Vec<f64> = (0..12).map(|i| (i / 4 + 1) as f64).collect();
    assert_eq!(e.contiguous().unwrap().to_vec::<f64>().unwrap(), want);
    let et = e.t().unwrap().contiguous().unwrap();
    let want_t: Vec<f64> = (0..12).map(|i| (i % 3 + 1) as f64).collect();
    assert_eq!(et.to_vec::<f64>().unwrap(), want_t);
    let s = Tensor::from_vec(vec![5.0f64], &[]).unwrap();
    let big = s.expand(&[300, 300]).unwrap().contiguous().unwrap();
    assert!(big.to_vec::<f64>().unwrap().iter().all(|&v| v == 5.0));
}

#[test]
fn pixel_shuffle_and_unshuffle_follow_their_index_map() {
    // out[b, c, h·r + i, w·r + j] = x[b, c·r² + i·r + j, h, w], and unshuffle inverts it.
    for &(b, c, r, h, w) in &[
        (2usize, 3usize, 2usize, 5usize, 7usize),
        (16, 4, 2, 32, 32),
        (1, 2, 3, 4, 9),
    ] {
        let n = b * c * r * r * h * w;
        let xs: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let x = Tensor::from_vec(xs.clone(), &[b, c * r * r, h, w]).unwrap();
        let y = pixel_shuffle(&x, r as i64).unwrap();
        assert_eq!(y.shape(), &[b, c, h * r, w * r]);
        let ys = y.to_vec::<f64>().unwrap();
        for bi in 0..b {
            for ci in 0..c {
                for yy in 0..h * r {
                    for xx in 0..w * r {
                        let (hh, i, ww, j) = (yy / r, yy % r, xx / r, xx % r);
                        let src = ((bi * c * r * r + ci * r * r + i * r + j) * h + hh) * w + ww;
                        let dst = ((bi * c + ci) * h * r + yy) * w * r + xx;
                        assert_eq!(ys[dst], xs[src]);
                    }
                }
            }
        }
        let back = pixel_unshuffle(&y, r as i64).unwrap();
        assert_eq!(back.to_vec::<f64>().unwrap(), xs);
    }
}
