//! Factory functions: zeros, ones, full, ranges, identity and random tensors.

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

use super::{Buffer, DType, Tensor};
use crate::error::{Error, Result};

static RNG: Mutex<Option<SmallRng>> = Mutex::new(None);

/// The seed the global generator starts from when `manual_seed` is never called.
const DEFAULT_SEED: u64 = 0x5eed_f0e2_0a11_d00d;

/// The last seed given to [`manual_seed`] (torch's `initial_seed`).
static INITIAL_SEED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(DEFAULT_SEED);

/// Seed the generator behind `rand`, `randn` and dropout, for reproducible runs.
pub fn manual_seed(seed: u64) {
    INITIAL_SEED.store(seed, std::sync::atomic::Ordering::Relaxed);
    reseed(seed);
}

/// The seed of the global generator: the last one given to [`manual_seed`], or the default.
pub fn initial_seed() -> u64 {
    INITIAL_SEED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Restart the global generator from `seed` without making it the initial seed (draws from
/// a seeded stream of another generator; the caller restores the state after).
pub fn reseed(seed: u64) {
    *RNG.lock() = Some(SmallRng::seed_from_u64(seed));
}

/// A snapshot of the global generator ([`rng_state`]), to replay the same draws later
/// (activation checkpointing recomputes dropout with it).
#[derive(Clone)]
pub struct RngState(SmallRng);

/// The global generator's state now.
pub fn rng_state() -> RngState {
    RngState(with_rng(|r| r.clone()))
}

/// Put the global generator back to `state`: the draws that followed it come again.
pub fn set_rng_state(state: &RngState) {
    *RNG.lock() = Some(state.0.clone());
}

fn with_rng<R>(f: impl FnOnce(&mut SmallRng) -> R) -> R {
    let mut g = RNG.lock();
    let rng = g.get_or_insert_with(|| SmallRng::seed_from_u64(DEFAULT_SEED));
    f(rng)
}

pub(crate) use super::alloc::{
    cannot_allocate, checked_numel, ensure_allocatable, try_filled_vec, try_vec,
};

/// A tensor of `shape` filled with `v`, or an error when it cannot be allocated.
pub(crate) fn try_filled(shape: &[usize], dtype: DType, v: f64) -> Result<Tensor> {
    let n = checked_numel(shape)?;
    let buf = crate::tensor::storage::with_dtype!(dtype, T => {
        // Integers through int64 (torch's `full((2,), 300, dtype=uint8)` is 44), bool as != 0.
        let x = if dtype.is_integer() { T::from_i64(v as i64) } else { T::from_f64(v) };
        T::wrap(try_filled_vec(n, x)?)
    });
    Tensor::from_buffer(buf, shape)
}

fn filled(shape: &[usize], dtype: DType, v: f64) -> Tensor {
    try_filled(shape, dtype, v).expect("internal shapes are small enough to allocate")
}

impl Tensor {
    /// A tensor of zeros.
    pub fn zeros(shape: &[usize], dtype: DType) -> Tensor {
        filled(shape, dtype, 0.0)
    }
    /// A tensor of ones.
    pub fn ones(shape: &[usize], dtype: DType) -> Tensor {
        filled(shape, dtype, 1.0)
    }
    /// A tensor filled with `value` (converted to `dtype`).
    pub fn full(shape: &[usize], value: f64, dtype: DType) -> Tensor {
        filled(shape, dtype, value)
    }

    /// Like [`Tensor::full`], but an error instead of an abort when the memory cannot be had,
    /// and for a fill value an integer dtype cannot hold (inf and NaN included; torch's
    /// message): for values and sizes that come from users.
    pub fn try_full(shape: &[usize], value: f64, dtype: DType) -> Result<Tensor> {
        // A value beyond an integer type would be wrapped or saturated into a wrong number.
        dtype.check_scalar(value)?;
        try_filled(shape, dtype, value)
    }
    /// Zeros with this tensor's shape and dtype.
    pub fn zeros_like(&self) -> Tensor {
        Tensor::zeros(self.shape(), self.dtype())
    }
    /// Ones with this tensor's shape and dtype.
    pub fn ones_like(&self) -> Tensor {
        Tensor::ones(self.shape(), self.dtype())
    }

    /// Values from `start` to `end` (exclusive) in steps of `step`.
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType) -> Result<Tensor> {
        if step == 0.0 {
            return Err(Error::runtime("step must be nonzero"));
        }
        if !(start.is_finite() && end.is_finite()) {
            return Err(Error::runtime(format!(
                "unsupported range: {start} -> {end}"
            )));
        }
        if (step > 0.0 && end < start) || (step < 0.0 && end > start) {
            return Err(Error::runtime(
                "upper bound and larger bound inconsistent with step sign",
            ));
        }
        let n = ((end - start) / step).ceil().max(0.0) as usize;
        ensure_allocatable(n, DType::Float64)?;
        let vals: Vec<f64> = (0..n).map(|i| start + step * i as f64).collect();
        Tensor::from_vec(vals, &[n])?.to_dtype(dtype)
    }

    /// `steps` values evenly spaced from `start` to `end` inclusive.
    pub fn linspace(start: f64, end: f64, steps: usize, dtype: DType) -> Result<Tensor> {
        ensure_allocatable(steps, DType::Float64)?;
        let vals: Vec<f64> = match steps {
            0 => vec![],
            1 => vec![start],
            _ => {
                let step = (end - start) / (steps - 1) as f64;
                // Fill symmetric halves from both ends, as torch does, so the last value is `end`.
                let half = steps / 2;
                (0..steps)
                    .map(|i| {
                        if i < half {
                            start + step * i as f64
                        } else {
                            end - step * (steps - 1 - i) as f64
                        }
                    })
                    .collect()
            }
        };
        Tensor::from_vec(vals, &[steps])?.to_dtype(dtype)
    }

    /// An `n` x `m` matrix with ones on the diagonal, or torch's allocation error when it
    /// cannot be had.
    pub fn eye(n: usize, m: usize, dtype: DType) -> Result<Tensor> {
        fn ones_on_diagonal<T: super::Element>(n: usize, m: usize) -> Result<Buffer> {
            let mut v = try_filled_vec(checked_numel(&[n, m])?, T::default())?;
            for i in 0..n.min(m) {
                v[i * m + i] = T::from_i64(1);
            }
            Ok(T::wrap(v))
        }
        let buf = crate::tensor::storage::with_dtype!(dtype, T => ones_on_diagonal::<T>(n, m)?);
        Tensor::from_buffer(buf, &[n, m])
    }

    /// A random permutation of `0..n` as int64: from the global generator (`manual_seed`), or
    /// with `seed` from a generator seeded with it (how a Python `Generator` draws). Fisher-Yates,
    /// so every permutation is equally likely; torch's allocation error when `n` is too large.
    pub fn randperm(n: usize, seed: Option<u64>) -> Result<Tensor> {
        fn shuffle(v: &mut [i64], r: &mut SmallRng) {
            for i in (1..v.len()).rev() {
                v.swap(i, r.random_range(0..=i));
            }
        }
        if let Some(level) = super::batched::current_level() {
            if level.randomness() != super::batched::Randomness::Same {
                return Err(Error::runtime(
                    if level.randomness() == super::batched::Randomness::Error {
                        RANDOM_IN_VMAP
                    } else {
                        "vmap: randperm with randomness='different' is not supported yet; use randomness='same' or draw outside vmap"
                    },
                ));
            }
        }
        let mut v = try_vec::<i64>(n)?;
        v.extend(0..n as i64);
        match seed {
            Some(s) => shuffle(&mut v, &mut SmallRng::seed_from_u64(s)),
            None => with_rng(|r| shuffle(&mut v, r)),
        }
        Tensor::from_vec(v, &[n])
    }

    /// Uniform samples in [0, 1).
    pub fn rand(shape: &[usize], dtype: DType) -> Result<Tensor> {
        random(shape, dtype, |r| r.random::<f64>())
    }

    /// Standard normal samples.
    pub fn randn(shape: &[usize], dtype: DType) -> Result<Tensor> {
        random(shape, dtype, |r| r.sample::<f64, _>(StandardNormal))
    }

    /// Uniform samples in `[low, high)` (torch's `uniform_`).
    pub fn uniform(shape: &[usize], low: f64, high: f64, dtype: DType) -> Result<Tensor> {
        if low > high {
            return Err(Error::runtime(format!(
                "uniform_ expects to return a [from, to) range, but found from={low} > to={high}"
            )));
        }
        random(shape, dtype, move |r| {
            low + (high - low) * r.random::<f64>()
        })
    }

    /// Normal samples of mean `mean` and standard deviation `std` (torch's `normal_`).
    pub fn normal(shape: &[usize], mean: f64, std: f64, dtype: DType) -> Result<Tensor> {
        if std < 0.0 {
            return Err(Error::runtime(format!(
                "normal expects std >= 0.0, but found std {std}"
            )));
        }
        if !dtype.is_float() {
            return Err(Error::not_implemented(format!(
                "\"normal_kernel_cpu\" not implemented for '{}'",
                super::scalar_type_name(dtype)
            )));
        }
        random(shape, dtype, move |r| {
            mean + std * r.sample::<f64, _>(StandardNormal)
        })
    }

    /// Exponential samples of rate `lambd` (density `lambd * exp(-lambd * x)`), torch's
    /// `exponential_`.
    pub fn exponential(shape: &[usize], lambd: f64, dtype: DType) -> Result<Tensor> {
        if !dtype.is_float() {
            return Err(Error::runtime(format!("Exponential distribution is a continuous probability distribution. dtype must be a floating point but you specified {}", super::scalar_type_name(dtype))));
        }
        if lambd.is_nan() || lambd <= 0.0 {
            return Err(Error::runtime(format!(
                "exponential_ expects lambda > 0.0, but found lambda={lambd}"
            )));
        }
        // 1 - u lies in (0, 1], so the logarithm is finite.
        random(shape, dtype, move |r| {
            -(1.0 - r.random::<f64>()).ln() / lambd
        })
    }

    /// Integers drawn uniformly from `[low, high)`, stored as `dtype` (torch's `randint` and
    /// `random_`).
    pub fn randint(low: i64, high: i64, shape: &[usize], dtype: DType) -> Result<Tensor> {
        if low >= high {
            return Err(Error::runtime(format!(
                "random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
            )));
        }
        random_any(shape, dtype, move |r| r.random_range(low..high) as f64)
    }

    /// 0/1 samples that are 1 with probability `p` (torch's `bernoulli_(p)`), as `dtype`.
    pub fn bernoulli_scalar(shape: &[usize], p: f64, dtype: DType) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::runtime(format!(
                "bernoulli_ expects p to be in [0, 1], but got p={p}"
            )));
        }
        random_any(shape, dtype, move |r| {
            f64::from(u8::from(r.random::<f64>() < p))
        })
    }

    /// `num_samples` category indices per row of the probabilities `probs` (1-D or 2-D,
    /// non-negative weights, not necessarily normalised), int64; without `replacement` each
    /// category is drawn at most once per row (torch's `multinomial`).
    pub fn multinomial(probs: &Tensor, num_samples: usize, replacement: bool) -> Result<Tensor> {
        if probs.dim() == 0 || probs.dim() > 2 {
            return Err(Error::runtime("prob_dist must be 1 or 2 dim"));
        }
        let k = probs.shape()[probs.dim() - 1];
        let rows = if probs.dim() == 2 {
            probs.shape()[0]
        } else {
            1
        };
        let w = probs.to_vec::<f64>()?;
        if w.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err(Error::runtime(
                "probability tensor contains either `inf`, `nan` or element < 0",
            ));
        }
        if !replacement && num_samples > k {
            return Err(Error::runtime(
                "cannot sample n_sample > prob_dist.size(-1) samples without replacement",
            ));
        }
        let mut out = try_vec::<i64>(rows * num_samples)?;
        with_rng(|r| -> Result<()> {
            for row in w.chunks(k.max(1)).take(rows) {
                let mut row = row.to_vec();
                if row.iter().sum::<f64>() <= 0.0 {
                    return Err(Error::runtime(
                        "invalid multinomial distribution (sum of probabilities <= 0)",
                    ));
                }
                let mut taken = vec![false; k];
                for _ in 0..num_samples {
                    let total: f64 = row.iter().sum();
                    if total <= 0.0 {
                        // Without replacement and the weighted categories used up: the
                        // zero-weight ones follow in index order, as torch's draws do.
                        let next = taken.iter().position(|&t| !t).unwrap_or(0);
                        taken[next] = true;
                        out.push(next as i64);
                        continue;
                    }
                    let mut u = r.random::<f64>() * total;
                    // the last category with weight takes what rounding leaves over
                    let mut pick = row.iter().rposition(|&v| v > 0.0).unwrap_or(0);
                    for (i, &v) in row.iter().enumerate() {
                        if v > 0.0 && u < v {
                            pick = i;
                            break;
                        }
                        u -= v;
                    }
                    out.push(pick as i64);
                    if !replacement {
                        row[pick] = 0.0;
                        taken[pick] = true;
                    }
                }
            }
            Ok(())
        })?;
        let shape: Vec<usize> = if probs.dim() == 2 {
            vec![rows, num_samples]
        } else {
            vec![num_samples]
        };
        Tensor::from_vec(out, &shape)
    }

    /// The coordinates `[rows; cols]` (int64, shape `[2, N]`, row-major order) of the lower
    /// (`upper` false: `col - row <= offset`) or upper (`col - row >= offset`) triangle of a
    /// `row` x `col` matrix (torch's `tril_indices` / `triu_indices`).
    pub fn triangle_indices(row: usize, col: usize, offset: i64, upper: bool) -> Result<Tensor> {
        let mut rows = Vec::new();
        let mut cols = Vec::new();
        for r in 0..row {
            for c in 0..col {
                let d = c as i64 - r as i64;
                if (upper && d >= offset) || (!upper && d <= offset) {
                    rows.push(r as i64);
                    cols.push(c as i64);
                }
            }
        }
        let n = rows.len();
        rows.extend(cols);
        Tensor::from_vec(rows, &[2, n])
    }

    /// `base ** linspace(start, end, steps)` (torch's `logspace`), computed in float64.
    pub fn logspace(start: f64, end: f64, steps: usize, base: f64, dtype: DType) -> Result<Tensor> {
        let step = if steps > 1 {
            (end - start) / (steps - 1) as f64
        } else {
            0.0
        };
        let mut v = try_vec::<f64>(steps)?;
        v.extend((0..steps).map(|i| base.powf(start + step * i as f64)));
        from_f64(v, &[steps], dtype)
    }
}

