"""Fit the float32 tanh tables of `src/kernels/vmath_avx512.rs` and print them as Rust.

    python tools/fit_tanh_f32.py > /tmp/tables.rs

|x| below 0.5: tanh(a) = a + a s P(s), s = a^2, P of degree 5 (relative least squares on
Chebyshev nodes). From 0.5 up: 32 intervals, 8 per octave from [0.5, 1) to [4, 8), the last one
stretched to 9.1 (beyond it tanh rounds to 1). On each, tanh(c + t) = c0 + t R(t) with R of
degree 4 about a float32 center c picked near the middle so that tanh(c) is within a tiny
fraction of an ulp of the float32 c0: the constant then carries no rounding error, and
a - c is exact (Sterbenz). Only NumPy is needed; float64 tanh is exact enough to fit float32.
"""

import numpy as np

DEG_SMALL = 5
DEG_R = 4
SMALL = 0.5
LAST_HI = 9.1


def cheb_nodes(lo: float, hi: float, n: int) -> np.ndarray:
    k = np.arange(n)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, deg: int) -> np.ndarray:
    """Weighted least-squares monomial coefficients, lowest power first."""
    v = np.vander(x, deg + 1, increasing=True)
    return np.linalg.lstsq(v * w[:, None], y * w, rcond=None)[0]


def round_refit(x: np.ndarray, y: np.ndarray, w: np.ndarray, deg: int) -> np.ndarray:
    """Coefficients rounded to float32 one at a time, lowest first, refitting the rest."""
    out = []
    rest = y.copy()
    for j in range(deg + 1):
        c = fit(x, rest / x**j, w * x**j, deg - j)
        c0 = float(np.float32(c[0]))
        out.append(c0)
        rest = rest - c0 * x**j
    return np.array(out, dtype=np.float32)


def small() -> np.ndarray:
    a = cheb_nodes(1e-4, SMALL, 4000)
    s = a * a
    p = (np.tanh(a) - a) / (a * s)
    return round_refit(s, p, s * a / np.tanh(a), DEG_SMALL)


def intervals() -> list:
    edges = []
    for octave in range(-1, 3):
        lo = 2.0**octave
        edges += [(lo + i * lo / 8, lo + (i + 1) * lo / 8) for i in range(8)]
    edges[-1] = (edges[-1][0], LAST_HI)
    return edges


def center(lo: float, hi: float) -> float:
    """A float32 near the middle whose tanh lies closest to a float32."""
    mid = np.float32((lo + hi) / 2)
    cands = mid.view(np.int32) + np.arange(-20000, 20001, dtype=np.int32)
    c = cands.view(np.float32).astype(np.float64)
    t = np.tanh(c)
    err = np.abs(t - t.astype(np.float32)) / np.spacing(t.astype(np.float32))
    return float(c[np.argmin(err)])


def table() -> list:
    rows = []
    for lo, hi in intervals():
        c = center(lo, hi)
        c0 = float(np.float32(np.tanh(c)))
        t = cheb_nodes(lo - c, hi - c, 4000)
        t = t[t != 0]
        r = (np.tanh(c + t) - c0) / t
        coef = round_refit(t, r, np.abs(t) / np.tanh(c + t), DEG_R)
        rows.append((c, c0, coef))
    return rows


def rust_f32(v: float) -> str:
    """A float32 as the shortest decimal that rounds back to it (a valid Rust literal)."""
    return str(np.float32(v))


def main() -> None:
    p = small()
    print("/// P(s) of tanh(a) = a + a s P(s) below 0.5, highest power first.")
    print(f"const TANH_SMALL: [f32; {DEG_SMALL + 1}] = [")
    for v in p[::-1]:
        print(f"    {rust_f32(v)},")
    print("];")
    rows = table()
    print("/// Interval centers.")
    print("const TANH_CENTER: [f32; 32] = [" + ", ".join(rust_f32(r[0]) for r in rows) + "];")
    names = ["TANH_C0"] + [f"TANH_C{j + 1}" for j in range(DEG_R + 1)]
    cols = [[r[1] for r in rows]] + [[r[2][j] for r in rows] for j in range(DEG_R + 1)]
    for name, col in zip(names, cols):
        print(f"const {name}: [f32; 32] = [" + ", ".join(rust_f32(v) for v in col) + "];")


if __name__ == "__main__":
    main()
