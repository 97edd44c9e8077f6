"""The torch.func tutorials "Per-sample-gradients" and "Model ensembling", written as there with
``import ferrograd as torch``, their ``vmap`` lines as written. Checked against a plain autograd
loop and, when torch is installed, against torch.func's vmap on the same weights and data."""

from __future__ import annotations

import copy
import functools

import ferrograd
import numpy as np
import pytest

try:
    import torch as real_torch
except ImportError:  # pragma: no cover - depends on the machine
    real_torch = None


def models_for(torch):
    nn = torch.nn
    F = torch.nn.functional

    class SimpleCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.fc1 = nn.Linear(576, 128)  # 9216 for the tutorial's 28x28 images; 10x10 here
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    class SimpleMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 128)
            self.fc2 = nn.Linear(128, 128)
            self.fc3 = nn.Linear(128, 10)

        def forward(self, x):
            x = x.flatten(1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.fc2(x)
            x = F.relu(x)
            x = self.fc3(x)
            return x

    return SimpleCNN, SimpleMLP


def copy_weights(src, dst):
    """Load ferrograd module ``src``'s parameters and buffers into torch module ``dst``."""
    state = {
        k: real_torch.from_numpy(np.array(v.detach().numpy())) for k, v in src.state_dict().items()
    }
    dst.load_state_dict(state)


def npy(x):
    return np.asarray(x.detach().numpy())


def allclose(a, b, atol, rtol):
    """The tutorials' ``torch.allclose`` (ferrograd has no ``allclose`` yet)."""
    return np.allclose(npy(a), npy(b), atol=atol, rtol=rtol)


# ----- per-sample gradients -----------------------------------------------------------------------

BATCH = 6
RNG = np.random.default_rng(3)
DATA = RNG.standard_normal((BATCH, 1, 10, 10)).astype(np.float32)
TARGETS = RNG.integers(0, 10, size=BATCH)


def per_sample_grads_tutorial(torch, func, model, data, targets):
    """The tutorial's code. ``torch`` and ``func`` are the libraries under test."""
    F = torch.nn.functional
    from_func = func

    def loss_fn(predictions, targets):
        return F.nll_loss(predictions, targets)

    def compute_grad(sample, target):
        sample = sample.unsqueeze(0)  # prepend batch dimension for processing
        target = target.unsqueeze(0)
        prediction = model(sample)
        loss = loss_fn(prediction, target)
        return torch.autograd.grad(loss, list(model.parameters()))

    def compute_sample_grads(data, targets):
        """manually process each sample with per sample gradient"""
        sample_grads = [compute_grad(data[i], targets[i]) for i in range(BATCH)]
        sample_grads = zip(*sample_grads)
        sample_grads = [torch.stack(shards) for shards in sample_grads]
        return sample_grads

    per_sample_grads = compute_sample_grads(data, targets)

    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        targets = target.unsqueeze(0)
        predictions = from_func.functional_call(model, (params, buffers), (batch,))
        loss = loss_fn(predictions, targets)
        return loss

    ft_compute_grad = from_func.grad(compute_loss)
    ft_compute_sample_grad = from_func.vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
    ft_per_sample_grads = ft_compute_sample_grad(params, buffers, data, targets)
    return per_sample_grads, ft_per_sample_grads


def test_per_sample_gradients_tutorial():
    torch = ferrograd
    SimpleCNN, _ = models_for(torch)
    torch.manual_seed(0)
    model = SimpleCNN()
    data = torch.tensor(DATA)
    targets = torch.tensor(TARGETS)
    manual, ft = per_sample_grads_tutorial(torch, torch.func, model, data, targets)
    for per_sample_grad, ft_per_sample_grad in zip(manual, ft.values()):
        assert tuple(ft_per_sample_grad.shape) == (BATCH,) + tuple(per_sample_grad.shape[1:])
        assert allclose(per_sample_grad, ft_per_sample_grad, atol=3e-3, rtol=1e-5)
        assert not ft_per_sample_grad.requires_grad
    assert all(p.grad is None for p in model.parameters())

    if real_torch is None:
        return
    import torch.func as TF

    theirs_model = models_for(real_torch)[0]()
    copy_weights(model, theirs_model)
    _, theirs = per_sample_grads_tutorial(
        real_torch,
        TF,
        theirs_model,
        real_torch.from_numpy(DATA),
        real_torch.from_numpy(TARGETS),
    )
    for k in theirs:
        np.testing.assert_allclose(npy(ft[k]), theirs[k].numpy(), rtol=1e-4, atol=1e-5)


# ----- model ensembling ---------------------------------------------------------------------------

NUM_MODELS = 4
ENS_DATA = RNG.standard_normal((NUM_MODELS, 8, 1, 28, 28)).astype(np.float32)


def ensembling_tutorial(torch, func, models, data):
    minibatches = data[:NUM_MODELS]
    predictions_diff_minibatch_loop = [
        model(minibatch) for model, minibatch in zip(models, minibatches)
    ]
    minibatch = data[0]
    predictions2 = [model(minibatch) for model in models]

    params, buffers = func.stack_module_state(models)
    base_model = copy.deepcopy(models[0])
    base_model = base_model.to("meta")

    def fmodel(params, buffers, x):
        return func.functional_call(base_model, (params, buffers), (x,))

    predictions1_vmap = func.vmap(fmodel)(params, buffers, minibatches)
    predictions2_vmap = func.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
    return (
        params,
        predictions_diff_minibatch_loop,
        predictions2,
        predictions1_vmap,
        predictions2_vmap,
    )


def test_model_ensembling_tutorial():
    torch = ferrograd
    _, SimpleMLP = models_for(torch)
    torch.manual_seed(0)
    models = [SimpleMLP() for _ in range(NUM_MODELS)]
    data = torch.tensor(ENS_DATA)
    params, loop1, loop2, vm1, vm2 = ensembling_tutorial(torch, torch.func, models, data)
    assert list(params) == [f"fc{i}.{p}" for i in (1, 2, 3) for p in ("weight", "bias")]
    assert tuple(params["fc1.weight"].shape) == (NUM_MODELS, 128, 784)
    assert params["fc1.weight"].is_leaf and params["fc1.weight"].requires_grad
    assert allclose(vm1, torch.stack(loop1), atol=1e-3, rtol=1e-5)
    assert allclose(vm2, torch.stack(loop2), atol=1e-3, rtol=1e-5)
    # the stacked parameters are leaves an optimizer can train
    vm1.sum().backward()
    assert tuple(params["fc3.bias"].grad.shape) == (NUM_MODELS, 10)
    np.testing.assert_allclose(npy(params["fc3.bias"].grad), np.full((NUM_MODELS, 10), 8.0))

    if real_torch is None:
        return
    import torch.func as TF

    TheirMLP = models_for(real_torch)[1]
    theirs_models = [TheirMLP() for _ in range(NUM_MODELS)]
    for ours, theirs in zip(models, theirs_models):
        copy_weights(ours, theirs)
    _, _, _, tvm1, tvm2 = ensembling_tutorial(
        real_torch, TF, theirs_models, real_torch.from_numpy(ENS_DATA)
    )
    np.testing.assert_allclose(npy(vm1), tvm1.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(npy(vm2), tvm2.detach().numpy(), rtol=1e-4, atol=1e-5)


def _ensemble_grad(lib, F, argnums):
    lin = [lib.nn.Linear(3, 2) for _ in range(2)]
    with lib.no_grad():
        for i, m in enumerate(lin):
            w = np.arange(6.0).reshape(2, 3) * (i + 1)
            m.weight.copy_(lib.tensor(w, dtype=lib.float32))
            m.bias.copy_(lib.tensor([0.5, -0.5]))
    params, _ = F.stack_module_state(lin)
    scale = {"s": lib.ones(2)}
    x = lib.tensor([[1.0, -2.0, 0.5]])

    def loss(p, scale):
        outs = [F.functional_call(lin[0], {k: v[i] for k, v in p.items()}, (x,)) for i in range(2)]
        return sum(((o * scale["s"]) ** 2).sum() for o in outs)

    return F.grad(loss, argnums=argnums)(params, scale)


@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_ensemble_gradients_match_torch(argnums):
    """grad of an ensemble loss w.r.t. stacked params (and a dict), through functional_call."""
    if real_torch is None:
        pytest.skip("torch not installed")
    import torch.func as TF

    ours = _ensemble_grad(ferrograd, ferrograd.func, argnums)
    theirs = _ensemble_grad(real_torch, TF, argnums)
    ours_leaves = ferrograd.utils._pytree.tree_leaves(ours)
    theirs_leaves = real_torch.utils._pytree.tree_leaves(theirs)
    assert len(ours_leaves) == len(theirs_leaves)
    for o, t in zip(ours_leaves, theirs_leaves):
        np.testing.assert_allclose(npy(o), t.detach().numpy(), rtol=1e-5)
        assert o.requires_grad == t.requires_grad


# ----- "Jacobians, Hessians, hvp, vhp, and more" ------------------------------------------------


def jacobians_tutorial(torch, func):
    """The tutorial's code, as written."""
    F = torch.nn.functional
    jacrev, hessian, vjp, grad = func.jacrev, func.hessian, func.vjp, func.grad
    vmap, jacfwd, jvp = func.vmap, func.jacfwd, func.jvp

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    D = 16
    rng = np.random.default_rng(5)
    weight = torch.tensor(rng.standard_normal((D, D)), dtype=torch.float32)
    bias = torch.tensor(rng.standard_normal(D), dtype=torch.float32)
    x = torch.tensor(rng.standard_normal(D), dtype=torch.float32)

    def compute_jac(xp):
        jacobian_rows = [
            torch.autograd.grad(predict(weight, bias, xp), xp, vec)[0] for vec in unit_vectors
        ]
        return torch.stack(jacobian_rows)

    xp = x.clone().requires_grad_()
    unit_vectors = torch.eye(D)
    jacobian = compute_jac(xp)

    _, vjp_fn = vjp(functools.partial(predict, weight, bias), x)
    (vmap_jacobian,) = vmap(vjp_fn)(unit_vectors)

    ft_jacobian = jacrev(predict, argnums=2)(weight, bias, x)
    ft_jac_weight, ft_jac_bias = jacrev(predict, argnums=(0, 1))(weight, bias, x)
    fwd_jacobian = jacfwd(predict, argnums=2)(weight, bias, x)

    def predict_with_output_summed(weight, bias, x):
        return predict(weight, bias, x).sum()

    hess0 = hessian(predict_with_output_summed, argnums=2)(weight, bias, x)
    hess1 = jacrev(jacrev(predict_with_output_summed, argnums=2), argnums=2)(weight, bias, x)
    hess2 = jacfwd(jacfwd(predict_with_output_summed, argnums=2), argnums=2)(weight, bias, x)

    def hvp_revrev(f, primals, tangents):
        _, vjp_fn = vjp(grad(f), *primals)
        return vjp_fn(*tangents)

    def f(x):
        return x.sin().sum()

    xh = torch.tensor(rng.standard_normal(2048), dtype=torch.float32)
    tangent = torch.tensor(rng.standard_normal(2048), dtype=torch.float32)
    result_hvp_revrev = hvp_revrev(f, (xh,), (tangent,))

    def hvp(f, primals, tangents):
        return jvp(grad(f), primals, tangents)[1]

    result_hvp = hvp(f, (xh,), (tangent,))

    # batch Jacobian and batch Hessian
    batch_size, din, dout = 64, 31, 33
    weight = torch.tensor(rng.standard_normal((dout, din)), dtype=torch.float32)
    bias = torch.tensor(rng.standard_normal(dout), dtype=torch.float32)
    x = torch.tensor(rng.standard_normal((batch_size, din)), dtype=torch.float32)
    compute_batch_jacobian = vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))
    batch_jacobian0 = compute_batch_jacobian(weight, bias, x)

    def predict_with_output_summed_over_batch(weight, bias, x):
        return predict(weight, bias, x).sum(0)

    batch_jacobian1 = jacrev(predict_with_output_summed_over_batch, argnums=2)(
        weight, bias, x
    ).movedim(1, 0)
    batch_jacobian_fwd = vmap(jacfwd(predict, argnums=2), in_dims=(None, None, 0))(
        weight, bias, x
    )
    compute_batch_hessian = vmap(hessian(predict, argnums=2), in_dims=(None, None, 0))
    batch_hess = compute_batch_hessian(weight, bias, x)
    return {
        "jacobian": jacobian,
        "ft_jacobian": ft_jacobian,
        "ft_jac_weight": ft_jac_weight,
        "ft_jac_bias": ft_jac_bias,
        "hess0": hess0,
        "hess1": hess1,
        "hess2": hess2,
        "hvp": result_hvp_revrev[0],
        "hvp_fwdrev": result_hvp,
        "hvp_expected": -xh.sin() * tangent,
        "vmap_jacobian": vmap_jacobian,
        "fwd_jacobian": fwd_jacobian,
        "batch_jacobian0": batch_jacobian0,
        "batch_jacobian1": batch_jacobian1,
        "batch_jacobian_fwd": batch_jacobian_fwd,
        "batch_hess": batch_hess,
        "hess_sample_3": hessian(predict, argnums=2)(weight, bias, x[3]),
    }


