"""nn containers, init and layers: torch's repr text, init distributions, forward and gradients
against closed forms / gradcheck, and (when torch is installed) against torch with the same
weights."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Callable, List

import ferrograd as torch
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd import nn

# Copied from running torch 2.x on the same model (reference text, not computed here).
TORCH_REPR = """Sequential(
  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
  (1): ReLU()
  (2): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  (3): Flatten(start_dim=1, end_dim=-1)
  (4): Linear(in_features=16, out_features=10, bias=True)
  (5): LayerNorm((10,), eps=1e-05, elementwise_affine=True, bias=True)
  (6): Dropout(p=0.1, inplace=False)
  (7): ModuleList(
    (0-1): 2 x Tanh()
  )
  (8): Embedding(10, 3, padding_idx=0)
  (9): GELU(approximate='none')
  (10): Softmax(dim=1)
  (11): LeakyReLU(negative_slope=0.2)
  (12): AvgPool2d(kernel_size=2, stride=2, padding=0)
)"""


def test_repr_matches_torch_text() -> None:
    m = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16, 10),
        nn.LayerNorm(10),
        nn.Dropout(0.1),
        nn.ModuleList([nn.Tanh(), nn.Tanh()]),
        nn.Embedding(10, 3, padding_idx=0),
        nn.GELU(),
        nn.Softmax(dim=1),
        nn.LeakyReLU(0.2),
        nn.AvgPool2d(2),
    )
    assert repr(m) == TORCH_REPR
    assert repr(nn.ParameterList([nn.Parameter(torch.randn(2, 3))])) == (
        "ParameterList(  (0): Parameter containing: [torch.float32 of size 2x3])"
    )
    assert (
        " ".join(
            repr(x)
            for x in (nn.Hardtanh(), nn.ReLU6(), nn.ELU(), nn.Softplus(), nn.Unflatten(1, (2, 3)))
        )
        == "Hardtanh(min_val=-1.0, max_val=1.0) ReLU6() ELU(alpha=1.0) "
        "Softplus(beta=1.0, threshold=20.0) Unflatten(dim=1, unflattened_size=(2, 3))"
    )


def test_sequential_indexing_and_mutation() -> None:
    a, b, c = nn.ReLU(), nn.Tanh(), nn.Sigmoid()
    s = nn.Sequential(a, b, c)
    assert len(s) == 3 and s[0] is a and s[-1] is c and list(s) == [a, b, c]
    sl = s[1:]
    assert isinstance(sl, nn.Sequential) and list(sl) == [b, c]
    with pytest.raises(IndexError):
        s[3]
    d = nn.Identity()
    s.append(d)
    s.insert(0, nn.ELU())
    assert [type(m).__name__ for m in s] == ["ELU", "ReLU", "Tanh", "Sigmoid", "Identity"]
    del s[0]
    assert list(s) == [a, b, c, d] and list(s._modules) == ["0", "1", "2", "3"]
    s.extend([nn.ReLU()])
    assert len(s) == 5
    od = nn.Sequential(OrderedDict([("first", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    assert [n for n, _ in od.named_parameters()] == ["first.weight", "first.bias"]
    assert od(torch.randn(4, 2)).shape == (4, 3)


def test_module_list_dict_parameter_containers() -> None:
    ml = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
    ml.append(nn.ReLU())
    assert len(ml) == 3 and [n for n, _ in ml.named_parameters()][-1] == "1.bias"
    del ml[0]
    assert list(ml._modules) == ["0", "1"]
    md = nn.ModuleDict({"b": nn.ReLU(), "a": nn.Linear(1, 1)})
    assert list(md.keys()) == ["b", "a"] and "a" in md and len(md) == 2
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]
    pl = nn.ParameterList([torch.zeros(2), nn.Parameter(torch.ones(1))])
    assert all(isinstance(p, nn.Parameter) for p in pl)
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"]
    pd = nn.ParameterDict({"w": torch.zeros(2)})
    pd["v"] = torch.ones(3)
    assert isinstance(pd["w"], nn.Parameter) and list(pd.keys()) == ["w", "v"]
    assert [n for n, _ in pd.named_parameters()] == ["w", "v"]
    assert list(nn.Module().state_dict().keys()) == []


def test_init_distributions() -> None:
    torch.manual_seed(0)
    w = torch.empty(400, 250)
    nn.init.uniform_(w, -2.0, 3.0)
    a = w.numpy()
    assert a.min() >= -2.0 and a.max() < 3.0 and abs(a.mean() - 0.5) < 0.05
    nn.init.normal_(w, 1.0, 2.0)
    assert abs(w.numpy().mean() - 1.0) < 0.05 and abs(w.numpy().std() - 2.0) < 0.05
    nn.init.xavier_uniform_(w)
    bound = math.sqrt(6.0 / 650)
    assert np.abs(w.numpy()).max() <= bound
    assert abs(w.numpy().std() - bound / math.sqrt(3)) < 0.01 * bound
    nn.init.xavier_normal_(w, gain=2.0)
    assert abs(w.numpy().std() - 2.0 * math.sqrt(2.0 / 650)) < 0.02
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    assert np.abs(w.numpy()).max() <= 1 / math.sqrt(250) + 1e-7
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2.0 / 400)) < 0.003
    nn.init.trunc_normal_(w, std=1.0, a=-1.0, b=1.5)
    assert w.numpy().min() >= -1.0 and w.numpy().max() <= 1.5
    nn.init.constant_(w, 0.25)
    assert (w.numpy() == 0.25).all()
    nn.init.ones_(w)
    nn.init.zeros_(w)
    assert (w.numpy() == 0).all()
    e = nn.init.eye_(torch.empty(3, 4))
    np.testing.assert_array_equal(e.numpy(), np.eye(3, 4))
    q = nn.init.orthogonal_(torch.empty(5, 3, dtype=torch.float64))
    np.testing.assert_allclose(q.numpy().T @ q.numpy(), np.eye(3), atol=1e-12)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    assert nn.init._calculate_fan_in_and_fan_out(torch.empty(8, 3, 5, 5)) == (75, 200)
    p = nn.Parameter(torch.zeros(3))
    nn.init.uniform_(p)
    assert p.requires_grad and p.grad_fn is None


def test_default_layer_init_bounds() -> None:
    torch.manual_seed(3)
    lin = nn.Linear(100, 50)
    bound = 1 / math.sqrt(100)
    assert np.abs(lin.weight.detach().numpy()).max() <= bound
    assert np.abs(lin.bias.detach().numpy()).max() <= bound
    conv = nn.Conv2d(4, 6, 3)
    assert np.abs(conv.weight.detach().numpy()).max() <= 1 / math.sqrt(36)
    emb = nn.Embedding(5, 2, padding_idx=1)
    assert (emb.weight.detach().numpy()[1] == 0).all()
    assert nn.Linear(2, 3, bias=False).bias is None


def test_dropout_train_eval() -> None:
    torch.manual_seed(0)
    d = nn.Dropout(0.5)
    x = torch.ones(1000)
    y = d(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6
    d.eval()
    np.testing.assert_array_equal(d(x).numpy(), x.numpy())
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


ACTIVATIONS: List[Any] = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.ReLU6(), lambda x: np.clip(x, 0, 6)),
    (nn.LeakyReLU(0.2), lambda x: np.where(x >= 0, x, 0.2 * x)),
    (nn.ELU(), lambda x: np.where(x > 0, x, np.expm1(x))),
    (
        nn.SELU(),
        lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
    ),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Mish(), lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    (nn.Softplus(), lambda x: np.log1p(np.exp(x))),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Hardtanh(), lambda x: np.clip(x, -1, 1)),
    (nn.Hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (nn.Softmax(dim=1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (
        nn.LogSoftmax(dim=1),
        lambda x: x - np.log(np.exp(x).sum(1, keepdims=True)),
    ),
]


@pytest.mark.parametrize("mod,ref", ACTIVATIONS, ids=lambda v: type(v).__name__)
def test_activation_values_and_gradcheck(mod: nn.Module, ref: Callable[..., Any]) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5)) * 3
    x[np.abs(x) < 0.05] = 0.3  # away from kinks
    x[np.abs(np.abs(x) - 3) < 0.05] = 2.5
    np.testing.assert_allclose(mod(torch.tensor(x)).numpy(), ref(x), rtol=1e-6, atol=1e-9)
    xt = torch.tensor(x, requires_grad=True)
    assert torch.autograd.gradcheck(mod, (xt,))


def test_gelu_closed_form() -> None:
    x = np.linspace(-3, 3, 13)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(
        nn.GELU()(torch.tensor(x)).numpy(), x * 0.5 * (1 + erf(x / math.sqrt(2))), rtol=1e-6
    )


def _gradcheck_params(mod: nn.Module, *inputs: Any) -> None:
    mod.double()
    names = [n for n, _ in mod.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in mod.parameters()]

    def fn(*args: Any) -> Any:
        # gradcheck perturbs the tensors it passes in: put them where the module reads
        saved = {}
        for name, value in zip(names, args):
            owner, _, leaf = name.rpartition(".")
            m = mod.get_submodule(owner)
            saved[name] = m._parameters[leaf]
            m._parameters[leaf] = value
        try:
            return mod(*inputs)
        finally:
            for name, value in saved.items():
                owner, _, leaf = name.rpartition(".")
                mod.get_submodule(owner)._parameters[leaf] = value

    assert torch.autograd.gradcheck(fn, tuple(params))


def test_layers_gradcheck_float64() -> None:
    torch.manual_seed(0)
    x2 = torch.randn(3, 4, dtype=torch.float64)
    _gradcheck_params(nn.Linear(4, 2), x2)
    _gradcheck_params(nn.LayerNorm(4), x2)
    _gradcheck_params(nn.Conv1d(2, 3, 2), torch.randn(2, 2, 5, dtype=torch.float64))
    _gradcheck_params(nn.Conv2d(2, 2, 2, padding=1), torch.randn(1, 2, 3, 3, dtype=torch.float64))
    _gradcheck_params(nn.Embedding(5, 3), torch.tensor([[0, 4], [2, 2]]))
    lin = nn.Linear(4, 3).double()
    assert torch.autograd.gradcheck(lambda x: lin(x), (x2.clone().requires_grad_(),))


def test_linear_closed_form() -> None:
    lin = nn.Linear(3, 2)
    x = np.arange(6.0).reshape(2, 3).astype(np.float32)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    out = lin(torch.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T + b, rtol=1e-5)
    out.sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.ones((2, 1)) * x.sum(0), rtol=1e-6)
    np.testing.assert_allclose(lin.bias.grad.numpy(), [2.0, 2.0])


LOSSES: List[Any] = [
    (nn.MSELoss(), lambda a, b: ((a - b) ** 2).mean()),
    (nn.L1Loss(reduction="sum"), lambda a, b: np.abs(a - b).sum()),
    (
        nn.SmoothL1Loss(beta=0.5),
        lambda a, b: np.where(
            np.abs(a - b) < 0.5, 0.5 * (a - b) ** 2 / 0.5, np.abs(a - b) - 0.25
        ).mean(),
    ),
    (
        nn.HuberLoss(delta=0.5),
        lambda a, b: np.where(
            np.abs(a - b) < 0.5, 0.5 * (a - b) ** 2, 0.5 * (np.abs(a - b) - 0.25)
        ).mean(),
    ),
    (
        nn.BCEWithLogitsLoss(),
        lambda a, b: (np.log1p(np.exp(a)) - b * a).mean(),
    ),
]


@pytest.mark.parametrize("mod,ref", LOSSES, ids=lambda v: type(v).__name__)
def test_regression_losses(mod: nn.Module, ref: Callable[..., Any]) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(4, 3)), rng.uniform(size=(4, 3))
    np.testing.assert_allclose(float(mod(torch.tensor(a), torch.tensor(b))), ref(a, b), rtol=1e-10)
    at = torch.tensor(a, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: mod(x, torch.tensor(b)), (at,))


def test_classification_losses() -> None:
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(5, 4))
    target = np.array([0, 3, 1, 1, 2])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    ref = -logp[np.arange(5), target].mean()
    lt, tt = torch.tensor(logits), torch.tensor(target)
    np.testing.assert_allclose(float(nn.CrossEntropyLoss()(lt, tt)), ref, rtol=1e-10)
    np.testing.assert_allclose(float(nn.NLLLoss()(torch.tensor(logp), tt)), ref, rtol=1e-10)
    w = np.array([1.0, 2.0, 0.5, 1.5])
    wref = -(w[target] * logp[np.arange(5), target]).sum() / w[target].sum()
    np.testing.assert_allclose(
        float(nn.CrossEntropyLoss(weight=torch.tensor(w))(lt, tt)), wref, rtol=1e-10
    )
    p = rng.uniform(0.1, 0.9, size=(6,))
    y = rng.uniform(size=(6,))
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()
    np.testing.assert_allclose(
        float(nn.BCELoss()(torch.tensor(p), torch.tensor(y))), bce, rtol=1e-10
    )
    q = np.exp(logp)
    kl = (q * (np.log(q) - logp[::-1])).sum() / 5
    np.testing.assert_allclose(
        float(
            nn.KLDivLoss(reduction="batchmean")(
                torch.tensor(np.ascontiguousarray(logp[::-1])), torch.tensor(q)
            )
        ),
        kl,
        rtol=1e-10,
    )
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert nn.MSELoss(size_average=False).reduction == "sum"


def test_pooling_flatten_unflatten() -> None:
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(nn.MaxPool2d(2)(x).numpy(), [[[[5, 7], [13, 15]]]])
    np.testing.assert_array_equal(nn.AvgPool2d(2)(x).numpy(), [[[[2.5, 4.5], [10.5, 12.5]]]])
    assert nn.Flatten()(x).shape == (1, 16)
    assert nn.Unflatten(1, (2, 8))(nn.Flatten()(x)).shape == (1, 2, 8)


def test_utils_clip_and_vectors() -> None:
    a = nn.Parameter(torch.zeros(2))
    b = nn.Parameter(torch.zeros(1))
    a.grad = torch.tensor([3.0, 0.0])
    b.grad = torch.tensor([4.0])
    norm = nn.utils.clip_grad_norm_([a, b], 1.0)
    assert abs(float(norm) - 5.0) < 1e-6
    np.testing.assert_allclose(a.grad.numpy(), [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), [0.8], rtol=1e-5)
    nn.utils.clip_grad_value_([a, b], 0.7)
    np.testing.assert_allclose(b.grad.numpy(), [0.7], rtol=1e-6)
    v = nn.utils.parameters_to_vector([a, b])
    assert v.shape == (3,)
    nn.utils.vector_to_parameters(torch.tensor([1.0, 2.0, 3.0]), [a, b])
    np.testing.assert_array_equal(a.detach().numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(b.detach().numpy(), [3.0])


def test_tutorial_polynomial_fit() -> None:
    """PyTorch's "Learning PyTorch with Examples" nn.Module example, as torch users write it."""

    class Polynomial3(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(()))
            self.b = torch.nn.Parameter(torch.randn(()))
            self.c = torch.nn.Parameter(torch.randn(()))
            self.d = torch.nn.Parameter(torch.randn(()))

        def forward(self, x: Any) -> Any:
            return self.a + self.b * x + self.c * x**2 + self.d * x**3

    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    model = Polynomial3()
    criterion = torch.nn.MSELoss(reduction="sum")
    optimizer_lr = 1e-6
    losses = []
    for _ in range(500):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        losses.append(loss.item())
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= optimizer_lr * param.grad
    assert losses[-1] < 0.1 * losses[0]

    # the Sequential variant of the same tutorial
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    model2 = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    loss_fn = torch.nn.MSELoss(reduction="sum")
    first = None
    for _ in range(300):
        loss = loss_fn(model2(xx), y)
        first = loss.item() if first is None else first
        model2.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model2.parameters():
                param -= 1e-6 * param.grad
    assert loss.item() < 0.2 * first


