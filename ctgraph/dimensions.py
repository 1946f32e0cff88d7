"""Dimensions: the nodes of a coordinate graph, each an index space with a size.

A dimension is a frozen record. ``size`` is an int or a sympy expression; ``param`` optionally names
the size as a kernel parameter (``numTilesK``): lowering turns every named size into a symbol bound at
call time, so one compiled kernel serves every GEMM shape, while unnamed sizes (the macro tile) stay
compile-time constants. Dimensions of the same kind and fields are still distinct nodes: the graph
tells them apart by tag.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, fields
from typing import TypeAlias

import sympy

__all__ = [
    "Dimension",
    "ForLoop",
    "Linear",
    "MacroTileIndex",
    "MacroTileNumber",
    "SubDimension",
    "User",
    "Workgroup",
]

Size: TypeAlias = int | sympy.Expr


@dataclass(frozen=True)
class Dimension:
    size: Size
    _: KW_ONLY
    param: str = ""

    def __post_init__(self) -> None:
        s = sympy.sympify(self.size)
        if not isinstance(self.size, sympy.Basic | int) or isinstance(self.size, bool):
            raise TypeError(f"{type(self).__name__}: size must be an int or a sympy expression, got {self.size!r}")
        if s.is_number and (not s.is_Integer or s < 0):
            raise ValueError(f"{type(self).__name__}: size must be a nonnegative integer, got {self.size!r}")

    def _args(self) -> str:
        """The fields that identify the dimension, as shown in its label (``A; 0``)."""
        own = [f for f in fields(self) if f.name not in ("size", "param") and f.name != "_"]
        return "; ".join(str(getattr(self, f.name)) for f in own if getattr(self, f.name) not in ("", None))

    @property
    def label(self) -> str:
        """Readable name with the size: ``MacroTileNumber(A; 0) size=10``."""
        args = self._args()
        return f"{type(self).__name__}{f'({args})' if args else ''} size={self.size}"

    def __str__(self) -> str:
        return self.label

    def with_size(self, size: Size) -> Dimension:
        """The same dimension with another size (used by lowering to make sizes symbolic)."""
        from dataclasses import replace

        return replace(self, size=size)


@dataclass(frozen=True, kw_only=True)
class User(Dimension):
    """A whole tensor as the user stores it, in elements (``User(A)``)."""

    tensor: str = ""


@dataclass(frozen=True, kw_only=True)
class SubDimension(Dimension):
    """One axis of a user tensor (``SubDimension(A; 0)`` is the row of A)."""

    tensor: str = ""
    dim: int = 0


@dataclass(frozen=True, kw_only=True)
class MacroTileNumber(Dimension):
    """Which macro tile along one axis (``MacroTileNumber(A; 0)``: the tile row of A)."""

    tensor: str = ""
    dim: int = 0


@dataclass(frozen=True, kw_only=True)
class MacroTileIndex(Dimension):
    """Position inside a macro tile along one axis (size = the macro-tile extent)."""

    tensor: str = ""
    dim: int = 0


@dataclass(frozen=True, kw_only=True)
class ForLoop(Dimension):
    """A loop counter of the kernel (``ForLoop(K)``); ``section`` names the part of a split schedule."""

    name: str = ""
    section: str = ""


@dataclass(frozen=True, kw_only=True)
class Linear(Dimension):
    """A plain linear index space (``Linear(global tiles)``)."""

    name: str = ""


@dataclass(frozen=True, kw_only=True)
class Workgroup(Dimension):
    """The workgroup (CTA) id; ``section`` names the part of a split schedule it drives."""

    section: str = ""