def test_jacobians_hessians_tutorial():
    ours = jacobians_tutorial(ferrograd, ferrograd.func)
    assert allclose(ours["jacobian"], ours["ft_jacobian"], atol=1e-6, rtol=1e-5)
    for k in ("vmap_jacobian", "fwd_jacobian"):
        assert allclose(ours[k], ours["jacobian"], atol=1e-6, rtol=1e-5), k
    for k in ("batch_jacobian1", "batch_jacobian_fwd"):
        assert allclose(ours[k], ours["batch_jacobian0"], atol=1e-5, rtol=1e-5), k
    assert tuple(ours["batch_hess"].shape) == (64, 33, 31, 31)
    assert allclose(ours["batch_hess"][3], ours["hess_sample_3"], atol=1e-5, rtol=1e-5)
    assert allclose(ours["hvp_fwdrev"], ours["hvp_expected"], atol=1e-5, rtol=1e-5)
    assert tuple(ours["ft_jac_weight"].shape) == (16, 16, 16)
    assert tuple(ours["ft_jac_bias"].shape) == (16, 16)
    assert allclose(ours["hess0"], ours["hess1"], atol=1e-6, rtol=1e-5)
    assert allclose(ours["hess0"], ours["hess2"], atol=1e-6, rtol=1e-5)
    assert allclose(ours["hvp"], ours["hvp_expected"], atol=1e-5, rtol=1e-5)
    if real_torch is None:
        return
    import torch.func as TF

    theirs = jacobians_tutorial(real_torch, TF)
    for k in theirs:
        np.testing.assert_allclose(npy(ours[k]), theirs[k].detach().numpy(), rtol=1e-4, atol=1e-5)
        assert ours[k].requires_grad == theirs[k].requires_grad, k
