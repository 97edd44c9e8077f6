"""Higher-level autograd: ``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``hvp`` and ``vhp`` with
``torch.autograd.functional``'s signatures, tuple handling, ``create_graph``/``strict`` and
messages.

Differences from torch:

- ``vectorize=True`` is accepted and computes the same result with the row-by-row loop (there
  is no vmap); ``strategy="forward-mode"`` (only valid with ``vectorize=True``, as in torch) is
  computed in reverse mode too, since ferrograd has no forward-mode AD.
- ``jvp`` and ``hvp`` use the double-backward trick (as torch does), so ``func`` must be twice
  differentiable, resp. thrice for ``hvp``.
- Sizes in messages are printed as ``[2, 3]`` (the crate's format), not ``torch.Size([2, 3])``.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

from .. import _C
from .grad_mode import enable_grad, set_grad_enabled

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]

Tensor = _C.Tensor


def _fmt_size(t: Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _as_tuple_nocheck(x: Any) -> Tuple[Any, ...]:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _as_tuple(inp: Any, arg_name: Optional[str] = None, fn_name: Optional[str] = None) -> Any:
    if arg_name is None and fn_name is None:
        return _as_tuple_nocheck(inp)
    is_inp_tuple = True
    if not isinstance(inp, tuple):
        inp = (inp,)
        is_inp_tuple = False
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            if is_inp_tuple:
                raise TypeError(
                    f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                    f"Tensors but the value at index {i} has type {type(el)}."
                )
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors "
                f"but the given {arg_name} has type {type(el)}."
            )
    return is_inp_tuple, inp


def _tuple_postprocess(res: Any, to_unpack: Any) -> Any:
    if isinstance(to_unpack, tuple):
        assert len(to_unpack) == 2
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    else:
        if not to_unpack:
            res = res[0]
    return res


def _grad_preprocess(inputs: Tuple[Tensor, ...], create_graph: bool, need_graph: bool) -> Any:
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            # A differentiable view keeps the link to the caller's graph while giving us a
            # non-leaf to differentiate with respect to.
            res.append(inp.view(*inp.shape) if inp.dim() else inp.reshape(()) * 1)
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs: Any, create_graph: bool) -> Any:
    if isinstance(inputs[0], Tensor):
        if not create_graph:
            return tuple(inp.detach() for inp in inputs)
        return inputs
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v: Tuple[Tensor, ...], other: Tuple[Tensor, ...], is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prepend}v has invalid size: should be {_fmt_size(el_other)} but got "
                f"{_fmt_size(el_v)}."
            )


def _check_requires_grad(inputs: Sequence[Any], input_type: str, strict: bool) -> None:
    if not strict:
        return
    if input_type not in ("outputs", "grad_inputs", "jacobian", "hessian"):
        raise RuntimeError("Invalid input_type to _check_requires_grad")
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This is "
                "not allowed in strict mode."
            )
        if not inp.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(
                    f"The hessian of the user-provided function with respect to input {i} is "
                    "independent of the input. This is not allowed in strict mode. You should "
                    "ensure that your function is thrice differentiable and that the hessian "
                    "depends on the inputs."
                )
            if input_type == "jacobian":
                raise RuntimeError(
                    "While computing the hessian, found that the jacobian of the user-provided "
                    f"function with respect to input {i} is independent of the input. This is "
                    "not allowed in strict mode. You should ensure that your function is twice "
                    "differentiable and that the jacobian depends on the inputs (this would be "
                    "violated by a linear function for example)."
                )
            if input_type == "grad_inputs":
                raise RuntimeError(
                    f"The gradient with respect to input {i} is independent of the inputs of the "
                    "user-provided function. This is not allowed in strict mode."
                )
            raise RuntimeError(
                f"Output {i} of the user-provided function does not require gradients. The "
                "outputs must be computed in a differentiable manner from the input when "
                "running in strict mode."
            )


def _autograd_grad(
    outputs: Sequence[Any],
    inputs: Sequence[Tensor],
    grad_outputs: Optional[Sequence[Any]] = None,
    create_graph: bool = False,
    retain_graph: Optional[bool] = None,
) -> Tuple[Optional[Tensor], ...]:
    from . import grad as _torch_grad

    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs: List[Tensor] = []
    new_grad_outputs: List[Any] = []
    for out, grad_out in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs.append(out)
            new_grad_outputs.append(grad_out)
    if not new_outputs:
        return (None,) * len(inputs)
    return tuple(
        _torch_grad(
            new_outputs,
            list(inputs),
            new_grad_outputs,
            allow_unused=True,
            create_graph=create_graph,
            retain_graph=retain_graph,
        )
    )


def _fill_in_zeros(
    grads: Sequence[Optional[Tensor]],
    refs: Sequence[Tensor],
    strict: bool,
    create_graph: bool,
    stage: str,
) -> Tuple[Tensor, ...]:
    from .. import zeros_like

    res: List[Tensor] = []
    for i, grads_i in enumerate(grads):
        if grads_i is None:
            if strict:
                if stage == "back":
                    raise RuntimeError(
                        "The output of the user-provided function is independent of input "
                        f"{i}. This is not allowed in strict mode."
                    )
                if stage == "back_trick":
                    raise RuntimeError(
                        f"The gradient with respect to the input is independent of entry {i} in "
                        "the grad_outputs when using the double backward trick to compute "
                        "forward mode gradients. This is not allowed in strict mode."
                    )
                if stage == "double_back":
                    raise RuntimeError(
                        f"The jacobian of the user-provided function is independent of input "
                        f"{i}. This is not allowed in strict mode."
                    )
                raise RuntimeError(
                    f"The hessian of the user-provided function is independent of entry {i} in "
                    "the grad_jacobian. This is not allowed in strict mode as it prevents from "
                    "using the double backward trick to replace forward mode AD."
                )
            grads_i = zeros_like(refs[i])
        elif strict and create_graph and not grads_i.requires_grad:
            if "double" not in stage:
                raise RuntimeError(
                    f"The jacobian of the user-provided function is independent of input {i}. "
                    "This is not allowed in strict mode when create_graph=True."
                )
            raise RuntimeError(
                f"The hessian of the user-provided function is independent of input {i}. This "
                "is not allowed in strict mode when create_graph=True."
            )
        res.append(grads_i)
    return tuple(res)


def _backward_result(
    roots: Any,
    wrt: Any,
    v: Any,
    inputs: Any,
    outputs: Any,
    is_inputs_tuple: bool,
    is_outputs_tuple: bool,
    create_graph: bool,
    strict: bool,
    stage: str,
) -> Tuple[Any, Any]:
    """The shared end of vjp/vhp/hvp: ``v``-weighted gradient of ``roots`` w.r.t. ``wrt`` (in
    grad mode only when ``create_graph``), zeros for unused inputs, and the result shaped like
    the user's inputs and outputs."""
    grad_on = True if create_graph else _C.is_grad_enabled()
    with set_grad_enabled(grad_on):
        grad_res = _autograd_grad(roots, wrt, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, stage)
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(
        result, is_inputs_tuple
    )


