"""UB tiles of the vector path: their layout, their buffers and their GM <-> UB copies.

A tile is a dense box of a tensor in UB whose rows are padded to 32 bytes (``Layout``); its
buffer grows to the largest box any tile version asks of it. A copy moves the box in pieces of
at most ``max_dma_block_count`` rows, one DataCopyPad each; leading axes whose rows do not
flatten uniformly in GM become IR loops around them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ascendsched.algo.tensor import Tensor
from ascendsched.dtypes import DType
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine
from ascendsched.lower.bounds import Axis
from ascendsched.lower.ir import Buffer, Dim, For, Instr, Region, Stmt
from ascendsched.target import Pipe, Scope


@dataclass(frozen=True)
class Layout:
    """A dense UB tile: ``box`` axes, rows padded to ``pitch`` elements (32 B multiple)."""

    buf: str
    copy: Affine
    dtype: DType
    box: tuple[Axis, ...]
    pitch: int

    @property
    def strides(self) -> tuple[int, ...]:
        n = len(self.box)
        s = [1] * n
        for k in range(n - 2, -1, -1):
            s[k] = self.pitch if k == n - 2 else s[k + 1] * self.box[k + 1].extent
        return tuple(s)

    @property
    def elems(self) -> int:
        if len(self.box) == 1:
            return self.pitch
        return self.box[0].extent * self.strides[0]


class _TileMemory:
    """UB tiles and their copies, a part of ``_Builder`` (lower/build_loop_nest.py), whose
    target, schedule and buffers it uses."""

    def _layout(self, buf: str, t: Tensor, box: tuple[Axis, ...], copy: Affine) -> Layout:
        per_block = self.t.elems_per_block(t.dtype.bytes)
        pitch = -(-box[-1].extent // per_block) * per_block
        copies = 1 if t.name in self.hoisted else self.s.copies(t.name)
        lay = Layout(buf, copy if copies == 2 else Affine(), t.dtype, box, pitch)
        self._alloc(buf, t.dtype, lay.elems, copies, tuple(a.extent for a in box),
                    f"tile of {t.name}" + (" (double buffered)" if copies == 2 else ""))
        return lay

    def _alloc(self, name: str, dtype: DType, elems: int, copies: int = 1,
               shape: tuple[int, ...] = (), comment: str = "") -> None:
        per_block = self.t.elems_per_block(dtype.bytes)
        elems = -(-elems // per_block) * per_block
        old = self.buffers.get(name)
        if old is not None:
            if old.dtype != dtype:
                raise InternalCompilerError(
                    f"UB buffer '{name}' allocated as {old.dtype} and again as {dtype}: two tile "
                    f"versions computed different values under one name")
            elems = max(elems, old.elems)
            shape = tuple(max(a, b) for a, b in zip(shape, old.shape)) if shape else old.shape
        self.buffers[name] = Buffer(name, Scope.UB, dtype, elems, copies, shape, comment=comment)

    def _dma(self, t: Tensor, lay: Layout, *, to_ub: bool) -> list[Stmt]:
        shape = [int(x) for x in t.shape]
        n = len(shape)
        gstr = [int(np.prod(shape[k + 1:])) for k in range(n)]
        # leading axes whose rows do not flatten uniformly in GM become IR loops
        j = max(0, n - 2)
        while j > 0 and lay.box[j].extent == shape[j]:
            j -= 1
        lead = list(range(0, j)) if n > 2 else []
        if n > 2 and lay.box[j].extent == shape[j] and j == 0:
            lead = []
        rows = int(np.prod([lay.box[k].extent for k in range(len(lead), n - 1)])) if n > 1 else 1
        cols = lay.box[-1].extent
        gm_off = sum((lay.box[k].start * gstr[k] for k in range(n)), Affine())
        ub_off = Affine()
        ustr = lay.strides
        loop_vars = []
        for k in lead:
            var = f"{t.name}_d{k}"
            loop_vars.append((var, lay.box[k].extent))
            gm_off = gm_off + Affine.of(var) * gstr[k]
            ub_off = ub_off + Affine.of(var) * ustr[k]
        g_rs = gstr[n - 2] if n > 1 else cols
        u_rs = lay.pitch
        max_rows = self.t.max_dma_block_count
        out: list[Stmt] = []
        for r0 in range(0, rows, max_rows):
            nr = min(max_rows, rows - r0)
            g = Region(t.name, gm_off + r0 * g_rs, (Dim(nr, g_rs), Dim(cols, 1)))
            u = Region(lay.buf, ub_off + r0 * u_rs, (Dim(nr, u_rs), Dim(cols, 1)), lay.copy)
            if to_ub:
                out.append(Instr("copy_gm_ub", Pipe.MTE2, (u,), (g,),
                                 comment=f"load {t.name} tile into UB"))
            else:
                out.append(Instr("copy_ub_gm", Pipe.MTE3, (g,), (u,),
                                 comment=f"store {t.name} tile to GM"))
        for var, ext in reversed(loop_vars):
            out = [For(var, ext, tuple(out), comment=f"{t.name} rows not contiguous in GM")]
        return out
