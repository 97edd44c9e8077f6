"""ferrograd.optim.lr_scheduler against closed forms and torch's lr sequences."""

from __future__ import annotations

import math
import re

import ferrograd as fg
import pytest

EPOCHS = 30


def make(lib, name, opt_name="SGD", **opt_kw):
    p = lib.zeros(2, requires_grad=True)
    opt = getattr(lib.optim, opt_name)([p], lr=0.1, **opt_kw)
    return opt, SCHEDULERS[name](lib, opt)


SCHEDULERS = {
    "StepLR": lambda lib, o: lib.optim.lr_scheduler.StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda lib, o: lib.optim.lr_scheduler.MultiStepLR(o, [3, 8, 8, 20], 0.3),
    "ExponentialLR": lambda lib, o: lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda lib, o: lib.optim.lr_scheduler.CosineAnnealingLR(o, 10, 0.01),
    "LambdaLR": lambda lib, o: lib.optim.lr_scheduler.LambdaLR(o, lambda e: 1 / (1 + e)),
    "LinearLR": lambda lib, o: lib.optim.lr_scheduler.LinearLR(o, 0.25, 1.0, total_iters=8),
    "OneCycleLR": lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=EPOCHS + 1),
    "OneCycleLR3": lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(
        o, 1.0, total_steps=EPOCHS + 1, three_phase=True, anneal_strategy="linear"
    ),
    "SequentialLR": lambda lib, o: lib.optim.lr_scheduler.SequentialLR(
        o,
        [
            lib.optim.lr_scheduler.LinearLR(o, 0.1, total_iters=5),
            lib.optim.lr_scheduler.CosineAnnealingLR(o, 12),
        ],
        milestones=[5],
    ),
    "ConstantLR": lambda lib, o: lib.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=4),
    "PolynomialLR": lambda lib, o: lib.optim.lr_scheduler.PolynomialLR(
        o, total_iters=12, power=2.0
    ),
    "MultiplicativeLR": lambda lib, o: lib.optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.95),
    "CosineAnnealingWarmRestarts": lambda lib, o: (
        lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2, eta_min=0.001)
    ),
    "ChainedScheduler": lambda lib, o: lib.optim.lr_scheduler.ChainedScheduler(
        [
            lib.optim.lr_scheduler.ConstantLR(o, factor=0.1, total_iters=2),
            lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9),
        ]
    ),
    "CyclicLR": lambda lib, o: lib.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=4, step_size_down=6
    ),
    "CyclicLR2": lambda lib, o: lib.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=3, mode="triangular2"
    ),
    "CyclicLRexp": lambda lib, o: lib.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=5, mode="exp_range", gamma=0.95
    ),
    "CyclicLRfn": lambda lib, o: lib.optim.lr_scheduler.CyclicLR(
        o,
        0.01,
        0.1,
        step_size_up=2,
        step_size_down=5,
        scale_fn=lambda x: 1 / (1 + x),
        scale_mode="iterations",
        cycle_momentum=False,
    ),
    # torch's warm-up pattern: a constant phase, then a linear one, then a polynomial decay.
    "SequentialLR3": lambda lib, o: lib.optim.lr_scheduler.SequentialLR(
        o,
        [
            lib.optim.lr_scheduler.ConstantLR(o, factor=0.2, total_iters=3),
            lib.optim.lr_scheduler.LinearLR(o, 0.5, total_iters=4),
            lib.optim.lr_scheduler.PolynomialLR(o, total_iters=10),
        ],
        milestones=[3, 7],
    ),
}


def _sgdr(e: int) -> float:
    # Periods of 4, 8, 16 epochs starting at 0, 4, 12, 28.
    start, period = 0, 4
    while e >= start + period:
        start, period = start + period, period * 2
    return 0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi * (e - start) / period)) / 2


def _tri(e: int, up: int, down: int) -> float:
    """The triangle wave of CyclicLR: 0 at each cycle's start, 1 after ``up`` steps."""
    t = e % (up + down)
    return t / up if t <= up else (up + down - t) / down


