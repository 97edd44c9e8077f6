"""``torch.compiler``: ferrograd runs eagerly (see ``ferrograd.compile``), so nothing is ever
being compiled and a function excluded from compilation runs as it is."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "disable",
    "is_compiling",
    "is_dynamo_compiling",
    "is_exporting",
    "list_backends",
    "reset",
]


def disable(fn: Optional[F] = None, recursive: bool = True, *, reason: Optional[str] = None) -> Any:
    """``torch.compiler.disable``: nothing is compiled, so ``fn`` runs as it is."""
    if fn is None:
        return lambda f: f
    return fn


def is_compiling() -> bool:
    """``torch.compiler.is_compiling``: never (ferrograd does not trace)."""
    return False


def is_dynamo_compiling() -> bool:
    """``torch.compiler.is_dynamo_compiling``: never."""
    return False


def is_exporting() -> bool:
    """``torch.compiler.is_exporting``: never."""
    return False


def reset() -> None:
    """``torch.compiler.reset``: there are no compiled artefacts to clear."""


def list_backends(exclude_tags: Any = ("debug", "experimental")) -> List[str]:
    """``torch.compiler.list_backends``: the one backend, which runs eagerly."""
    return ["eager"]
