"""The plain data of a GEMM schedule: its directive records, the Cube unit's fractal geometry,
the tile classes (rectangles of tiles of one valid size) and the resolved tiling
(``GemmSchedule.tiling``). ``schedule/gemm.py`` builds and checks them; ``lower/build_gemm.py``
turns them into loops."""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched.algo.gemm_spec import GemmSpec
from ascendsched.target import Target
from ascendsched.target.model import Scope


@dataclass(frozen=True)
class L1Tile:
    m: int
    n: int
    k: int


@dataclass(frozen=True)
class SplitK:
    k0: int


@dataclass(frozen=True)
class CubeBuffering:
    level: str  # "l1" (A and B tiles in L1), "l0" (L0A and L0B), "l0c"
    copies: int


@dataclass(frozen=True)
class CubeBind:
    cores: int


@dataclass(frozen=True)
class Swizzle:
    width: int
    direction: str  # "m" | "n"


@dataclass(frozen=True)
class EpilogueOn:
    """Where the steps after the sum run: ``"fixpipe"`` (the Cube core's way out) or
    ``"vector"`` (the AIVs of each block, through a GM workspace); ``rows``: output rows per
    Vector step (None: as many of the tile's rows as UB holds); ``vector_cores``: how many
    Vector cores of a block share each tile, 2 (the hardware's 1:2, each its half of the rows)
    or 1; ``after`` (with ``"vector"``): the last stage the Cube core still computes (a bias
    through the Mmad bias table, ReLU on the Fixpipe), so the Vector cores run only the steps
    after it (None: every step after the sum)."""

    unit: str
    rows: int | None = None
    vector_cores: int = 2
    after: str | None = None


GemmDirective = L1Tile | SplitK | CubeBuffering | CubeBind | Swizzle | EpilogueOn
LEVELS = ("l1", "l0", "l0c", "workspace")
EPILOGUE_UNITS = ("fixpipe", "vector")


@dataclass(frozen=True)
class CubeGeometry:
    """Fractal sizes of the Cube unit, derived from the target.

    A fractal is ``rows x c0`` elements of one 32-byte block per row (``block_bytes``); its
    size in bytes is L0A's alignment (one 512 B fractal per LoadData repeat), so
    ``rows = 512 / 32 = 16``; the L0C fractal is rows x rows (asc-devkit docs/zh Mmad,
    shared/ASCEND_910B.md "Matrix layout").
    """

    rows: int  # 16: M and N granule, and the K granule of a 16-bit operand
    block_bytes: int  # 32

    def c0(self, elem_bytes: int) -> int:
        """Elements per fractal row: 16 for 16-bit, 32 for int8, 8 for 32-bit."""
        return self.block_bytes // elem_bytes


def cube_geometry(target: Target) -> CubeGeometry:
    fractal = target.scope(Scope.L0A).alignment
    return CubeGeometry(fractal // target.block_bytes, target.block_bytes)


@dataclass(frozen=True)
class TileClass:
    """A ``rows x cols`` rectangle of tiles at tile ``(m0, n0)``, all ``mv x nv`` valid
    elements, walked in strips of ``width`` along ``direction`` (``rows`` or ``cols`` is a
    multiple of ``width``)."""

    label: str
    rows: int
    cols: int
    m0: int
    n0: int
    width: int
    direction: str
    mv: int
    nv: int

    def coords(self, r: int) -> tuple[int, int]:
        """(m, n) tile offsets of the ``r``-th tile of the rectangle (ints or Affine)."""
        w = self.width
        span = w * (self.cols if self.direction == "m" else self.rows)
        group, inner = _div(r, span), _mod(r, span)
        major, minor = group * w + _mod(inner, w), _div(inner, w)
        return (major, minor) if self.direction == "m" else (minor, major)


def _div(x, d: int):  # noqa: ANN001, ANN202 -- int, or lower's Affine (floordiv)
    return x // d if isinstance(x, int) else x.floordiv(d)


def _mod(x, d: int):  # noqa: ANN001, ANN202
    return x % d if isinstance(x, int) else x.modulo(d)


@dataclass(frozen=True)
class GemmTiling:
    """The resolved decisions: effective tile sizes (clamped), tile counts, copies, cores."""

    spec: GemmSpec
    tm: int
    tn: int
    tk: int
    k0: int
    mt: int  # tiles along M, N, K (L1 steps), and L0 steps per full L1 K tile
    nt: int
    kt: int
    kk: int
    tiles: int  # batch * mt * nt
    cores: int
    iters: int  # persistent loop trips per core
    l1_copies: int
    l0_copies: int
    l0c_copies: int
    swizzle: Swizzle
