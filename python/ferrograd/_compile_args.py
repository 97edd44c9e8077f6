"""The checks ``compile`` and ``Module.compile`` make on torch's arguments (kept apart from
both, which import each other's layers)."""

from __future__ import annotations

from typing import Any, Dict, Optional

# torch's modes, in the order its error lists them.
_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


def _check_mode(mode: Optional[str], options: Optional[Dict[str, Any]]) -> None:
    if mode is not None and options is not None:
        raise RuntimeError(
            "Either mode or options can be specified, but both can't be specified at the same time."
        )
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"compile(): options must be a dict, got {type(options).__name__}")


def check_compile_args(
    model: Any, backend: Any, mode: Optional[str], options: Optional[Dict[str, Any]]
) -> None:
    """torch's errors for ``compile``'s arguments: mode and options, the backend, the model."""
    _check_mode(mode, options)
    if backend is not None and not (isinstance(backend, str) or callable(backend)):
        raise TypeError(
            f"compile(): backend must be a string or a callable, got {type(backend).__name__}"
        )
    if not callable(model):
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")
