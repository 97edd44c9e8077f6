"""optim.swa_utils: the averaged weights against their closed forms (the mean of the models
seen; the EMA recursion), batch-norm statistics recomputed over a loader against NumPy, SWALR's
lr sequence, and all of it against torch when it is installed."""

from __future__ import annotations

from typing import Any, List

import ferrograd as fg
import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def _net(lib: Any) -> Any:
    net = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 1))
    # The same weights in either library.
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for p in net.parameters():
            p.copy_(lib.tensor(rng.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))
    return net


def _snapshots(lib: Any, kind: str, steps: int = 5) -> Any:
    """Train a few SGD steps, folding each model into the average; the averaged weights."""
    net = _net(lib)
    su = lib.optim.swa_utils
    avg = {
        "swa": lambda: su.AveragedModel(net),
        "ema": lambda: su.AveragedModel(net, multi_avg_fn=su.get_ema_multi_avg_fn(0.9)),
        "ema_fn": lambda: su.AveragedModel(net, avg_fn=su.get_ema_avg_fn(0.8), use_buffers=True),
    }[kind]()
    opt = lib.optim.SGD(net.parameters(), lr=0.1)
    x = lib.tensor(np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32))
    seen = []
    for _ in range(steps):
        opt.zero_grad()
        net(x).pow(2).mean().backward()
        opt.step()
        avg.update_parameters(net)
        seen.append([p.detach().numpy().copy() for p in net.parameters()])
    assert int(avg.n_averaged) == steps
    return [p.detach().numpy() for p in avg.module.parameters()], seen


def test_swa_is_the_mean_of_the_models_seen() -> None:
    got, seen = _snapshots(fg, "swa")
    for k, g in enumerate(got):
        np.testing.assert_allclose(g, np.mean([s[k] for s in seen], axis=0), rtol=1e-5, atol=1e-7)


def test_ema_follows_its_recursion() -> None:
    got, seen = _snapshots(fg, "ema")
    for k, g in enumerate(got):
        want = seen[0][k]
        for s in seen[1:]:
            want = 0.9 * want + 0.1 * s[k]
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)


def test_update_bn_recomputes_the_statistics_over_the_loader() -> None:
    net = _net(fg)
    rng = np.random.default_rng(2)
    batches = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(4)]
    loader = [(fg.tensor(b), fg.zeros(5)) for b in batches]
    net.eval()
    fg.optim.swa_utils.update_bn(loader, net)
    assert not net.training and net[1].momentum == 0.1
    with fg.no_grad():
        hidden = [net[0](fg.tensor(b)).numpy().astype(np.float64) for b in batches]
    # momentum=None: a cumulative average of the batch means and unbiased variances.
    mean = np.mean([h.mean(0) for h in hidden], axis=0)
    var = np.mean([h.var(0, ddof=1) for h in hidden], axis=0)
    np.testing.assert_allclose(net[1].running_mean.numpy(), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net[1].running_var.numpy(), var, rtol=1e-5, atol=1e-6)
    assert int(net[1].num_batches_tracked) == 4


def _swalr(lib: Any, strategy: str, anneal: int) -> List[float]:
    p = lib.zeros(1, requires_grad=True)
    opt = lib.optim.SGD([p], lr=0.5)
    sched = lib.optim.swa_utils.SWALR(
        opt, swa_lr=0.05, anneal_epochs=anneal, anneal_strategy=strategy
    )
    out = [opt.param_groups[0]["lr"]]
    for _ in range(8):
        opt.step()
        sched.step()
        out.append(opt.param_groups[0]["lr"])
    return out


def test_swalr_anneals_to_swa_lr_and_checks_arguments() -> None:
    lrs = _swalr(fg, "linear", 4)
    # Linear: from 0.5 to 0.05 in 4 steps, then held.
    np.testing.assert_allclose(lrs[:6], [0.5, 0.3875, 0.275, 0.1625, 0.05, 0.05], rtol=1e-12)
    assert _swalr(fg, "cos", 0)[1:] == pytest.approx([0.05] * 8)
    opt = fg.optim.SGD([fg.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must by one of"):
        fg.optim.swa_utils.SWALR(opt, 0.05, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        fg.optim.swa_utils.SWALR(opt, 0.05, anneal_epochs=-1)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        fg.optim.swa_utils.AveragedModel(
            _net(fg),
            avg_fn=fg.optim.swa_utils.get_swa_avg_fn(),
            multi_avg_fn=fg.optim.swa_utils.get_swa_multi_avg_fn(),
        )


@needs_torch
@pytest.mark.parametrize("kind", ["swa", "ema", "ema_fn"])
def test_averages_match_torch(kind: str) -> None:
    ours, _ = _snapshots(fg, kind)
    theirs, _ = _snapshots(torch, kind)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("strategy,anneal", [("cos", 5), ("linear", 3), ("cos", 0)])
def test_swalr_matches_torch(strategy: str, anneal: int) -> None:
    assert _swalr(fg, strategy, anneal) == pytest.approx(_swalr(torch, strategy, anneal), rel=1e-12)
