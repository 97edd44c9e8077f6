//! Factory functions: zeros, ones, full, ranges, identity and random tensors.

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

use super::{Buffer, DType, Tensor};
use crate::error::{Error, Result};

static RNG: Mutex<Option<SmallRng>> = Mutex::new(None);

/// Seed the generator behind `rand`, `randn` and dropout, for reproducible runs.
pub fn manual_seed(seed: u64) {
    *RNG.lock() = Some(SmallRng::seed_from_u64(seed));
}

fn with_rng<R>(f: impl FnOnce(&mut SmallRng) -> R) -> R {
    let mut g = RNG.lock();
    let rng = g.get_or_insert_with(|| SmallRng::seed_from_u64(0x5eed_f0e2_0a11_d00d));
    f(rng)
}

/// A buffer of `n` copies of `v`, failing cleanly (not aborting) when it cannot be allocated.
pub(crate) fn try_filled_vec<T: Clone>(n: usize, v: T) -> Result<Vec<T>> {
    let mut out = try_vec(n)?;
    out.resize(n, v);
    Ok(out)
}

/// An empty vector with room for `n` elements, or torch's allocation error (not an abort) when
/// the memory cannot be had. Every buffer whose size comes from user input is made here.
pub(crate) fn try_vec<T>(n: usize) -> Result<Vec<T>> {
    let size = std::mem::size_of::<T>();
    ensure_bytes(n.checked_mul(size), n as u128 * size as u128)?;
    let mut out = Vec::new();
    out.try_reserve_exact(n)
        .map_err(|_| cannot_allocate(n as u128 * size as u128))?;
    Ok(out)
}

/// RAM plus swap in bytes (Linux), read once: no request above it can ever be backed.
fn memory_limit() -> Option<usize> {
    static LIMIT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let kib = |key: &str| -> Option<usize> {
            let line = info.lines().find(|l| l.starts_with(key))?;
            line.split_whitespace().nth(1)?.parse().ok()
        };
        let total = kib("MemTotal:")?.checked_add(kib("SwapTotal:").unwrap_or(0))?;
        total.checked_mul(1024)
    })
}

/// Check that `n` elements of `dtype` can be allocated, so a huge request becomes an error
/// instead of an allocation failure that aborts the process. Small requests are not checked.
///
/// An allocator that maps memory lazily (mimalloc reserves with `MAP_NORESERVE`) grants requests
/// far beyond RAM; touching the pages then ends in the OOM killer. So requests above RAM plus
/// swap are refused up front, as Linux's default overcommit policy does for glibc's malloc.
pub(crate) fn ensure_allocatable(n: usize, dtype: DType) -> Result<()> {
    ensure_bytes(
        n.checked_mul(dtype.size()),
        n as u128 * dtype.size() as u128,
    )
}

/// [`ensure_allocatable`] for a request of `bytes` (None when the size overflowed; `wanted` is
/// the true size for the message).
fn ensure_bytes(bytes: Option<usize>, wanted: u128) -> Result<()> {
    const CHECK_FROM_BYTES: usize = 1 << 26;
    let fits = |b: usize| {
        memory_limit().is_none_or(|lim| b <= lim) && Vec::<u8>::new().try_reserve_exact(b).is_ok()
    };
    match bytes {
        Some(b) if b < CHECK_FROM_BYTES || fits(b) => Ok(()),
        _ => Err(cannot_allocate(wanted)),
    }
}

/// torch's error for a buffer of `bytes` bytes that cannot be had.
pub(crate) fn cannot_allocate(bytes: u128) -> Error {
    Error::runtime(format!(
        "DefaultCPUAllocator: can't allocate memory: you tried to allocate {bytes} bytes."
    ))
}

/// The number of elements of `shape`, or an error when it overflows.
pub(crate) fn checked_numel(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            Error::runtime(format!(
                "numel of shape {} overflows",
                super::shape::fmt_shape(shape)
            ))
        })
}

/// A tensor of `shape` filled with `v`, or an error when it cannot be allocated.
pub(crate) fn try_filled(shape: &[usize], dtype: DType, v: f64) -> Result<Tensor> {
    let n = checked_numel(shape)?;
    let buf = match dtype {
        DType::Float32 => Buffer::F32(super::storage::Data::Own(try_filled_vec(n, v as f32)?)),
        DType::Float64 => Buffer::F64(super::storage::Data::Own(try_filled_vec(n, v)?)),
        DType::Int64 => Buffer::I64(super::storage::Data::Own(try_filled_vec(n, v as i64)?)),
        DType::Bool => Buffer::Bool(super::storage::Data::Own(try_filled_vec(n, v != 0.0)?)),
    };
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
    /// and for an int64 fill value beyond int64 (inf and NaN included): for values and sizes
    /// that come from users.
    pub fn try_full(shape: &[usize], value: f64, dtype: DType) -> Result<Tensor> {
        // Beyond int64 (inf and NaN included) a cast would saturate to a wrong number. 2^63
        // itself is let through: it is what the largest int64 becomes as an f64.
        const LIMIT: f64 = 9_223_372_036_854_775_808.0;
        if dtype == DType::Int64 && !(-LIMIT..=LIMIT).contains(&value) {
            return Err(Error::runtime(
                "value cannot be converted to type int64_t without overflow",
            ));
        }
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
        let buf = match dtype {
            DType::Float32 => ones_on_diagonal::<f32>(n, m)?,
            DType::Float64 => ones_on_diagonal::<f64>(n, m)?,
            DType::Int64 => ones_on_diagonal::<i64>(n, m)?,
            DType::Bool => ones_on_diagonal::<bool>(n, m)?,
        };
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
}

fn random(shape: &[usize], dtype: DType, sample: impl Fn(&mut SmallRng) -> f64) -> Result<Tensor> {
    if !dtype.is_float() {
        return Err(Error::runtime(format!(
            "\"check_uniform_bounds\" not implemented for '{}'",
            super::scalar_type_name(dtype)
        )));
    }
    let n = checked_numel(shape)?;
    ensure_allocatable(n, dtype)?;
    with_rng(|r| match dtype {
        DType::Float32 => {
            Tensor::from_vec((0..n).map(|_| sample(r) as f32).collect::<Vec<_>>(), shape)
        }
        _ => Tensor::from_vec((0..n).map(|_| sample(r)).collect::<Vec<_>>(), shape),
    })
}
