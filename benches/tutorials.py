"""The tutorial scripts of tests/python/tutorials/, timed as their authors wrote them: each runs
on ferrograd and, with the import changed back, on torch, in fresh processes, 2 threads each.

The clock covers the script's body only (the library and NumPy are imported before it
starts), so a script's figure is what its user waits for after `import`: model building, data
loading, training loops with their `.item()` calls, saving. Each script runs `--reps` times per
library, alternating, and the table shows the medians and their ratio.

    python benches/tutorials.py               # every script, 3 runs each
    python benches/tutorials.py --reps 5 gan_1d.py schedulers.py
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List

HERE = pathlib.Path(__file__).resolve().parent
TUTORIALS = HERE.parent / "tests" / "python" / "tutorials"
THREADS = int(os.environ.get("BENCH_THREADS", "2"))

# Run in a fresh interpreter: import the library, then time the script's body. NumPy is
# imported first too: torch imports it at its own import, ferrograd on first use, so a script
# starting `import numpy` would otherwise pay NumPy's import (~60 ms) on ferrograd's clock only.
HARNESS = """
import contextlib, io, sys, time
import numpy
import {lib} as _lib
_lib.set_num_threads({threads})
src = open({path!r}).read(){swap}
code = compile(src, {path!r}, "exec")
t0 = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    exec(code, {{"__name__": "__main__"}})
print(time.perf_counter() - t0)
"""

# test_tutorials.py's swap: the script with its import changed back to torch.
SWAP_TO_TORCH = (
    '.replace("import ferrograd as torch", "import torch").replace("ferrograd", "torch")'
)


def run_once(lib: str, path: pathlib.Path, cwd: str) -> float:
    swap = SWAP_TO_TORCH if lib == "torch" else ""
    code = HARNESS.format(lib=lib, threads=THREADS, path=str(path), swap=swap)
    env = dict(os.environ, FERROGRAD_NUM_THREADS=str(THREADS), OPENBLAS_THREAD_TIMEOUT="4")
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )
    if r.returncode != 0:
        raise RuntimeError(f"{path.name} on {lib} failed:\n{r.stderr[-2000:]}")
    return float(r.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", help="script names (default: all)")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    names = args.scripts or sorted(p.name for p in TUTORIALS.glob("*.py"))
    try:
        import torch  # noqa: F401

        libs = ["ferrograd", "torch"]
    except ImportError:
        libs = ["ferrograd"]
    print(f"threads: {THREADS}  reps: {args.reps}")
    print(f"{'script':<28} {'ferrograd s':>12} {'torch s':>10} {'fg/torch':>9}")
    ratios: List[float] = []
    with tempfile.TemporaryDirectory() as cwd:
        for name in names:
            times: Dict[str, List[float]] = {lib: [] for lib in libs}
            for _ in range(args.reps):
                for lib in libs:  # alternate, so drift on a shared machine hits both alike
                    times[lib].append(run_once(lib, TUTORIALS / name, cwd))
            med = {lib: statistics.median(v) for lib, v in times.items()}
            row = f"{name:<28} {med['ferrograd']:>12.3f}"
            if "torch" in med:
                ratio = med["ferrograd"] / med["torch"]
                ratios.append(ratio)
                row += f" {med['torch']:>10.3f} {ratio:>9.2f}"
            print(row, flush=True)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"{'geometric mean':<28} {'':>12} {'':>10} {geo:>9.2f}")


if __name__ == "__main__":
    main()
