//! Strided convolutions as stride-1 ones ("space to depth"): with stride `s`, the window of
//! output `o` reads input `s·o + k - p`; splitting the zero-padded input into its `s` phases
//! (`x_r[q] = x[s·q + r - p]`) and the kernel alike (`w_r[m] = w[s·m + r]`, zero past the
//! kernel), the convolution is `Σ_r conv_stride1(x_r, w_r)`: one stride-1 convolution whose
//! input channels are (channel, phase) pairs, with a kernel of `ceil(k / s)` taps and no
//! padding. So strided layers (a ResNet's downsampling, a transposed convolution's forward,
//! which is a strided layer's input gradient) run on the stride-1 kernels. The split is a copy
//! of the input (its size), and the adjoints of the two splits bring the gradients back.

use super::{ConvGeometry, ConvScalar};
use crate::error::Result;
use crate::parallel::SendPtr;
use crate::tensor::creation::try_filled_vec;

/// The stride-1 rewrite of a strided geometry, per spatial dim read as (depth, height, width)
/// with missing leading dims of 1.
pub(super) struct Phases {
    /// The stride-1 geometry over the split input: `in_channels · S` channels (each channel's
    /// `S` phases together), `ceil(k / s)` taps, no padding.
    pub(super) geo: ConvGeometry,
    stride: [usize; 3],
    kernel: [usize; 3],
    taps: [usize; 3],
    pad: [usize; 3],
    input: [usize; 3],
    /// Each phase plane's sizes (`output + taps - 1`).
    plane: [usize; 3],
}

/// The columns of a phase row that read the input: `lo..hi`, the first reading input column
/// `first` and each next one `stride` further.
#[derive(Clone, Copy)]
struct Span {
    lo: usize,
    hi: usize,
    first: usize,
    stride: usize,
}

/// `v` as three dims, the missing leading ones `one`.
fn three(v: &[usize], one: usize) -> [usize; 3] {
    std::array::from_fn(|d| (d + v.len()).checked_sub(3).map_or(one, |i| v[i]))
}

impl Phases {
    /// The rewrite of `geo`, or `None` unless it has 1 to 3 spatial dims, a stride above 1, no
    /// dilation and a nonempty output.
    pub(super) fn of(geo: &ConvGeometry) -> Option<Phases> {
        let sd = geo.kernel.len();
        if !(1..=3).contains(&sd)
            || geo.stride.iter().all(|&s| s == 1)
            || geo.dilation.iter().any(|&d| d != 1)
            || geo.stride.contains(&0)
            || geo.kernel.contains(&0)
            || geo.output.contains(&0)
            || geo.input.contains(&0)
        {
            return None;
        }
        let (stride, kernel) = (three(&geo.stride, 1), three(&geo.kernel, 1));
        let taps: [usize; 3] = std::array::from_fn(|d| kernel[d].div_ceil(stride[d]));
        let output = three(&geo.output, 1);
        let plane: [usize; 3] = std::array::from_fn(|d| output[d] + taps[d] - 1);
        let phases: usize = stride.iter().product();
        let tail = |v: [usize; 3]| v[3 - sd..].to_vec();
        let split = ConvGeometry {
            batch: geo.batch,
            in_channels: geo.in_channels * phases,
            out_channels: geo.out_channels,
            groups: geo.groups,
            input: tail(plane),
            output: geo.output.clone(),
            kernel: tail(taps),
            stride: vec![1; sd],
            padding: vec![0; sd],
            dilation: vec![1; sd],
        };
        Some(Phases {
            geo: split,
            stride,
            kernel,
            taps,
            pad: three(&geo.padding, 0),
            input: three(&geo.input, 1),
            plane,
        })
    }

    /// Products per output and input channel after the split (the taps of every phase,
    /// zeros included), against the kernel's size before it.
    pub(super) fn products(&self) -> usize {
        self.phases() * self.taps.iter().product::<usize>()
    }

    fn phases(&self) -> usize {
        self.stride.iter().product()
    }

    /// For each phase `(rd, rh, rw)` and row `(qd, qh)` of one channel's phase plane, the input
    /// row it reads: `f(plane offset of the row, input offset of the row or None (padding),
    /// span)`, the span being the row's columns `lo..hi` that read the input, the first at
    /// input column `first`, the next `stride` further each.
    fn rows(&self, mut f: impl FnMut(usize, Option<usize>, Span)) {
        let (s, p, i, q) = (self.stride, self.pad, self.input, self.plane);
        let at =
            |d: usize, q: usize, r: usize| (s[d] * q + r).checked_sub(p[d]).filter(|&v| v < i[d]);
        let pv: usize = q.iter().product();
        let mut phase = 0;
        for rd in 0..s[0] {
            for rh in 0..s[1] {
                for rw in 0..s[2] {
                    let lo = (0..q[2]).find(|&c| at(2, c, rw).is_some()).unwrap_or(q[2]);
                    let hi = (lo..q[2]).find(|&c| at(2, c, rw).is_none()).unwrap_or(q[2]);
                    let span = Span {
                        lo,
                        hi,
                        first: at(2, lo, rw).unwrap_or(0),
                        stride: s[2],
                    };
                    for qd in 0..q[0] {
                        for qh in 0..q[1] {
                            let src = at(0, qd, rd)
                                .zip(at(1, qh, rh))
                                .map(|(z, y)| (z * i[1] + y) * i[2]);
                            f(phase * pv + (qd * q[1] + qh) * q[2], src, span);
                        }
                    }
                    phase += 1;
                }
            }
        }
    }

