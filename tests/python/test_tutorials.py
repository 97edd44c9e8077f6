"""Tutorial-style scripts, written as PyTorch users write them with only the import changed
(tests/python/tutorials/). Each must run and print a falling loss; with torch installed the same
source runs on torch (the import changed back) and the final losses must agree."""

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent / "tutorials"
SCRIPTS = sorted(p.name for p in HERE.glob("*.py"))


def run(source, cwd):
    r = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=dict(os.environ, FERROGRAD_NUM_THREADS="2"),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def final_loss(out):
    lines = [line for line in out.splitlines() if line.startswith("final")]
    assert lines, out
    return float(lines[-1].split()[-1])


def progress(out):
    return [float(line.split()[-1]) for line in out.splitlines() if line[:1].isdigit()]


@pytest.mark.parametrize("name", SCRIPTS)
def test_tutorial_runs_and_learns(name, tmp_path):
    src = (HERE / name).read_text()
    assert "import ferrograd as torch" in src
    out = run(src, tmp_path)
    losses = progress(out)
    assert losses and final_loss(out) < losses[0], out


@pytest.mark.parametrize("name", SCRIPTS)
def test_tutorial_matches_torch(name, tmp_path):
    pytest.importorskip("torch")
    src = (HERE / name).read_text()
    ours = final_loss(run(src, tmp_path))
    as_torch = src.replace("import ferrograd as torch", "import torch")
    as_torch = as_torch.replace("ferrograd", "torch")
    theirs = final_loss(run(as_torch, tmp_path))
    assert ours == pytest.approx(theirs, rel=1e-2, abs=1e-4)
