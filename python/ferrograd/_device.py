"""``ferrograd.device``: where tensors live. ferrograd computes on the CPU; other devices are
accepted as names (so ``torch.device("cuda")`` can be written) and refused where a tensor would
have to be made or moved there."""

from __future__ import annotations

from typing import Any, Optional


class device:  # noqa: N801 - torch's name
    """A device name and optional index, as torch's: ``device("cpu")``, ``device("cuda", 0)``,
    ``device("cuda:1")``."""

    __slots__ = ("type", "index")

    def __init__(self, type: Any, index: Optional[int] = None) -> None:  # noqa: A002
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if not isinstance(type, str):
            raise TypeError(f"device() expected a string or a device, got {type!r}")
        name, _, idx = type.partition(":")
        if idx:
            if index is not None:
                raise RuntimeError(
                    f"type (string) must not include an index because index was "
                    f"passed explicitly: {type}"
                )
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(idx)
        if name not in ("cpu", "cuda", "mps", "meta", "xpu"):
            raise RuntimeError(
                "Expected one of cpu, cuda, mps, meta, xpu device type at start of device "
                f"string: {type}"
            )
        if index is not None and index < 0:
            raise RuntimeError(f"Device index must not be negative, got {index}")
        self.type, self.index = name, index

    def __repr__(self) -> str:
        idx = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{idx})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self) -> Any:
        return (device, (self.type, self.index))


CPU = device("cpu")
META = device("meta")


def check_device(where: Any, what: str = "tensor") -> None:
    """Refuse a device other than the CPU with a clear error; ``None`` means the CPU."""
    if where is None:
        return
    d = where if isinstance(where, device) else device(where)
    if d.type != "cpu":
        raise RuntimeError(
            f"ferrograd computes on the CPU only: cannot place a {what} on device '{d}'. "
            "Use device='cpu' (or leave it out)."
        )


def device_target(where: Any) -> Optional[str]:
    """Where ``Tensor.to`` sends a tensor: ``"cpu"``, ``"meta"`` (shape and dtype without
    data) or ``None`` when no device is named; other devices raise as in ``check_device``."""
    if where is None:
        return None
    d = where if isinstance(where, device) else device(where)
    if d.type == "meta":
        return "meta"
    check_device(d)
    return "cpu"