def test_layers_match_torch() -> None:
    t = pytest.importorskip("torch")
    rng = np.random.default_rng(0)

    def copy(src: Any, dst: nn.Module) -> None:
        sd = {k: torch.tensor(v.detach().numpy()) for k, v in src.state_dict().items()}
        dst.load_state_dict(sd)

    cases = [
        (t.nn.Linear(4, 3), nn.Linear(4, 3), (2, 4)),
        (t.nn.LayerNorm(4), nn.LayerNorm(4), (2, 4)),
        (t.nn.Conv1d(2, 3, 2, padding=1), nn.Conv1d(2, 3, 2, padding=1), (2, 2, 5)),
        (t.nn.Conv2d(2, 3, 3, stride=2), nn.Conv2d(2, 3, 3, stride=2), (1, 2, 6, 6)),
        (
            t.nn.Sequential(t.nn.Linear(4, 5), t.nn.GELU(), t.nn.Linear(5, 2), t.nn.Tanh()),
            nn.Sequential(nn.Linear(4, 5), nn.GELU(), nn.Linear(5, 2), nn.Tanh()),
            (3, 4),
        ),
    ]
    for tm, fm, shape in cases:
        assert list(tm.state_dict().keys()) == list(fm.state_dict().keys())
        copy(tm, fm)
        x = rng.normal(size=shape).astype(np.float32)
        to = tm(t.tensor(x))
        fo = fm(torch.tensor(x))
        np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
        to.square().sum().backward()
        fo.square().sum().backward()
        for (n1, p1), (n2, p2) in zip(tm.named_parameters(), fm.named_parameters()):
            assert n1 == n2
            np.testing.assert_allclose(p2.grad.numpy(), p1.grad.numpy(), rtol=1e-4, atol=1e-5)
    x = rng.normal(size=(5, 4))
    tgt = np.array([0, 3, 1, 1, 2])
    for tl, fl in [
        (t.nn.CrossEntropyLoss(label_smoothing=0.1), nn.CrossEntropyLoss(label_smoothing=0.1)),
        (t.nn.MSELoss(), nn.MSELoss()),
    ]:
        target_t = (
            t.tensor(tgt) if isinstance(tl, t.nn.CrossEntropyLoss) else t.tensor(x[::-1].copy())
        )
        target_f = torch.tensor(target_t.numpy())
        np.testing.assert_allclose(
            float(fl(torch.tensor(x), target_f)), float(tl(t.tensor(x), target_t)), rtol=1e-10
        )
    assert repr(t.nn.Linear(2, 3)) == repr(nn.Linear(2, 3))
    _ = F