def vjp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> Tuple[Any, Any]:
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs``.

    ``v`` may be omitted only when ``func`` returns a single one-element tensor. Results are
    detached unless ``create_graph``; ``strict`` raises where an output does not depend on an
    input instead of returning zeros.
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "vjp"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the user-provided function returns a single "
                "Tensor with a single element."
            )
    return _backward_result(
        outputs,
        inputs,
        v,
        inputs,
        outputs,
        is_inputs_tuple,
        is_outputs_tuple,
        create_graph,
        strict,
        "back",
    )


def jvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> Tuple[Any, Any]:
    """``(func(inputs), J v)``: the Jacobian-vector product, by the double-backward trick.

    ``v`` may be omitted only when the input is a single one-element tensor.
    """
    from .. import zeros_like

    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
        elif len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the input to the user-provided function is a "
                "single Tensor with a single element."
            )
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "jvp"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        # The backward is linear in grad_outputs, so their value does not matter (zeros).
        grad_outputs = tuple(zeros_like(out).requires_grad_(True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(
        result, is_outputs_tuple
    )


def jacobian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Any:
    """The Jacobian of ``func`` at ``inputs``: ``out.shape + in.shape``; nested tuples
    ``J[i][j]`` (output ``i``, input ``j``) when outputs or inputs are tuples.

    ``vectorize=True`` gives the same result through the row loop (no vmap in ferrograd);
    ``strategy="forward-mode"`` needs ``vectorize=True`` as in torch and is then computed in
    reverse mode.
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            "function has better performance with forward-mode, use forward-mode. If your "
            "function has better performance with reverse-mode, use reverse-mode."
        )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `create_graph=False` or `strategy="reverse-mode"`.'
            )
        if not vectorize:
            raise NotImplementedError(
                "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                "only implemented for `vectorize=True`."
            )
    if strict and vectorize:
        raise RuntimeError(
            "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
            "supported together. Please either set `strict=False` or `vectorize=False`."
        )
    from .. import zeros_like

    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "jacobian"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        jac: Tuple[Any, ...] = ()
        for i, out in enumerate(outputs):
            jac_i: Tuple[List[Tensor], ...] = tuple([] for _ in range(len(inputs)))
            flat = out.reshape(-1)
            for j in range(out.numel()):
                vj = _autograd_grad(
                    (flat[j],), inputs, retain_graph=True, create_graph=create_graph
                )
                for el_idx, (jac_i_el, vj_el, inp_el) in enumerate(zip(jac_i, vj, inputs)):
                    if vj_el is not None:
                        if strict and create_graph and not vj_el.requires_grad:
                            raise RuntimeError(
                                "The jacobian of the user-provided function is independent of "
                                f"input {i}. This is not allowed in strict mode when "
                                "create_graph=True."
                            )
                        jac_i_el.append(vj_el)
                    else:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is independent of "
                                f"input {el_idx}. This is not allowed in strict mode."
                            )
                        jac_i_el.append(zeros_like(inp_el))
            jac += (
                tuple(
                    _jac_block(jac_i_el, out, inputs[el_idx])
                    for el_idx, jac_i_el in enumerate(jac_i)
                ),
            )
        jac = _grad_postprocess(jac, create_graph)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def _jac_block(rows: List[Tensor], out: Tensor, inp: Tensor) -> Tensor:
    from .. import zeros

    shape = tuple(out.shape) + tuple(inp.shape)
    if not rows:
        return zeros(*shape, dtype=inp.dtype) if shape else zeros((), dtype=inp.dtype)
    return _C._stack(rows, 0).reshape(shape)


def hessian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Any:
    """The Hessian of the scalar function ``func`` at ``inputs`` (``in.shape + in.shape``;
    nested tuples ``H[i][j]`` for tuple inputs), as the Jacobian of the gradient."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp: Tensor) -> Tensor:
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single "
                "element"
            )
        return out.squeeze()

    def jac_func(*inp: Tensor) -> Any:
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(
        jac_func,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _single_scalar_output(outputs: Tuple[Any, ...], is_outputs_tuple: bool, name: str) -> None:
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {name} should contain a single element"
        )


def _scalar_func_and_jacobian(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool, strict: bool, name: str
) -> Tuple[bool, Any, Any, bool, Any, Any]:
    """The shared start of ``vhp`` and ``hvp``: checked inputs and ``v``, the scalar output of
    ``func`` and its gradient (with graph). Runs with grad enabled."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", name)
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
        elif len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the input to the user-provided function is a "
                "single Tensor with a single element."
            )
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", name
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        _single_scalar_output(outputs, is_outputs_tuple, name)
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def vhp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> Tuple[Any, Any]:
    """``(func(inputs), v^T H)`` for a scalar ``func``, by double backward."""
    is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_func_and_jacobian(
        func, inputs, v, create_graph, strict, "vhp"
    )
    return _backward_result(
        jac,
        inputs,
        v,
        inputs,
        outputs,
        is_inputs_tuple,
        is_outputs_tuple,
        create_graph,
        strict,
        "double_back",
    )


def hvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> Tuple[Any, Any]:
    """``(func(inputs), H v)`` for a scalar ``func``, by the double-backward trick (``func``
    must be thrice differentiable)."""
    from .. import zeros_like

    is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_func_and_jacobian(
        func, inputs, v, create_graph, strict, "hvp"
    )
    with enable_grad():
        grad_jac = tuple(zeros_like(inp).requires_grad_(True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    return _backward_result(
        double_back,
        grad_jac,
        v,
        inputs,
        outputs,
        is_inputs_tuple,
        is_outputs_tuple,
        create_graph,
        strict,
        "double_back_trick",
    )