/// Samples of any dtype, drawn as float64 values (integers and 0/1 draws are exact below 2^53).
fn random_any(
    shape: &[usize],
    dtype: DType,
    sample: impl Fn(&mut SmallRng) -> f64,
) -> Result<Tensor> {
    if dtype.is_float() {
        return random(shape, dtype, sample);
    }
    let draws = random(shape, DType::Float64, sample)?;
    match draws.batch_parts() {
        Some((phys, bdim, level)) => {
            let t = from_f64(phys.to_vec::<f64>()?, phys.shape(), dtype)?;
            Tensor::batched(t, bdim, level.clone())
        }
        None => from_f64(draws.to_vec::<f64>()?, draws.shape(), dtype),
    }
}

/// float64 values stored as `dtype` (integers truncated towards zero).
fn from_f64(v: Vec<f64>, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let buf = crate::tensor::storage::with_dtype!(dtype, T => T::wrap(crate::tensor::storage::convert_vec::<f64, T>(&v)));
    Tensor::from_buffer(buf, shape)
}

fn random(shape: &[usize], dtype: DType, sample: impl Fn(&mut SmallRng) -> f64) -> Result<Tensor> {
    if !dtype.is_float() {
        return Err(Error::runtime(format!(
            "\"check_uniform_bounds\" not implemented for '{}'",
            super::scalar_type_name(dtype)
        )));
    }
    // Inside vmap, per the level's `randomness`: refuse, one draw for all samples, or one each.
    if let Some(level) = super::batched::current_level() {
        match level.randomness() {
            super::batched::Randomness::Error => return Err(Error::runtime(RANDOM_IN_VMAP)),
            super::batched::Randomness::Same => {}
            super::batched::Randomness::Different => {
                let mut batch_shape = vec![level.size()];
                batch_shape.extend_from_slice(shape);
                let draws = draw(&batch_shape, dtype, &sample)?;
                return Tensor::batched(draws, 0, level);
            }
        }
    }
    draw(shape, dtype, &sample)
}

/// torch's error for a random op inside `vmap(..., randomness="error")`.
pub(crate) const RANDOM_IN_VMAP: &str = "vmap: called random operation while in randomness error mode. Please either use the 'same' or 'different' randomness flags on vmap or perform the randomness operation out of vmap";

fn draw(shape: &[usize], dtype: DType, sample: &impl Fn(&mut SmallRng) -> f64) -> Result<Tensor> {
    let n = checked_numel(shape)?;
    ensure_allocatable(n, dtype)?;
    with_rng(|r| match dtype {
        DType::Float32 => {
            Tensor::from_vec((0..n).map(|_| sample(r) as f32).collect::<Vec<_>>(), shape)
        }
        DType::Float64 => Tensor::from_vec((0..n).map(|_| sample(r)).collect::<Vec<_>>(), shape),
        // Half types: float64 draws rounded once.
        d => {
            let v: Vec<f64> = (0..n).map(|_| sample(r)).collect();
            from_f64(v, shape, d)
        }
    })
}