CLOSED = {
    "CyclicLR": lambda e: 0.01 + 0.09 * _tri(e, 4, 6),
    "CyclicLR2": lambda e: 0.01 + 0.09 * _tri(e, 3, 3) / 2 ** (e // 6),
    "CyclicLRexp": lambda e: 0.01 + 0.09 * _tri(e, 5, 5) * 0.95**e,
    "CyclicLRfn": lambda e: 0.01 + 0.09 * _tri(e, 2, 5) / (1 + e),
    "ConstantLR": lambda e: 0.1 * (0.5 if e < 4 else 1.0),
    "PolynomialLR": lambda e: 0.1 * (1 - min(e, 12) / 12) ** 2,
    "MultiplicativeLR": lambda e: 0.1 * 0.95**e,
    "CosineAnnealingWarmRestarts": _sgdr,
    "ChainedScheduler": lambda e: 0.1 * (0.1 if e < 2 else 1.0) * 0.9**e,
    "StepLR": lambda e: 0.1 * 0.5 ** (e // 7),
    "MultiStepLR": lambda e: 0.1 * 0.3 ** (int(e >= 3) + 2 * int(e >= 8) + int(e >= 20)),
    "ExponentialLR": lambda e: 0.1 * 0.9**e,
    "CosineAnnealingLR": lambda e: 0.01 + (0.1 - 0.01) * (1 + math.cos(math.pi * e / 10)) / 2,
    "LambdaLR": lambda e: 0.1 / (1 + e),
    "LinearLR": lambda e: 0.1 * (0.25 + 0.75 * min(e, 8) / 8),
}


def lrs(lib, name, opt_name="SGD"):
    opt, sched = make(lib, name, opt_name)
    out = [sched.get_last_lr()[0]]
    for _ in range(EPOCHS):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
        assert opt.param_groups[0]["lr"] == out[-1]
    return out, sched


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_closed_forms(name):
    got, sched = lrs(fg, name)
    assert getattr(sched, "last_epoch", EPOCHS) == EPOCHS  # a chain has none (as torch's)
    for e, lr in enumerate(got):
        assert lr == pytest.approx(CLOSED[name](e), rel=1e-12, abs=1e-15), e


def test_one_cycle_shape():
    got, _ = lrs(fg, "OneCycleLR")
    assert got[0] == pytest.approx(1.0 / 25)
    assert 0.99 < max(got) <= 1.0  # the peak falls between steps (end_step 8.3)
    assert got[-1] == pytest.approx(1.0 / 25 / 1e4)


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_matches_torch(name, opt_name):
    torch = pytest.importorskip("torch")
    mine, _ = lrs(fg, name, opt_name)
    theirs, _ = lrs(torch, name, opt_name)
    assert mine == pytest.approx(theirs, rel=1e-12, abs=1e-15)


def test_reduce_lr_on_plateau():
    p = fg.zeros(1, requires_grad=True)
    opt = fg.optim.SGD([p], lr=1.0)
    sched = fg.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=2, cooldown=1, min_lr=0.05)
    metrics = [5, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]
    seen = []
    for m in metrics:
        sched.step(m)
        seen.append(sched.get_last_lr()[0])
    assert seen == pytest.approx([1, 1, 1, 1, 0.1, 0.1, 0.1, 0.1, 0.01 * 5, 0.05, 0.05, 0.05])
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        fg.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode what is unknown!"):
        fg.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="what")


def test_reduce_lr_on_plateau_matches_torch():
    torch = pytest.importorskip("torch")
    metrics = [5, 4, 4.1, 3.9, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3, 3, 2.99999, 3]
    out = []
    for lib in (fg, torch):
        p = lib.zeros(1, requires_grad=True)
        opt = lib.optim.Adam([p], lr=1.0)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, "min", 0.5, 1, threshold=0.01)
        seq = []
        for m in metrics:
            sched.step(m)
            seq.append(sched.get_last_lr()[0])
        out.append(seq)
    assert out[0] == out[1]


def test_state_dict_resumes():
    ref, _ = lrs(fg, "CosineAnnealingLR")
    opt, sched = make(fg, "CosineAnnealingLR")
    for _ in range(10):
        opt.step()
        sched.step()
    sd, osd = sched.state_dict(), opt.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 10
    opt2, sched2 = make(fg, "CosineAnnealingLR")
    opt2.load_state_dict(osd)
    sched2.load_state_dict(sd)
    got = []
    for _ in range(EPOCHS - 10):
        opt2.step()
        sched2.step()
        got.append(sched2.get_last_lr()[0])
    assert got == pytest.approx(ref[11:], rel=1e-12)


def test_errors():
    p = fg.zeros(1, requires_grad=True)
    opt = fg.optim.SGD([p], lr=1.0)
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        fg.optim.lr_scheduler.StepLR([], 3)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        fg.optim.lr_scheduler.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="You must define either total_steps"):
        fg.optim.lr_scheduler.OneCycleLR(opt, 1.0)
    with pytest.raises(KeyError, match="initial_lr"):
        fg.optim.lr_scheduler.StepLR(fg.optim.SGD([fg.zeros(1)]), 3, last_epoch=4)