    /// Run `f(input volume, its phase planes)` for each (image, channel), shared among threads
    /// when large.
    fn per_plane<T: ConvScalar>(
        &self,
        planes: usize,
        f: &(dyn Fn(usize, &mut [T]) + Sync),
        out: &mut [T],
        per: usize,
    ) {
        let ptr = SendPtr(out.as_mut_ptr());
        let work = planes * per;
        let blocks = if work < 1 << 16 { 1 } else { planes.min(64) };
        crate::parallel::share_work(crate::parallel::helpers(), blocks, &|b| {
            for u in b * planes / blocks..(b + 1) * planes / blocks {
                // SAFETY: plane u alone writes out[u·per..(u+1)·per].
                let dst = unsafe { std::slice::from_raw_parts_mut(ptr.get().add(u * per), per) };
                f(u, dst);
            }
        });
    }

    /// The split input `(N, C·S, *plane)` of `x` `(N, C, *input)`.
    pub(super) fn split_input<T: ConvScalar>(&self, x: &[T]) -> Result<Vec<T>> {
        let vol: usize = self.input.iter().product::<usize>().max(1);
        let per = self.phases() * self.plane.iter().product::<usize>();
        let planes = x.len() / vol;
        let mut out = try_filled_vec(planes * per, T::ZERO)?;
        self.per_plane(
            planes,
            &|u, dst| {
                let src = &x[u * vol..][..vol];
                self.rows(|row, from, sp| {
                    if let Some(from) = from {
                        let d = &mut dst[row + sp.lo..row + sp.hi];
                        for (k, v) in d.iter_mut().enumerate() {
                            *v = src[from + sp.first + k * sp.stride];
                        }
                    }
                });
            },
            &mut out,
            per,
        );
        Ok(out)
    }

    /// The adjoint of [`Phases::split_input`]: the input gradient `(N, C, *input)` from the
    /// split one (each input position lies in one phase position; positions past the last
    /// window, which a transposed convolution's `output_padding` adds, get zero).
    pub(super) fn merge_input<T: ConvScalar>(&self, gs: &[T]) -> Result<Vec<T>> {
        let vol: usize = self.input.iter().product::<usize>().max(1);
        let per = (self.phases() * self.plane.iter().product::<usize>()).max(1);
        let planes = gs.len() / per;
        let mut out = try_filled_vec(planes * vol, T::ZERO)?;
        self.per_plane(
            planes,
            &|u, dst| {
                let src = &gs[u * per..][..per];
                self.rows(|row, to, sp| {
                    if let Some(to) = to {
                        for (k, &v) in src[row + sp.lo..row + sp.hi].iter().enumerate() {
                            dst[to + sp.first + k * sp.stride] = v;
                        }
                    }
                });
            },
            &mut out,
            vol,
        );
        Ok(out)
    }

    /// Per original tap (kd, kh, kw): its phase and its position in the phase's sub-kernel.
    fn taps_of(&self) -> Vec<(usize, usize)> {
        let (s, k, t) = (self.stride, self.kernel, self.taps);
        let mut v = Vec::with_capacity(k.iter().product());
        for a in 0..k[0] {
            for b in 0..k[1] {
                for c in 0..k[2] {
                    let phase = ((a % s[0]) * s[1] + b % s[1]) * s[2] + c % s[2];
                    let m = ((a / s[0]) * t[1] + b / s[1]) * t[2] + c / s[2];
                    v.push((phase, m));
                }
            }
        }
        v
    }

    /// The split weight `(O, C/g·S, *taps)` of `w` `(O, C/g, *kernel)`: zero where a phase's
    /// sub-kernel reaches past the kernel.
    pub(super) fn split_weight<T: ConvScalar>(&self, w: &[T]) -> Result<Vec<T>> {
        let (kn, tn, ph) = (
            self.kernel.iter().product::<usize>(),
            self.taps.iter().product::<usize>(),
            self.phases(),
        );
        let mut out = try_filled_vec(w.len() / kn.max(1) * ph * tn, T::ZERO)?;
        let map = self.taps_of();
        for (src, dst) in w.chunks_exact(kn.max(1)).zip(out.chunks_exact_mut(ph * tn)) {
            for (&v, &(phase, m)) in src.iter().zip(&map) {
                dst[phase * tn + m] = v;
            }
        }
        Ok(out)
    }

    /// The adjoint of [`Phases::split_weight`]: the weight gradient from the split one.
    pub(super) fn merge_weight<T: ConvScalar>(&self, gs: &[T]) -> Result<Vec<T>> {
        let (kn, tn, ph) = (
            self.kernel.iter().product::<usize>(),
            self.taps.iter().product::<usize>(),
            self.phases(),
        );
        let mut out = try_filled_vec(gs.len() / (ph * tn).max(1) * kn, T::ZERO)?;
        let map = self.taps_of();
        for (src, dst) in gs
            .chunks_exact((ph * tn).max(1))
            .zip(out.chunks_exact_mut(kn.max(1)))
        {
            for (d, &(phase, m)) in dst.iter_mut().zip(&map) {
                *d = src[phase * tn + m];
            }
        }
        Ok(out)
    }
}
