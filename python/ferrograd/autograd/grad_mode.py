"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

Each works as a context manager and as a decorator (of functions and generators); the mode is
thread-local, like torch's.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

from .. import _C

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_grad_enabled",
    "set_multithreading_enabled",
]

is_grad_enabled = _C.is_grad_enabled


class _DecoratorContextManager:
    """A context manager usable as a decorator: each call (or generator resume) runs inside it."""

    def clone(self) -> _DecoratorContextManager:
        return self.__class__()

    def __call__(self, func: F) -> F:
        if inspect.isclass(func):
            raise RuntimeError("Decorating classes is not supported.")
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)  # type: ignore[return-value]

        @functools.wraps(func)
        def decorate_context(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return func(*args, **kwargs)

        return decorate_context  # type: ignore[return-value]

    def _wrap_generator(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def generator_context(*args: Any, **kwargs: Any) -> Any:
            gen = func(*args, **kwargs)
            try:
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as e:
                        with self.clone():
                            response = gen.throw(e)
                    else:
                        with self.clone():
                            response = gen.send(request)
            except StopIteration as e:
                return e.value

        return generator_context

    def __enter__(self) -> None:
        raise NotImplementedError

    def __exit__(self, *exc: Any) -> None:
        raise NotImplementedError


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """Allows ``@no_grad`` as well as ``@no_grad()``."""

    def __new__(cls, orig_func: Any = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecoratorContextManager):
    """Ops inside do not record the graph (thread-local)."""

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)

    def __exit__(self, *exc: Any) -> None:
        _C._set_grad_enabled(self.prev)


class enable_grad(_NoParamDecoratorContextManager):
    """Ops inside record the graph, even within ``no_grad``."""

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(True)

    def __exit__(self, *exc: Any) -> None:
        _C._set_grad_enabled(self.prev)


class set_grad_enabled(_DecoratorContextManager):
    """Set grad mode now (plain call), for a block (context manager) or a function (decorator)."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(
                "set_grad_enabled(): argument 'enabled' (position 1) must be bool, "
                f"not {type(mode).__name__}"
            )
        self.prev = _C.is_grad_enabled()
        self.mode = mode
        _C._set_grad_enabled(mode)

    def __call__(self, func: F) -> F:
        _C._set_grad_enabled(self.prev)
        return super().__call__(func)

    def __enter__(self) -> None:
        _C._set_grad_enabled(self.mode)

    def __exit__(self, *exc: Any) -> None:
        _C._set_grad_enabled(self.prev)

    def clone(self) -> set_grad_enabled:
        return self.__class__(self.mode)


class set_multithreading_enabled(_DecoratorContextManager):
    """Let backward passes on this thread use the thread pool (``True``, the default) or run
    on the calling thread alone (``False``); a plain call, a context manager or a decorator.
    Thread-local, as in torch."""

    def __init__(self, mode: bool) -> None:
        self.prev = _C._is_multithreading_enabled()
        _C._set_multithreading_enabled(mode)
        self.mode = mode

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        _C._set_multithreading_enabled(self.prev)

    def clone(self) -> set_multithreading_enabled:
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """Like ``no_grad``, and tensors made inside are inference tensors that may not be saved for
    backward or modified in place outside inference mode."""

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)

    def __init__(self, mode: bool = True) -> None:
        self.mode = mode
        self.prev = (False, True)

    def __enter__(self) -> None:
        self.prev = (_C.is_inference_mode_enabled(), _C.is_grad_enabled())
        _C._set_inference_mode(self.mode)
        _C._set_grad_enabled(not self.mode)

    def __exit__(self, *exc: Any) -> None:
        _C._set_inference_mode(self.prev[0])
        _C._set_grad_enabled(self.prev[1])

    def clone(self) -> inference_mode:
        return self.__class__(self.mode)
