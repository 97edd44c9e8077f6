#!/usr/bin/env bash
# Build the release wheel (one abi3 wheel for CPython >= 3.9, manylinux_2_28, stripped), check it
# with auditwheel, and install it into a fresh venv of every CPython found, running a smoke test
# in each. Needs maturin, ziglang and auditwheel (pip install maturin ziglang auditwheel).
#   tools/release_wheel.sh [python3.9 python3.10 ...]   # interpreters to try (default: all found)
#   WHEEL=path.whl tools/release_wheel.sh               # check a wheel built before
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=${WHEEL:-}
if [ -z "$wheel" ]; then
  out=target/release-wheels
  rm -rf "$out"
  # zig links against glibc 2.28's symbol versions, so the wheel runs on any manylinux_2_28
  # system whatever glibc this machine has; maturin checks the policy and tags the wheel.
  maturin build --release --strip --zig --compatibility manylinux_2_28 --out "$out"
  wheel=$(ls "$out"/*.whl)
fi
echo "== $wheel"
case "$wheel" in *-cp39-abi3-manylinux_2_28_x86_64*.whl) ;; *) echo "unexpected wheel tag" >&2; exit 1 ;; esac
python -m auditwheel show "$wheel"

if [ "$#" -eq 0 ]; then
  set --
  for v in 3.9 3.10 3.11 3.12 3.13 3.14; do
    # pyenv's shims exist for versions that are not selected, so each candidate must run.
    for p in "$HOME/.pyenv/versions/$v".*/bin/python "python$v"; do
      if "$p" -c "" >/dev/null 2>&1; then set -- "$@" "$p"; break; fi
    done
  done
fi
for py in "$@"; do
  venv=$(mktemp -d)
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q "$wheel"
  "$venv/bin/python" - <<'PY'
import sys
import ferrograd as torch
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
(x.sin() * x).sum().backward()
expected = [v.cos() * v + v.sin() for v in (torch.tensor(1.0), torch.tensor(2.0), torch.tensor(3.0))]
assert all(abs(a - b.item()) < 1e-6 for a, b in zip(x.grad.tolist(), expected)), x.grad
print(f"ok: Python {sys.version.split()[0]}")
PY
  rm -rf "$venv"
done
