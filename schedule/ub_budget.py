"""The UB bytes one tile of a default vector schedule needs: copies, stage tiles, temporaries.

The default schedule (``schedule/default.py``) sizes its tiles with this estimate so that the
memory planner (``lower/plan_memory.py``) finds room for the double buffering it asks for. The
estimate follows how the vector lowering materialises values, and frees them by liveness:

* each input and the output is one tile per copy, live all the time (a multi-copy buffer's
  copies alternate over the tile loop, so the planner gives their bytes to nothing else); an
  input every tile reads whole (``gamma[j]`` with only rows tiled) is loaded once, one copy,
  and every value computed from such inputs alone (``float32(gamma[j])``, below a stage's
  root) is computed once before the tile loops and live all the time, one buffer per distinct
  expression (``lower/select_vector.py`` ``_hoist``); an input only such values read is dead
  once they are computed, so its bytes go to the tile's buffers;
* each stage computed per tile is one tile from its evaluation to its last reader's;
* inside a stage's (inlined) expression, every operation below the root is a temporary tile,
  live from its evaluation to its consumer's; a reduction keeps one partial per 64 columns, a
  row value broadcast into a tile one 32-byte block per row;
* a value's shape is that of the tile along the output axes it depends on: the whole tile, its
  rows (reductions), its columns (``bias[j]``) or one element; a reduction whose result
  varies along the tile's last axis (a row max stored as a 1-D output) reads along an axis
  of its own, whole rows per output element.

Rows are padded to 32 bytes, temporaries get the lowering's 8 spare elements, every buffer
starts 32-byte aligned. For softmax (8 x 1024 tile, ``x`` and ``y`` double buffered) the estimate
is 131 584 B and the planner's peak 131 360 B.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ascendsched.algo.algorithm import Algorithm, root_output
from ascendsched.algo.check import children
from ascendsched.algo.expr import Binary, Const, Expr, IndexVar, Load, Reduce, ReduceVar, Select
from ascendsched.algo.tensor import Tensor
from ascendsched.errors import InternalCompilerError
from ascendsched.target import Target
from ascendsched.target.model import Scope

REDUCE_LANES = 64  # one partial per 64 columns (one 256 B repeat of float32)
TEMP_SPARE = 8  # elements the lowering adds to every temporary


@dataclass(frozen=True)
class TileShape:
    """``rows`` x ``cols`` of the output tile (``rows`` = 1 for a 1-D output). ``rows`` counts
    flattened rows over every axis but the last (:func:`row_extents` gives the box)."""

    rows: int
    cols: int


def granule(algo: Algorithm, target: Target) -> int:
    """Elements of the narrowest dtype of ``algo`` in one 32-byte block: the unit UB tile
    widths (and row chunks) are multiples of."""
    return target.elems_per_block(min(t.dtype.bytes for t in algo.tensors))


def row_extents(lead: Sequence[int], rows: int) -> tuple[int, ...] | None:
    """The tile's extent along each leading axis (``lead``: the output's sizes but the last)
    for ``rows`` flattened rows: whole inner axes, part (or a multiple) of one axis, 1 outside
    it; None when ``rows`` rows make no such box. For ``lead`` (2, 384): 24 -> (1, 24),
    768 -> (2, 384), 400 -> None."""
    ext: list[int] = []
    left = rows
    for a in reversed(lead):
        if left >= a:
            if left % a:
                return None
            ext.append(a)
            left //= a
        else:
            ext.append(left)
            left = 1
    return tuple(reversed(ext)) if left == 1 and rows >= 1 else None


HALVE_UB_SHARE = 8  # a row reduction halves pairwise only while its first partials fit UB / 8


def halving_fits(rows: int, chunks: int, target: Target) -> bool:
    """Whether a row reduction of ``rows`` rows of ``chunks`` 256-byte chunks may start with
    pairwise halving (``lower/select_reduce.py`` ``_halve``): the first level's partials,
    half the rows' bytes, take at most UB / HALVE_UB_SHARE (23 KB on the 910B), so schedules
    sized without them keep fitting. The lowering and this estimate ask the same rule."""
    return rows * (chunks // 2) * target.repeat_bytes <= \
        target.scope(Scope.UB).usable // HALVE_UB_SHARE


def block_reduces(cols: int, eb: int, target: Target) -> bool:
    """Whether a row reduction over rows of ``cols`` elements of ``eb`` bytes (lying back to
    back) starts with BlockReduce levels (``lower/select_reduce.py`` ``_block_level``):
    float32 rows of two or more whole 256-byte chunks. The lowering and this estimate ask the
    same rule."""
    per_rep = target.repeat_bytes // eb
    return eb == 4 and cols % per_rep == 0 and cols > per_rep


def halves_pairwise(rows: int, cols: int, eb: int, target: Target) -> bool:
    """Whether a row reduction over ``rows`` rows of ``cols`` elements of ``eb`` bytes starts
    with pairwise halving: whole 256-byte chunks, an even number of them, partials that fit."""
    per_rep = target.repeat_bytes // eb
    n = cols // per_rep
    return cols % per_rep == 0 and n >= 2 and n % 2 == 0 and halving_fits(rows, n, target)


def reductions_halve(algo: Algorithm, tile: TileShape, target: Target) -> bool:
    """Whether every row reduction that could start with pairwise halving on one row still
    does on ``tile`` (``halving_fits``); past that height each 256-byte chunk is reduced by
    WholeReduce on its own, the slower path (softmax 4096x4096 in 3-row tiles: 77.0 us
    modelled against 60.8 us in 2-row tiles)."""
    for st in algo.stages:
        if st.op is None or not isinstance(st.op.body, Reduce):
            continue
        eb = st.dtype.bytes
        if block_reduces(tile.cols, eb, target):
            continue  # BlockReduce levels at every height: no slower path to fall to
        if halves_pairwise(1, tile.cols, eb, target) and \
                not halves_pairwise(tile.rows, tile.cols, eb, target):
            return False
    return True


def computed_per_tile(algo: Algorithm) -> frozenset[str]:
    """The non-output stages the default computes per tile (``compute_at``): reductions and
    stages with several consumers; the others are inlined into their consumer (outputs besides
    the root are computed in its tile by the lowering itself)."""
    return frozenset(st.name for st in algo.stages if st not in algo.outputs
                     and st.op is not None
                     and (isinstance(st.op.body, Reduce) or len(algo.consumers(st)) > 1))


def computed_per_row(algo: Algorithm) -> frozenset[str]:
    """The stages computed once per row when a row's pieces are the inner tiles of a row loop
    (``compute_at`` at that loop): those computed per tile, and every stage of one value per
    row (a statistic the pieces read)."""
    return computed_per_tile(algo) | row_statistics(algo)


def row_statistics(algo: Algorithm) -> frozenset[str]:
    """The stages of one value per row of the root output (a max, a mean, an rstd): what
    the tiles of one row share."""
    rank = len(root_output(algo).shape) - 1
    return frozenset(st.name for st in algo.stages
                     if st not in algo.outputs and len(st.shape) == rank)


def tile_bytes(algo: Algorithm, tile: TileShape, copies: int, target: Target, *,
               hoist: bool = True, single: frozenset[str] = frozenset()) -> int:
    """Peak UB bytes of one tile of ``algo``'s default schedule with ``copies`` copies of
    every input (but the invariant ones and those in ``single``: one) and output tile (see
    the module docstring); ``hoist``: values of the invariant inputs alone are computed
    once (``load_once``)."""
    return _Walk(algo, tile, copies, target, hoist, single).peak()


def invariant_inputs(algo: Algorithm, tile: TileShape, target: Target) -> frozenset[str]:
    """Inputs every tile of this shape reads whole (``gamma[j]`` with only rows tiled): the
    lowering loads them once per core, so the default does not multi-buffer them."""
    return _Walk(algo, tile, 1, target).invariant()


def input_deps(algo: Algorithm, target: Target) -> dict[Tensor, frozenset[int]]:
    """Each input of ``algo`` -> the output axes (indices) its values vary along, as the
    default schedule computes stages (``gamma[j]`` of LayerNorm: the last axis only)."""
    out = root_output(algo)
    return _Walk(algo, TileShape(1, int(out.shape[-1])), 1, target).input_deps()


class _Walk:
    def __init__(self, algo: Algorithm, tile: TileShape, copies: int, target: Target,
                 hoist: bool = True, single: frozenset[str] = frozenset()) -> None:
        self.algo, self.tile, self.copies, self.t = algo, tile, copies, target
        self.hoist, self.single = hoist, single
        out = root_output(algo)
        assert out.op is not None
        self.out = out
        self.axes = out.op.axes
        self.lead = [int(x) for x in out.shape[:-1]]
        ext = row_extents(self.lead, tile.rows)
        if ext is None:
            raise InternalCompilerError(f"tile of {tile.rows} rows over {self.lead} is no box")
        self.ext = ext  # the tile's extent along each leading axis
        self.per_tile = computed_per_tile(algo)
        self.live: dict[int, int] = {}  # buffer id -> bytes
        self.held: dict[str, int] = {}  # per-tile stage -> its buffer
        self.reads_left: dict[str, int] = {}
        self.stage = out
        self.top = 0
        self.ids = 0
        self.once: dict[tuple, int] = {}  # hoisted value -> its bytes, live all the time
        self.tile_reads: set[str] = set()  # inputs read per tile (not only by hoisted values)
        self.fixed: frozenset[str] = frozenset()
        # (id of an expression, ids of the env's variables with their axes) -> _dep's answer;
        # the expressions and variables are the algorithm's, alive for the whole walk
        self._deps: dict[tuple, frozenset[int]] = {}
        # a reduction whose result varies along the tile's last axis (a row max stored as a
        # 1-D output: its elements are the rows it reduces) reads along an axis of its own,
        # numbered from len(axes) on: its extent (the rows' length) per number
        self.virtual: dict[int, int] = {}

    # ---- sizes
    def _bytes(self, dtype_bytes: int, dep: frozenset[int], temp: bool = False) -> int:
        """Bytes of a value of ``dtype_bytes`` that varies along output axes ``dep``
        (indices into the output axes)."""
        last = len(self.axes) - 1
        per_block = self.t.block_bytes // dtype_bytes
        own = [self.virtual[a] for a in dep if a > last]  # a reduction's axis, innermost
        inner = own[0] if own else self.tile.cols if last in dep else 1
        cols = -(-inner // per_block) * per_block if own or last in dep else 1
        rows = self.tile.cols if own and last in dep else 1
        for a in dep:
            if a < last:
                rows *= self.ext[a]
        n = rows * cols + (TEMP_SPARE if temp else 0)
        return _align(n * dtype_bytes, self.t.block_bytes)

    def _dep(self, e: Expr, env: dict[Expr, int]) -> frozenset[int]:
        """Output axes (indices) the value of ``e`` varies along (memoised per walk: the
        walk asks again for every subexpression of every value it sizes)."""
        key = (id(e), tuple((id(v), a) for v, a in env.items()))
        got = self._deps.get(key)
        if got is None:
            got = self._deps[key] = self._dep_of(e, env)
        return got

    def _dep_of(self, e: Expr, env: dict[Expr, int]) -> frozenset[int]:
        if isinstance(e, (IndexVar, ReduceVar)):
            return frozenset({env[e]}) if e in env else frozenset()
        if isinstance(e, Reduce):
            return self._dep(e.body, self._reduce_env(e, env)) - {self._reduce_axis(e, env)}
        if isinstance(e, Load) and self._inlined(e.tensor):
            return self._dep(e.tensor.op.body, self._inner_env(e, env))
        out: frozenset[int] = frozenset()
        for c in children(e):
            out |= self._dep(c, env)
        return out

    def _reduce_axis(self, e: Reduce, env: dict[Expr, int]) -> int:
        """The axis ``e``'s reduction variables walk: the tile's last (a row reduction inside
        rows the tile holds whole), or an axis of its own where the result itself varies
        along the last axis (``virtual``)."""
        last = len(self.axes) - 1
        if last not in self._dep(e.body, env):  # its variables unbound: the result's axes
            return last
        axis = len(self.axes) + len(self.virtual)
        extent = 1
        for v in e.axes:
            extent *= int(v.extent)
        for a, n in self.virtual.items():  # one axis per extent
            if n == extent:
                return a
        self.virtual[axis] = extent
        return axis

    def _reduce_env(self, e: Reduce, env: dict[Expr, int]) -> dict[Expr, int]:
        return {**env, **dict.fromkeys(e.axes, self._reduce_axis(e, env))}

    def _inlined(self, t: Tensor) -> bool:
        return not (t.is_placeholder or t.name in self.per_tile or t is self.out)

    def _inner_env(self, ld: Load, env: dict[Expr, int]) -> dict[Expr, int]:
        """An inlined stage's axes -> the output axis its subscript at ``ld`` follows."""
        assert ld.tensor.op is not None
        inner: dict[Expr, int] = {}
        for v, ix in zip(ld.tensor.op.axes, ld.indices):
            d = self._dep(ix, env)
            if len(d) == 1:
                inner[v] = next(iter(d))
        return inner

    # ---- liveness
    def _alloc(self, nbytes: int) -> int:
        self.ids += 1
        self.live[self.ids] = nbytes
        self.top = max(self.top, sum(self.live.values()))
        return self.ids

    def _free(self, *bufs: int | None) -> None:
        for b in bufs:
            if b is not None:
                self.live.pop(b, None)

    def split_axes(self) -> frozenset[int]:
        """Output axes the tile loops walk: leading axes the tile takes part of, and/or the
        last (columns)."""
        shape = [int(x) for x in self.out.shape]
        out = {d for d, (e, a) in enumerate(zip(self.ext, self.lead)) if e < a}
        if self.tile.cols < shape[-1]:
            out.add(len(shape) - 1)
        return frozenset(out)

    def input_deps(self) -> dict[Tensor, frozenset[int]]:
        """Each input read by the tile -> the output axes its tile varies along (every read
        together, through inlined stages and reductions: ``x[i, k]`` under a row max stored
        as a 1-D output varies along the reduction's own axis too)."""
        order = [st for st in self.algo.stages if st.name in self.per_tile] + [self.out]
        out: dict[Tensor, frozenset[int]] = {}
        for st in order:
            assert st.op is not None
            # an explicit stack in the recursion's order, not a recursive closure (whose
            # reference cycle kept this walk alive until the cyclic collector ran)
            todo: list[tuple[Expr, dict[Expr, int]]] = [
                (st.op.body, {v: k for k, v in enumerate(st.op.axes)})]
            while todo:
                e, env = todo.pop()
                if isinstance(e, Load):
                    t = e.tensor
                    if t.is_placeholder:
                        dep = out.get(t, frozenset())
                        for ix in e.indices:
                            dep |= self._dep(ix, env)
                        out[t] = dep
                    elif self._inlined(t):
                        assert t.op is not None
                        todo.append((t.op.body, self._inner_env(e, env)))
                elif isinstance(e, Reduce):
                    todo.append((e.body, self._reduce_env(e, env)))
                else:
                    todo.extend((c, env) for c in reversed(children(e)))
        return out

    def invariant(self) -> frozenset[str]:
        """Inputs whose tile is the same for every tile (lower/build_loop_nest.py loads them
        once per core, in one copy)."""
        split = self.split_axes()
        if not split:
            return frozenset()
        return frozenset(t.name for t, dep in self.input_deps().items() if not dep & split)

    def peak(self) -> int:
        every = frozenset(range(len(self.axes)))
        io = self.copies * self._bytes(self.out.dtype.bytes, every)
        order = [st for st in self.algo.stages if st.name in self.per_tile] + [self.out]
        envs = {st.name: {v: k for k, v in enumerate(st.op.axes)}  # type: ignore[union-attr]
                for st in order}
        fixed = self.fixed = self.invariant()
        self.reads_left = {st.name: sum(1 for c in order for ld in _loads(c.op.body, self)
                                        if ld.tensor is st) for st in order}
        for st in order:
            assert st.op is not None
            self.stage = st
            self._value(st.op.body, envs[st.name], root=True)
        once_in = 0  # inputs loaded once: live all the time unless only hoisted values read them
        for t, dep in self.input_deps().items():
            size = self._bytes(t.dtype.bytes, dep)
            if t.name not in fixed:
                io += (1 if t.name in self.single else self.copies) * size
            elif t.name in self.tile_reads:
                io += size
            else:
                once_in += size
        once = sum(self.once.values())
        return max(io + once + self.top, once_in + once + io)

    def _value(self, e: Expr, env: dict[Expr, int], root: bool = False) -> int | None:
        """Evaluate ``e``: the buffer holding it (None for loads and constants; the root
        writes the stage's own tile, the output's tile being counted with the copies)."""
        if isinstance(e, Const):
            return None
        if isinstance(e, Load):
            if e.tensor.is_placeholder:
                self.tile_reads.add(e.tensor.name)
            if not self._inlined(e.tensor):
                return None
            assert e.tensor.op is not None  # an inlined stage: its body evaluated here
            return self._value(e.tensor.op.body, self._inner_env(e, env), root)
        dep = self._dep(e, env)
        if not root and self._hoisted(e, dep):
            key = (e, dep)
            self.once.setdefault(key, self._bytes(e.dtype.bytes, dep, temp=True))
            return None
        if isinstance(e, Reduce):
            axis = self._reduce_axis(e, env)
            kids: list[Expr] = [e.body]
            vals = [self._value(e.body, self._reduce_env(e, env))]
            rows, cols = (self.tile.rows, self.tile.cols) if axis < len(self.axes) else \
                (self.tile.rows * self.tile.cols, self.virtual[axis])
            extra = self._alloc(self._partials(e.dtype.bytes, rows, cols))
        else:
            kids = [c for c in children(e) if not isinstance(c, (IndexVar, ReduceVar))]
            vals = [self._value(c, env) for c in kids]
            extra = None
            if isinstance(e, (Binary, Select)) and any(
                    not isinstance(c, Const) and self._dep(c, env) != dep for c in kids):
                extra = self._alloc(_align(self.tile.rows * self.t.block_bytes,
                                           self.t.block_bytes))  # a row broadcast
        size = self._bytes(e.dtype.bytes, dep, temp=not root)
        if root and self.stage is self.out:
            out = None
        else:
            spot = None if isinstance(e, Reduce) else self._in_place(kids, vals, size)
            out = self._alloc(size) if spot is None else spot
            if root:
                self.held[self.stage.name] = out
        self._free(extra, *(v for v in vals if v != out))
        for c in kids:
            self._consumed(c)
        return out

    def _hoisted(self, e: Expr, dep: frozenset[int]) -> bool:
        """``e`` reads only inputs loaded once (at least one) and varies along no split axis:
        the lowering computes it once, before the tile loops."""
        loads = _loads(e, self)
        return (self.hoist and bool(loads) and all(ld.tensor.name in self.fixed for ld in loads)
                and not dep & self.split_axes())

    def _in_place(self, kids: list[Expr], vals: list[int | None], size: int) -> int | None:
        """An operand buffer an elementwise op may write its result over (the planner's
        in-place pairs, lower/lifetimes.py): a temporary of about the result's size, or a
        per-tile stage's tile this op reads for the last time."""
        for v in vals:
            if v is not None and abs(self.live.get(v, -size) - size) <= 2 * self.t.block_bytes:
                self.live[v] = max(self.live[v], size)
                return v
        reads: dict[str, int] = {}
        for c in kids:
            for ld in _loads(c, self):
                reads[ld.tensor.name] = reads.get(ld.tensor.name, 0) + 1
        for name, n in reads.items():
            buf = self.held.get(name)
            if buf is not None and self.reads_left.get(name) == n and \
                    abs(self.live[buf] - size) <= 2 * self.t.block_bytes:
                del self.held[name]  # now the result's: _consumed must not free it
                self.live[buf] = max(self.live[buf], size)
                self.top = max(self.top, sum(self.live.values()))
                return buf
        return None

    def _partials(self, eb: int, rows: int, cols: int) -> int:
        """UB of a row reduction's partials (lower/select_reduce.py emit_reduce): the first
        two BlockReduce levels (an eighth, then a 64th of the rows' bytes) when
        ``_block_level`` applies, the first two halving levels (half, then a quarter of the
        rows' bytes) when ``_halve`` applies, else one partial per 256-byte chunk; ``rows``
        rows of ``cols``."""
        n = cols // (self.t.repeat_bytes // eb)
        if block_reduces(cols, eb, self.t):
            first = rows * cols * eb // self.t.elems_per_block(eb)
            return first + _align(first // self.t.elems_per_block(eb), self.t.block_bytes)
        if halves_pairwise(rows, cols, eb, self.t):
            return rows * (n // 2 + n // 4) * self.t.repeat_bytes
        return _align(rows * -(-cols // REDUCE_LANES) * eb, self.t.block_bytes)

    def _consumed(self, e: Expr) -> None:
        """A per-tile stage's tile is freed after the last instruction reading it."""
        for ld in _loads(e, self):
            name = ld.tensor.name
            if name in self.reads_left:
                self.reads_left[name] -= 1
                if self.reads_left[name] == 0 and name in self.held:
                    self._free(self.held.pop(name))


def _loads(e: Expr, w: _Walk) -> list[Load]:
    """Loads of inputs and per-tile stages in ``e``, looking through inlined stages."""
    out: list[Load] = []
    todo = [e]  # an explicit stack, not a recursive closure: no reference cycle per call
    while todo:
        x = todo.pop()
        if isinstance(x, Load):
            st = x.tensor
            if st.is_placeholder or st.name in w.per_tile or st is w.out:
                out.append(x)
            elif st.op is not None:
                todo.append(st.op.body)
            continue
        todo.extend(reversed(children(x)))
    return out


def _reads(st: Tensor, w: _Walk) -> set[Tensor]:
    assert st.op is not None
    return {ld.tensor for ld in _loads(st.op.body, w)}


def _align(n: int, a: int) -> int:
    return -(-n // a) * a