def test_warm_restarts_take_fractional_epochs_and_check_arguments():
    p = fg.zeros(1, requires_grad=True)
    opt = fg.optim.SGD([p], lr=1.0)
    sched = fg.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=2)
    # Epoch 17.5 lies 7.5 epochs into the second period (of 20 epochs, from 10 to 30).
    sched.step(17.5)
    assert sched.get_last_lr()[0] == pytest.approx((1 + math.cos(math.pi * 7.5 / 20)) / 2)
    assert sched.last_epoch == 17
    with pytest.raises(ValueError, match="Expected positive integer T_0"):
        fg.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="Expected integer T_mult >= 1"):
        fg.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=0)
    with pytest.raises(ValueError, match="Expected non-negative epoch"):
        sched.step(-1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        fg.optim.lr_scheduler.ConstantLR(opt, factor=2.0)
    with pytest.raises(ValueError, match="at least one scheduler"):
        fg.optim.lr_scheduler.ChainedScheduler([])


@pytest.mark.parametrize("opt_name, key", [("SGD", "momentum"), ("Adam", "betas")])
def test_cyclic_momentum(opt_name, key):
    p = fg.zeros(1, requires_grad=True)
    opt = getattr(fg.optim, opt_name)([p], lr=1.0)
    sched = fg.optim.lr_scheduler.CyclicLR(
        opt, 0.01, 0.1, step_size_up=4, step_size_down=6, base_momentum=0.7, max_momentum=0.95
    )
    group = opt.param_groups[0]
    assert group["max_momentum"] == 0.95 and group["base_momentum"] == 0.7
    for e in range(25):
        m = group[key][0] if key == "betas" else group[key]
        assert m == pytest.approx(0.95 - 0.25 * _tri(e, 4, 6), rel=1e-12), e
        if key == "betas":
            assert group["betas"][1] == 0.999
        opt.step()
        sched.step()


def test_cyclic_momentum_matches_torch():
    torch = pytest.importorskip("torch")
    seqs = []
    for lib in (fg, torch):
        p = lib.zeros(1, requires_grad=True)
        opt = lib.optim.SGD([p], lr=1.0, momentum=0.9)
        sched = lib.optim.lr_scheduler.CyclicLR(
            opt, [0.01], 0.2, step_size_up=3, mode="exp_range", gamma=0.9, base_momentum=0.6
        )
        seq = []
        for _ in range(20):
            seq += [opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]]
            opt.step()
            sched.step()
        seqs.append(seq)
    assert seqs[0] == pytest.approx(seqs[1], rel=1e-12)


def test_cyclic_errors_and_state():
    p = fg.zeros(1, requires_grad=True)
    opt = fg.optim.SGD([p], lr=1.0)
    CyclicLR = fg.optim.lr_scheduler.CyclicLR
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        CyclicLR(opt, 0.1, 1.0, mode="sine")
    with pytest.raises(
        ValueError,
        match=re.escape(
            "max_lr must have the same length as optimizer.param_groups. max_lr has 2 values, "
            "param_groups has 1."
        ),
    ):
        CyclicLR(opt, 0.1, [1.0, 2.0])
    with pytest.raises(
        ValueError,
        match="optimizer must support momentum or beta1 with `cycle_momentum` option enabled",
    ):
        CyclicLR(fg.optim.Adagrad([p]), 0.1, 1.0)
    with pytest.raises(TypeError, match="int is not an Optimizer"):
        CyclicLR(3, 0.1, 1.0)

    class Halving:
        def __init__(self):
            self.base = 2.0

        def __call__(self, x):
            return 1 / self.base ** (x - 1)

    fn = Halving()
    sched = CyclicLR(opt, 0.1, 1.0, step_size_up=2, scale_fn=fn)
    for _ in range(5):
        sched.step()
    sd = sched.state_dict()
    assert sd["_scale_fn_custom"] == {"base": 2.0} and "_scale_fn_ref" not in sd
    fn2 = Halving()
    fn2.base = 3.0
    opt2 = fg.optim.SGD([fg.zeros(1, requires_grad=True)], lr=1.0)
    sched2 = CyclicLR(opt2, 0.1, 1.0, step_size_up=2, scale_fn=fn2)
    sched2.load_state_dict(sd)
    assert fn2.base == 2.0 and sched2.last_epoch == 5
    sched.step()
    sched2.step()
    assert sched2.get_last_lr() == sched.get_last_lr()
