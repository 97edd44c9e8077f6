"""Pictures of the backward graph, in torchviz's look: ``make_dot(output, params)``.

The graph walk and the DOT text are the crate's (``ferrograd::graph::dot::make_dot``); this
module maps the arguments and renders through the ``graphviz`` package when it is installed."""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _C

Tensor = _C.Tensor

__all__ = ["Dot", "make_dot"]

_INSTALL = (
    "rendering a graph needs the graphviz Python package (pip install graphviz) and Graphviz's "
    "dot program (apt-get install graphviz, brew install graphviz, or graphviz.org)"
)


class Dot:
    """A graph's DOT text (``.source``, ``str(dot)``), rendered by Graphviz on request."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return f"<ferrograd.viz.Dot: {self.source.count(chr(10))} lines of DOT>"

    def _graphviz(self) -> Any:
        try:
            # Imported by name: an optional package without type information.
            return importlib.import_module("graphviz")
        except ImportError:
            raise ImportError(_INSTALL) from None

    def pipe(self, format: str = "svg") -> bytes:  # noqa: A002 - graphviz's name
        """The picture's bytes in ``format`` ('svg', 'png', ...), made by Graphviz's dot."""
        graphviz = self._graphviz()
        try:
            out: bytes = graphviz.Source(self.source).pipe(format=format)
        except graphviz.ExecutableNotFound:
            raise RuntimeError(_INSTALL) from None
        return out

    def render(
        self,
        filename: str,
        format: str = "svg",
        cleanup: bool = True,  # noqa: A002
    ) -> str:
        """Writes the picture to ``filename.<format>`` and returns that path (the DOT text is
        kept as ``filename`` unless ``cleanup``), as ``graphviz.Digraph.render`` does."""
        graphviz = self._graphviz()
        try:
            path: str = graphviz.Source(self.source).render(
                filename, format=format, cleanup=cleanup
            )
        except graphviz.ExecutableNotFound:
            raise RuntimeError(_INSTALL) from None
        return path

    def _repr_svg_(self) -> str:
        return self.pipe("svg").decode("utf-8")


def make_dot(
    output: Union[Tensor, Sequence[Tensor]],
    params: Optional[Mapping[str, Tensor]] = None,
    show_attrs: bool = False,
    show_saved: bool = False,
) -> Dot:
    """The backward graph behind ``output`` (a tensor or a sequence of them), as torchviz's
    ``make_dot`` draws it: nodes named as their ``grad_fn`` (``AccumulateGrad`` for a leaf's
    accumulator), leaves labelled with their names in ``params`` (e.g.
    ``dict(model.named_parameters())``) and shapes, outputs in green; ``show_saved`` adds the
    tensors each node saved for backward, ``show_attrs`` the shapes and dtypes of its forward
    outputs (ferrograd nodes have no named scalar attributes)."""
    outputs: List[Tensor] = [output] if isinstance(output, Tensor) else list(output)
    for o in outputs:
        if not isinstance(o, Tensor):
            raise TypeError(f"make_dot: output must be a Tensor, not {type(o).__name__}")
    named: List[Tuple[str, Tensor]] = []
    if params is not None:
        items: Dict[str, Any] = dict(params)
        for name, p in items.items():
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"make_dot: params must map names to Tensors, but {name!r} is a "
                    f"{type(p).__name__}"
                )
            named.append((str(name), p))
    return Dot(_C._make_dot(outputs, named, bool(show_attrs), bool(show_saved)))