def test_bilinear_closed_form_and_gradcheck() -> None:
    torch.manual_seed(0)
    m = nn.Bilinear(3, 2, 4).double()
    assert repr(m) == "Bilinear(in1_features=3, in2_features=2, out_features=4, bias=True)"
    assert np.abs(m.weight.detach().numpy()).max() <= 1 / math.sqrt(3)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    w, bias = m.weight.detach().numpy(), m.bias.detach().numpy()
    ref = np.einsum("bi,oij,bj->bo", a, w, b) + bias
    np.testing.assert_allclose(m(torch.tensor(a), torch.tensor(b)).detach().numpy(), ref)
    _gradcheck_params(m, torch.tensor(a), torch.tensor(b))


def test_bilinear_matches_torch() -> None:
    t = pytest.importorskip("torch")
    tm, fm = t.nn.Bilinear(3, 2, 4), nn.Bilinear(3, 2, 4)
    fm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 2)).astype(np.float32)
    yt, yf = tm(t.tensor(a), t.tensor(b)), fm(torch.tensor(a), torch.tensor(b))
    np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    yt.square().sum().backward()
    yf.square().sum().backward()
    np.testing.assert_allclose(fm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-4)
    assert repr(tm) == repr(fm)


def test_device_arguments() -> None:
    assert nn.Linear(2, 2, device="cpu").weight.shape == (2, 2)
    assert nn.Conv2d(1, 1, 1, device=None).weight.shape == (1, 1, 1, 1)
    assert nn.LayerNorm(3, device="cpu:0").weight.shape == (3,)
    lin = nn.Linear(2, 2, dtype=torch.float64)
    assert lin.weight.dtype == torch.float64 and lin.bias.dtype == torch.float64
    with pytest.raises(RuntimeError, match="computes on the CPU only"):
        nn.Linear(2, 2, device="cuda")


def test_trunc_normal_matches_the_truncated_normal_moments():
    # Mean and variance of N(mu, s^2) truncated to [a, b], closed forms with z = (x - mu) / s.
    mu, s, a, b = 1.0, 2.0, -1.0, 2.0
    torch.manual_seed(0)
    w = nn.init.trunc_normal_(torch.empty(200_000), mean=mu, std=s, a=a, b=b).numpy()

    def pdf(z: float) -> float:
        return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

    def cdf(z: float) -> float:
        return 0.5 * (1 + math.erf(z / math.sqrt(2)))

    al, be = (a - mu) / s, (b - mu) / s
    mass = cdf(be) - cdf(al)
    mean = mu + s * (pdf(al) - pdf(be)) / mass
    var = s * s * (1 + (al * pdf(al) - be * pdf(be)) / mass - ((pdf(al) - pdf(be)) / mass) ** 2)
    assert w.min() >= a and w.max() <= b
    assert abs(w.mean() - mean) < 0.01
    assert abs(w.var() - var) < 0.01
