"""Bounds inference for the vector path: the box of every tensor one tile of the output reads.

Boxes are found backwards from the output tile through each stage's loads: ``e[i, j] = x[i, j]
- m[i]`` over rows ``8*k .. 8*k + 8`` and all 1024 columns asks for the same box of ``x`` and
rows ``8*k .. 8*k + 8`` of ``m``; two reads of one tensor take the union of their boxes. Asked
about a tile with a symbolic start, the same inference tells which tensors a split cuts
(``_check_row_alignment``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched.algo.algorithm import loads
from ascendsched.algo.expr import Const, Expr, IndexArith, IndexVar, Load, ReduceVar
from ascendsched.errors import ScheduleError, UnsupportedError
from ascendsched.lower.affine import Affine


@dataclass(frozen=True)
class Axis:
    name: str
    start: Affine
    extent: int


class _Bounds:
    """Bounds inference, a part of ``_Builder`` (lower/build_loop_nest.py), whose schedule,
    output and stage bodies it reads."""

    def _bounds(self, out_box: tuple[Axis, ...], chunks_whole: bool = False
                ) -> dict[str, tuple[Axis, ...]]:
        """The box of every tensor a tile of ``out_box`` reads, reads of chunked reductions
        left out (their chunks load their own), or over the whole reduce axis with
        ``chunks_whole`` (the box an input staged at an outer loop must hold)."""
        boxes: dict[str, tuple[Axis, ...]] = {self.out.name: out_box}
        for o in self.extra:  # an output the root does not read: the root's box, if same shape
            if tuple(o.shape) == tuple(self.out.shape):
                boxes[o.name] = tuple(Axis(f"{o.name}.{k}", a.start, a.extent)
                                      for k, a in enumerate(out_box))
        for st in reversed(self.tile_stages):
            if st.name not in boxes and st in self.extra:
                raise ScheduleError(
                    f"output '{st.name}' {list(st.shape)} is not read by '{self.out.name}' "
                    f"{list(self.out.shape)}, whose tiles make the kernel, and has another "
                    f"shape, so no tile knows which part of it to compute: compute it in its "
                    f"own algorithm, or give it '{self.out.name}''s shape")
            if st.name not in boxes:
                raise ScheduleError(
                    f"stage '{st.name}' is computed at '{self.out.name}''s tile but no consumer "
                    f"in the tile reads it")
            sbox = boxes[st.name]
            env = {ax: sbox[i] for i, ax in enumerate(st.op.axes)}  # type: ignore[union-attr]
            for ld in loads(self.bodies[st.name]):
                if self.chunk_read(st.name, ld) and not chunks_whole:
                    continue  # loaded chunk by chunk (chunked_reduce.py)
                b = tuple(self._index_range(e, env, ld) for e in ld.indices)
                b = tuple(Axis(f"{ld.tensor.name}.{k}", s, n) for k, (s, n) in enumerate(b))
                boxes[ld.tensor.name] = _union(boxes.get(ld.tensor.name), b, ld)
        return boxes

    def _index_range(self, e: Expr, env: dict, ld: Load) -> tuple[Affine, int]:
        if isinstance(e, (IndexVar, ReduceVar)) and e in env:  # a chunk's reduce axis too
            return env[e].start, env[e].extent
        if isinstance(e, ReduceVar):
            return Affine(), int(e.extent)
        if isinstance(e, Const):
            return Affine(int(e.value)), 1
        if isinstance(e, IndexArith) and e.op in ("add", "sub"):
            if isinstance(e.b, Const):
                s, n = self._index_range(e.a, env, ld)
                return s + (e.b.value if e.op == "add" else -e.b.value), n  # type: ignore[operator]
            if isinstance(e.a, Const) and e.op == "add":
                s, n = self._index_range(e.b, env, ld)
                return s + int(e.a.value), n
        raise UnsupportedError(
            f"subscript {e} in {ld}: the vector path supports subscripts of the form "
            f"var, var + c, var - c or c")

    def _check_row_alignment(self) -> None:
        """A split of the output's last axis cuts the UB rows of every tensor whose last axis
        follows it (found by bounds inference on a symbolic tile start); those rows, several
        per tile, must stay 32-byte multiples. A rank-1 tensor's tile is one contiguous run
        (DataCopyPad moves any length), and a row reduction's 1-D output does not cut the rows
        of the tensor it reduces."""
        last = self.out_axes[-1]
        f = self.nest.factors[last]
        if f == self.sizes[last]:
            return
        probe = "@" + last
        boxes = self._bounds(tuple(
            Axis(a, Affine.of(probe) if a == last else Affine(), self.nest.factors[a])
            for a in self.out_axes))
        cut = [t for t in self.algo.tensors if t.name in boxes and len(boxes[t.name]) > 1
               and probe in boxes[t.name][-1].start.vars()]
        for t in cut:
            if (f * t.dtype.bytes) % self.t.block_bytes:
                need = self.t.block_bytes // min(x.dtype.bytes for x in cut)
                raise ScheduleError(
                    f"split('{self.out.name}', '{last}', {f}): a UB tile row of {f} x "
                    f"{t.dtype} ('{t.name}') = {f * t.dtype.bytes} B is not a multiple of "
                    f"{self.t.block_bytes} B; use a factor that is a multiple of {need}")


def _union(old: tuple[Axis, ...] | None, new: tuple[Axis, ...], ld: Load) -> tuple[Axis, ...]:
    if old is None:
        return new
    out = []
    for a, b, size in zip(old, new, ld.tensor.shape):
        d = a.start - b.start
        if not d.is_const:  # reads that do not line up: the whole axis covers both
            out.append(Axis(a.name, Affine(), int(size)))
            continue
        lo = min(0, -d.const)
        hi = max(a.extent, b.extent - d.const)
        out.append(Axis(a.name, a.start + lo, hi - lo))
    return tuple(out)
