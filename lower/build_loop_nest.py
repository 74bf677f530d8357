"""Algorithm + schedule -> kernel IR for the vector (AIV) path.

The output stage's tile loops come from the schedule (splits, reorder, fuse, bind); tiles the
factors do not divide are peeled (serial loops) or guarded (fused/bound loops), each version
with static extents. Per tile: inputs are copied GM -> UB (MTE2), every non-inlined stage is
computed into its UB buffer by vector instructions over the box bounds inference asks of it,
and the output tile goes UB -> GM (MTE3). Example, ``z = x + y`` split by 2048, 2 cores::

    for k in 0..2:                       # tiles k*2 + block_idx
      [MTE2] copy_gm_ub x_ub <- x@(2048*(2*k + block_idx))
      [MTE2] copy_gm_ub y_ub <- y@(...)
      [V] vec_binary fn=add z_ub[16:128, 128:1] <- x_ub[...], y_ub[...]
      [MTE3] copy_ub_gm z@(...) <- z_ub

A vector op over a tile of rows x cols is cut into 256-byte repeats. The number of statements
does not depend on the row width: rows of many repeats get one multi-repeat instruction per row
in an IR loop over the rows, many short rows one instruction per column chunk (a repeat per
row) in an IR loop over the chunks, whichever issues fewer calls, and a row's partial last
chunk is one masked instruction. ``e = xf - mx[i]`` over 8 rows of 4096 fp32::

    for e_r3 in 0..8:   # rows of e
      [V] vec_binary fn=sub  e_t2@(4096*e_r3)[64:64, 64:1] <- xf_ub@(4096*e_r3)[64:64, 64:1],
                                                                e_brcb3@(8*e_r3)[64:0, 64:0]

A row reduction of whole chunks first halves the row with elementwise ops on chunk pairs
(``_halve``, three levels at most) and leaves the rest to WholeReduce. Inputs the schedule
loads once (``load_once``: ``gamma[j]`` with only rows tiled) are copied before the tile loops.

No syncs and no addresses yet: later passes add them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ascendsched.algo.algorithm import loads
from ascendsched.algo.check import children
from ascendsched.algo.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    IndexArith,
    IndexVar,
    Load,
    Reduce,
    ReduceVar,
    Select,
    Tensor,
    Unary,
    _is_index,
)
from ascendsched.dtypes import DType, as_dtype, store, uint8
from ascendsched.errors import ScheduleError, UnsupportedError
from ascendsched.lower.expand_math import expand_math
from ascendsched.lower.index_values import index_value
from ascendsched.lower.ir import (
    BLOCK_IDX,
    Affine,
    Buffer,
    Cond,
    Dim,
    For,
    GmTensor,
    If,
    Instr,
    Kernel,
    Program,
    Region,
    Stmt,
)
from ascendsched.lower.several_outputs import check_output_tiles
from ascendsched.schedule.schedule import ComputeAt, ComputeInline, Schedule
from ascendsched.schedule.ub_budget import halving_fits
from ascendsched.target import CoreType, Pipe, Scope, Target

HALVINGS = 3  # pairwise elementwise levels before WholeReduce in a row reduction (_halve)


def build_loop_nest(sched: Schedule, target: Target | None = None) -> Kernel:
    """Lower ``sched`` (vector algorithms) to an unsynchronised, unplanned AIV kernel."""
    return _Builder(sched, target or sched.target).build()


# --------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Axis:
    name: str
    start: Affine
    extent: int


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


@dataclass(frozen=True)
class Val:
    """An operand over the current domain: element (p) at ``offset + sum(p_a * strides[a])``.

    ``strides[a] == 0`` means the value does not vary along domain axis a. ``block`` marks a
    Brcb'd operand whose 32-byte block holds the row value in every lane.
    """

    buf: str
    copy: Affine
    dtype: DType
    offset: Affine
    strides: tuple[int, ...]
    block: bool = False
    const: float | int | None = None

    def varying(self) -> tuple[int, ...]:
        return tuple(a for a, s in enumerate(self.strides) if s != 0)


@dataclass
class _Version:
    """State while generating one tile version."""

    instrs: list[Stmt] = field(default_factory=list)
    temps: int = 0
    suffix: str = ""  # appended to every buffer name of a tail tile version


# --------------------------------------------------------------------------- builder
class _Builder:
    def __init__(self, sched: Schedule, target: Target) -> None:
        self.s = sched
        self.t = target
        self.padded: set[str] = set()  # buffers grown by one repeat for Compare's over-read
        self.algo = sched.algo
        # the root output's loops are the kernel's; the other outputs are computed in its tile
        # and stored from there (several_outputs.py checks that tiles partition them)
        self.out = sched.root()
        self.extra = tuple(o for o in self.algo.outputs if o is not self.out)
        self.placement: dict[str, ComputeAt | ComputeInline | None] = {}
        for st in self.algo.stages:
            if st is self.out:
                continue
            p = sched.placement(st.name) if st not in self.extra else ComputeAt(
                st.name, self.out.name, sched.legal_compute_at(self.out.name)[0])
            if p is None:
                loops = sched.legal_compute_at(self.out.name)
                raise ScheduleError(
                    f"stage '{st.name}' is computed at root, which would need a GM workspace "
                    f"between kernels; place it in the output's tile: "
                    f"compute_at('{st.name}', '{self.out.name}', '{loops[0]}') or "
                    f"compute_inline('{st.name}')")
            self.placement[st.name] = p
            for d in sched.directives:
                if getattr(d, "stage", None) == st.name and type(d).__name__ in (
                        "Split", "Reorder", "Fuse", "Bind"):
                    raise ScheduleError(
                        f"{type(d).__name__.lower()} on '{st.name}' has no effect: '{st.name}' is "
                        f"computed inside '{self.out.name}''s tile, whose box bounds inference "
                        f"derives; schedule the loops of '{self.out.name}' instead")
        self.inlined = {n for n, p in self.placement.items() if isinstance(p, ComputeInline)}
        self.tile_stages = [st for st in self.algo.stages if st.name not in self.inlined]
        self.bodies = {st.name: expand_math(self._inline(st.op.body), target)  # type: ignore
                       for st in self.tile_stages}
        for t in self.algo.tensors:
            for d in t.shape:
                if not isinstance(d, int):
                    raise UnsupportedError(
                        f"tensor '{t.name}' has symbolic size {d}; lowering needs concrete sizes: "
                        f"build the algorithm with integers for this kernel")
        self.nest = sched.loop_nest(self.out.name)
        self.out_axes = [a.name for a in self.out.op.axes]  # type: ignore[union-attr]
        self.sizes = dict(zip(self.out_axes, self.out.shape))
        self.buffers: dict[str, Buffer] = {}
        self.hoisted: frozenset[str] = frozenset()
        self.block_dim = self.nest.bound[1] if self.nest.bound else 1
        self.n_loops = 0  # IR loops made for vector instructions (numbers their variables)
        self.suffixes: dict[tuple[str, ...], str] = {}  # tail version -> its buffers' suffix
        self.depth = 0  # tile loops around the version being generated
        self._check_row_alignment()
        check_output_tiles(self)

    # ----------------------------------------------------------------- driver
    def build(self) -> Kernel:
        idx = {a: Affine() for a in self.out_axes}
        ver = {a: "whole" for a in self.out_axes}
        for _, axes in self.nest.loops:
            for a in axes:
                ver[a] = "full"
        self.hoisted = self._invariant_inputs()
        self.hoisted_layouts: dict[str, Layout] = {}
        prologue: list[Stmt] = []
        for t in self.algo.inputs:
            if t.name in self.hoisted:
                box = tuple(Axis(f"{t.name}.{k}", Affine(), int(n)) for k, n in enumerate(t.shape))
                lay = self._layout(f"{t.name}_ub", t, box, Affine())
                self.hoisted_layouts[t.name] = lay
                prologue.extend(self._dma(t, lay, to_ub=True))
        body = prologue + self._gen_loops(0, idx, ver, Affine())
        params = tuple(GmTensor(t.name, tuple(t.shape), t.dtype) for t in self.algo.inputs)  # type: ignore[arg-type]
        params += tuple(GmTensor(o.name, tuple(o.shape), o.dtype, "output")  # type: ignore[arg-type]
                        for o in self.algo.outputs)
        return Kernel(
            name=self.algo.name, params=params, buffers=tuple(self.buffers.values()),
            block_dim=self.block_dim, programs=(Program(CoreType.AIV, tuple(body)),),
            target=self.t, notes=tuple(str(self.s).splitlines()),
        )

    def _invariant_inputs(self) -> frozenset[str]:
        """The inputs the schedule loads once (``load_once``): loaded per core before the tile
        loops into one copy. Each must be read whole by every tile (``gamma[j]`` when only
        rows are tiled)."""
        wanted = [t for t in self.algo.inputs if self.s.loaded_once(t.name)]
        if not wanted or not self.nest.loops:
            return frozenset()
        box = tuple(Axis(a, Affine.of(f"{a}__tile") * self.nest.factors[a], self.nest.factors[a])
                    if self.nest.factors[a] < self.sizes[a] else Axis(a, Affine(), self.sizes[a])
                    for a in self.out_axes)
        boxes = self._bounds(box)
        for t in wanted:
            if t.name in boxes and not all(
                    ax.start.is_const and ax.start.const == 0 and ax.extent == int(n)
                    for ax, n in zip(boxes[t.name], t.shape)):
                raise ScheduleError(
                    f"load_once('{t.name}'): a tile of '{self.out.name}' reads only part of "
                    f"'{t.name}' (it follows a split axis), so every tile needs its own load; "
                    f"load once only inputs every tile reads whole")
        return frozenset(t.name for t in wanted if t.name in boxes)

    def _gen_loops(self, level: int, idx: dict[str, Affine], ver: dict[str, str],
                   copy: Affine) -> list[Stmt]:
        if level == len(self.nest.loops):
            return self._tile(idx, ver, copy)
        name, axes = self.nest.loops[level]
        tiles = {a: -(-self.sizes[a] // self.nest.factors[a]) for a in axes}
        full = {a: self.sizes[a] // self.nest.factors[a] for a in axes}
        bound = self.nest.bound is not None and self.nest.bound[0] == name
        if len(axes) == 1 and not bound:
            a = axes[0]
            out: list[Stmt] = []
            if full[a]:
                self.depth += 1
                inner = self._gen_loops(level + 1, {**idx, a: Affine.of(name)}, {**ver, a: "full"},
                                        Affine.mod(name, 2))
                self.depth -= 1
                out.append(For(name, full[a], tuple(inner), comment=f"tiles of {a} (split by "
                               f"{self.nest.factors[a]})"))
            if full[a] < tiles[a]:
                out.extend(self._gen_loops(level + 1, {**idx, a: Affine(full[a])},
                                           {**ver, a: "tail"}, Affine(full[a] % 2)))
            return out
        total = int(np.prod([tiles[a] for a in axes]))
        if bound:
            cores = self.block_dim
            k = f"{name}_k"
            v = Affine.of(k) * cores + Affine.of(BLOCK_IDX)
            trips = -(-total // cores)
            loop_var, copy_in = k, Affine.mod(k, 2)
            what = f"tiles {name} = {k}*{cores} + block_idx over {cores} cores"
        else:
            v, trips, loop_var, copy_in = Affine.of(name), total, name, Affine.mod(name, 2)
            what = f"fused tiles of {', '.join(axes)}"
        per_axis: dict[str, Affine] = {}
        inner_count = 1
        for a in reversed(axes):
            per_axis[a] = v.floordiv(inner_count).modulo(tiles[a]) if a != axes[0] else \
                v.floordiv(inner_count)
            inner_count *= tiles[a]
        body: list[Stmt] = []
        tail_axes = [a for a in axes if full[a] < tiles[a]]
        for combo in itertools.product(*[("full", "tail") for _ in tail_axes]):
            conds: list[Cond] = []
            cver = dict(ver)
            skip = False
            for a in axes:
                kind = combo[tail_axes.index(a)] if a in tail_axes else "full"
                if kind == "full" and full[a] == 0:
                    skip = True
                cver[a] = kind
                if a in tail_axes:
                    conds.append(Cond(per_axis[a], "<" if kind == "full" else "==",
                                      full[a] if kind == "full" else full[a]))
            if skip:
                continue
            self.depth += 1
            inner = self._gen_loops(level + 1, {**idx, **per_axis}, cver, copy_in)
            self.depth -= 1
            body.extend([If(tuple(conds), tuple(inner), comment=_combo_comment(axes, cver))]
                        if conds else inner)
        if bound and total % self.block_dim:
            body = [If((Cond(v, "<", total),), tuple(body), comment="this core's last tile")]
        return [For(loop_var, trips, tuple(body), comment=what)]

    def loop_var(self, stem: str) -> str:
        """A loop variable name no other loop of the kernel uses."""
        self.n_loops += 1
        return f"{stem}{self.n_loops}"

    # ----------------------------------------------------------------- one tile
    def _tile(self, idx: dict[str, Affine], ver: dict[str, str], copy: Affine) -> list[Stmt]:
        box = []
        for a in self.out_axes:
            f = self.nest.factors[a]
            ext = {"whole": self.sizes[a], "full": f, "tail": self.sizes[a] % f}[ver[a]]
            box.append(Axis(a, idx[a] * f if ver[a] != "whole" else Affine(), ext))
        boxes = self._bounds(tuple(box))
        # A tail version after every tile loop gets buffers of its own: one name used by two
        # versions would live from the first version's first use to the other's last use, and
        # lifetimes spanning both versions keep the planner from reusing any UB between them.
        # (A tail inside a loop keeps the shared names: its own buffers could take space the
        # next iteration's full tile uses, and the syncs for that would serialise the loop.)
        key = tuple(ver[a] for a in self.out_axes)
        if "tail" in key and key not in self.suffixes and self.depth == 0:
            self.suffixes[key] = "_tail" + (str(len(self.suffixes) + 1) if self.suffixes else "")
        v = _Version(suffix=self.suffixes.get(key, ""))
        layouts: dict[str, Layout] = {}
        for t in self.algo.inputs:
            if t.name in self.hoisted:
                layouts[t.name] = self.hoisted_layouts[t.name]
            elif t.name in boxes:
                lay = self._layout(f"{t.name}_ub{v.suffix}", t, boxes[t.name], copy)
                layouts[t.name] = lay
                v.instrs.extend(self._dma(t, lay, to_ub=True))
        for st in self.tile_stages:
            lay = self._layout(f"{st.name}_ub{v.suffix}", st, boxes[st.name], copy)
            layouts[st.name] = lay
            self._stage(v, st, lay, layouts)
        for o in self.algo.outputs:
            v.instrs.extend(self._dma(o, layouts[o.name], to_ub=False))
        return v.instrs

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
            elems = max(elems, old.elems)
            shape = tuple(max(a, b) for a, b in zip(shape, old.shape)) if shape else old.shape
        self.buffers[name] = Buffer(name, Scope.UB, dtype, elems, copies, shape, comment=comment)

    # ----------------------------------------------------------------- bounds inference
    def _bounds(self, out_box: tuple[Axis, ...]) -> dict[str, tuple[Axis, ...]]:
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
                b = tuple(self._index_range(e, env, ld) for e in ld.indices)
                b = tuple(Axis(f"{ld.tensor.name}.{k}", s, n) for k, (s, n) in enumerate(b))
                boxes[ld.tensor.name] = _union(boxes.get(ld.tensor.name), b, ld)
        return boxes

    def _index_range(self, e: Expr, env: dict, ld: Load) -> tuple[Affine, int]:
        if isinstance(e, IndexVar):
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

    # ----------------------------------------------------------------- DMA
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

    # ----------------------------------------------------------------- stage codegen
    def _stage(self, v: _Version, st: Tensor, lay: Layout, layouts: dict[str, Layout]) -> None:
        dom = list(lay.box)
        env = {ax: i for i, ax in enumerate(st.op.axes)}  # type: ignore[union-attr]
        gen = _ExprGen(self, v, st.name, dom, env, layouts)
        dst = Val(lay.buf, lay.copy, lay.dtype, Affine(), lay.strides)
        gen.emit_into(self.bodies[st.name], dst)

    def _inline(self, e: Expr) -> Expr:
        if isinstance(e, Load) and e.tensor.name in self.inlined:
            body = self._inline(e.tensor.op.body)  # type: ignore[union-attr]
            return _subst(body, dict(zip(e.tensor.op.axes, e.indices)))  # type: ignore[union-attr]
        kids = children(e)
        if not kids:
            return e
        new = tuple(self._inline(c) for c in kids)
        return _rebuild(e, new)

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


class _ExprGen:
    """Vector instructions for one stage body over its box (plus reduction axes)."""

    def __init__(self, b: _Builder, v: _Version, stage: str, dom: list[Axis],
                 env: dict, layouts: dict[str, Layout]) -> None:
        self.b, self.v, self.stage, self.dom, self.env, self.layouts = b, v, stage, dom, env, layouts
        self.t = b.t

    # ---- values
    def emit_into(self, e: Expr, dst: Val) -> None:
        val = self.value(e, dst)
        if val is not dst:
            self.move(val, dst)

    def value(self, e: Expr, dst: Val | None = None) -> Val:
        if isinstance(e, Const):
            return Val("", Affine(), e.dtype, Affine(), (0,) * len(self.dom), const=e.value)
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, Binary):
            return self.binary(e, dst)
        if isinstance(e, Unary):
            return self.unary(e, dst)
        if isinstance(e, Cast):
            return self.cast(e, dst)
        if isinstance(e, Select):
            return self.select(e, dst)
        if isinstance(e, Reduce):
            return self.reduce(e, dst)
        raise UnsupportedError(f"stage '{self.stage}': cannot lower {e} on the vector path")

    def load(self, e: Load) -> Val:
        lay = self.layouts[e.tensor.name]
        strides = [0] * len(self.dom)
        off = Affine()
        last_axis = -1
        for k, ix in enumerate(e.indices):
            a, shift = self._axis_of(ix)
            start = (self.dom[a].start if a is not None else Affine()) + shift
            off = off + (start - lay.box[k].start) * lay.strides[k]
            if a is not None:
                if a <= last_axis:
                    raise UnsupportedError(
                        f"stage '{self.stage}': {e} reads '{e.tensor.name}' transposed; the "
                        f"vector path needs subscripts in the stage's axis order: transpose "
                        f"'{e.tensor.name}' in its own kernel (a GEMM with B transposed reads it "
                        f"so) or store it transposed")
                last_axis = a
                strides[a] = lay.strides[k]
        return Val(lay.buf, lay.copy, lay.dtype, off, tuple(strides))

    def _axis_of(self, ix: Expr) -> tuple[int | None, int]:
        if isinstance(ix, (IndexVar, ReduceVar)):
            return self.env[ix], 0
        if isinstance(ix, Const):
            return None, int(ix.value)
        assert isinstance(ix, IndexArith) and isinstance(ix.b, Const) or isinstance(ix.a, Const)
        if isinstance(ix.b, Const):  # type: ignore[union-attr]
            a, s = self._axis_of(ix.a)  # type: ignore[union-attr]
            return a, s + (ix.b.value if ix.op == "add" else -ix.b.value)  # type: ignore
        a, s = self._axis_of(ix.b)  # type: ignore[union-attr]
        return a, s + int(ix.a.value)  # type: ignore[union-attr]

    def temp(self, axes: tuple[int, ...], dtype: DType, what: str) -> Val:
        """A fresh dense UB buffer over domain axes ``axes``."""
        self.v.temps += 1
        name = f"{self.stage}_t{self.v.temps}{self.v.suffix}"
        box = tuple(self.dom[a] for a in axes) or (Axis("one", Affine(), 1),)
        per_block = self.t.elems_per_block(dtype.bytes)
        pitch = -(-box[-1].extent // per_block) * per_block
        lay = Layout(name, Affine(), dtype, box, pitch)
        self.b._alloc(name, dtype, lay.elems + 8, 1, tuple(x.extent for x in box),
                      f"temporary of {self.stage}: {what}")
        strides = [0] * len(self.dom)
        for a, s in zip(axes, lay.strides):
            strides[a] = s
        return Val(name, Affine(), dtype, Affine(), tuple(strides))

    def _dst(self, dst: Val | None, axes: tuple[int, ...], dtype: DType, what: str) -> Val:
        if dst is not None and dst.dtype == dtype and dst.varying() == axes:
            return dst
        return self.temp(axes, dtype, what)

    # ---- nodes
    def binary(self, e: Binary, dst: Val | None) -> Val:
        a, b = self.value(e.a), self.value(e.b)
        if a.const is not None and b.const is not None:
            return Val("", Affine(), e.dtype, Affine(), a.strides,
                       const=_fold(e.op, a.const, b.const, e.dtype))
        dtype = e.dtype
        if b.const is not None or (a.const is not None and e.op in ("add", "mul", "max", "min")):
            x, c = (a, b.const) if b.const is not None else (b, a.const)
            if e.op in ("add", "sub", "mul", "max", "min"):
                c = -c if e.op == "sub" else c
                fn = {"add": "adds", "sub": "adds", "mul": "muls", "max": "maxs", "min": "mins"}[e.op]
                out = self._dst(dst, x.varying(), dtype, str(e))
                self.vec("vec_scalar", out, (x,), fn, (("fn", fn), ("scalar", c)))
                return out
        if a.const is not None and e.op == "sub":  # c - x = (-x) + c
            neg = self.temp(b.varying(), dtype, f"-{e.b}")
            self.vec("vec_scalar", neg, (b,), "muls", (("fn", "muls"), ("scalar", -1)))
            out = self._dst(dst, b.varying(), dtype, str(e))
            self.vec("vec_scalar", out, (neg,), "adds", (("fn", "adds"), ("scalar", a.const)))
            return out
        a, b = self.materialize_const(a, b), self.materialize_const(b, a)
        axes = tuple(sorted(set(a.varying()) | set(b.varying())))
        out = self._dst(dst, axes, dtype, str(e))
        self.vec("vec_binary", out, (a, b), e.op, (("fn", e.op),))
        return out

    def unary(self, e: Unary, dst: Val | None) -> Val:
        x = self.value(e.x)
        if x.const is not None:
            return Val("", Affine(), e.dtype, Affine(), x.strides,
                       const=_fold1(e.op, x.const, e.dtype))
        out = self._dst(dst, x.varying(), e.dtype, str(e))
        if e.op == "neg":
            self.vec("vec_scalar", out, (x,), "muls", (("fn", "muls"), ("scalar", -1)))
        else:
            fn = {"log": "ln"}.get(e.op, e.op)
            self.vec("vec_unary", out, (x,), fn, (("fn", fn),))
        return out

    def cast(self, e: Cast, dst: Val | None) -> Val:
        """One ``Cast`` per step of :func:`cast_steps` (a pair the 910B table lacks goes
        through the target's exact chain of intermediate dtypes)."""
        if _is_index(e.x) and not isinstance(e.x, Const):  # i.astype('float32')
            return index_value(self, e.x, None, e.dtype)
        x = self.value(e.x)
        if x.const is not None:
            return Val("", Affine(), e.dtype, Affine(), x.strides,
                       const=store(e.dtype, x.const, e.round_mode, saturate=True).item())
        steps = cast_steps(x.dtype, e.dtype, e.round_mode, self.t, f"stage '{self.stage}': {e}")
        cur = x
        for n, (to, mode) in enumerate(steps):
            out = self._dst(dst, x.varying(), to, str(e)) if n == len(steps) - 1 else \
                self.temp(x.varying(), to, f"{e} via {to}")
            self.vec("vec_cast", out, (cur,), "cast", (("round", mode),))
            cur = out
        return cur

    def select(self, e: Select, dst: Val | None) -> Val:
        cond = e.cond
        assert isinstance(cond, Compare)
        if _is_index(cond.a) and _is_index(cond.b):  # j <= i: (j - i) <= 0 on index values
            ca = index_value(self, cond.a, cond.b, e.dtype)
            cb = Val("", Affine(), e.dtype, Affine(), (0,) * len(self.dom), const=0)
        else:
            ca, cb = self.value(cond.a), self.value(cond.b)
        a, b = self.value(e.a), self.value(e.b)
        axes = tuple(sorted(set().union(*(v.varying() for v in (ca, cb, a, b)))))
        ops = [self.full(v, axes, str(x)) for v, x in ((ca, cond.a), (cb, cond.b), (a, e.a),
                                                        (b, e.b))]
        out = self._dst(dst, axes, e.dtype, str(e))
        self.vec("vec_select", out, tuple(ops), cond.op, (("fn", cond.op),))
        return out

    def _select_pair(self, regs: list[Region], attrs: tuple, comment: str) -> list[Instr]:
        """vec_cmp into a mask buffer, then vec_select: regs = dst, ca, cb, a, b."""
        dst, ca, cb, a, b = regs
        rows, cols = dst.dims[0].extent, dst.dims[1].extent
        dt = self.b.buffers[ca.tensor].dtype
        lanes = self.t.repeat_bytes // dt.bytes
        per_rep = lanes // 8  # mask bytes one repeat writes
        mask = f"{self.stage}_mask{self.v.suffix}"
        self.b._alloc(mask, uint8, rows * per_rep, 1, (rows, per_rep),
                      f"compare mask of {self.stage} (1 bit per element)")
        # The 910B Compare ignores its mask: each repeat reads all 256 B of both operands and
        # writes 256 / sizeof(T) bits (emit_ascendc/runtime/kernel_operator.h, Compare). The
        # compare reads whole repeats (operand buffers padded by one repeat so the over-read
        # stays inside them) and writes whole mask rows; the select reads its lanes' bits.
        full = Region(mask, Affine(), (Dim(rows, per_rep), Dim(per_rep, 1)))
        m = Region(mask, Affine(), (Dim(rows, per_rep), Dim(-(-cols // 8), 1)))
        wide = tuple(self._whole_repeats(r, lanes) for r in (ca, cb))
        return [Instr("vec_cmp", Pipe.V, (full,), wide, attrs, comment + " (compare)"),
                Instr("vec_select", Pipe.V, (dst,), (m, a, b), (), comment + " (select)")]

    def _whole_repeats(self, r: Region, lanes: int) -> Region:
        rows, col = r.dims
        if col.stride != 0 and r.tensor not in self.b.padded:
            buf = self.b.buffers[r.tensor]
            self.b.buffers[r.tensor] = replace(buf, elems=buf.elems + lanes)
            self.b.padded.add(r.tensor)
        return replace(r, dims=(rows, Dim(lanes, col.stride)))

    def reduce(self, e: Reduce, dst: Val | None) -> Val:
        if len(e.axes) != 1:
            raise UnsupportedError(
                f"stage '{self.stage}': {e} reduces {len(e.axes)} axes at once; the vector path "
                f"reduces one (innermost) axis: nest reductions, one axis each")
        rv = e.axes[0]
        sub = _ExprGen(self.b, self.v, self.stage,
                       self.dom + [Axis(rv.name, Affine(), int(rv.extent))],
                       {**self.env, rv: len(self.dom)}, self.layouts)
        body = sub.value(e.body)
        k = len(self.dom)
        if body.const is not None or body.strides[k] == 0:
            raise UnsupportedError(
                f"stage '{self.stage}': the body of {e} does not depend on '{rv.name}'; "
                f"multiply by the extent instead of reducing")
        body = sub.plain(body, str(e.body))
        fn = {"sum": "sum", "max": "rmax", "min": "rmin"}[e.op]
        if e.dtype.name not in self.t.vector_dtypes[fn]:
            raise UnsupportedError(
                f"stage '{self.stage}': {e.op}-reduction in {e.dtype} is not supported by the "
                f"{self.t.name} vector unit; accumulate in float32 (reduce_{e.op}(..., "
                f"dtype='float32'))")
        axes = tuple(a for a in body.varying() if a != k)
        out = self._dst(dst, axes, e.dtype, str(e))
        sub.emit_reduce(e.op, out, body, axes)
        return out

    # ---- helpers over Vals
    def materialize_const(self, x: Val, other: Val) -> Val:
        if x.const is None:
            return x
        out = self.temp(other.varying(), x.dtype, f"constant {x.const}")
        self.vec_dup(out, x.const)
        return out

    def full(self, x: Val, axes: tuple[int, ...], what: str) -> Val:
        """``x`` as a dense buffer over ``axes`` (for ops without broadcast operands)."""
        if x.const is not None:
            out = self.temp(axes, x.dtype, what)
            self.vec_dup(out, x.const)
            return out
        if x.varying() == axes and not x.block:
            return x
        out = self.temp(axes, x.dtype, what)
        self.move(x, out)
        return out

    def plain(self, x: Val, what: str) -> Val:
        """``x`` with stride 1 along its innermost varying axis."""
        ax = x.varying()
        if ax and x.strides[ax[-1]] == 1 and not x.block:
            return x
        out = self.temp(ax, x.dtype, what)
        self.move(x, out)
        return out

    def move(self, src: Val, dst: Val) -> None:
        if src.const is not None:
            self.vec_dup(dst, src.const)
        else:
            self.vec("vec_unary", dst, (src,), "copy", (("fn", "copy"),))

    def vec_dup(self, dst: Val, value: float | int) -> None:
        self.vec("vec_dup", dst, (), "dup", (("value", value),))

    # ---- instruction emission
    def vec(self, op: str, dst: Val, srcs: tuple[Val, ...], fn: str,
            attrs: tuple, comment: str = "") -> None:
        dtypes = {dst.dtype.name} | {s.dtype.name for s in srcs}
        key = "select" if op == "vec_select" else ("cast" if op == "vec_cast" else fn)
        if key != "cast" and key in self.t.vector_dtypes:
            bad = [d for d in dtypes if d not in self.t.vector_dtypes[key]]
            if bad:
                raise UnsupportedError(
                    f"stage '{self.stage}': vector '{fn}' does not support {', '.join(bad)} on "
                    f"{self.t.name} (supported: {', '.join(sorted(self.t.vector_dtypes[key]))}); "
                    f"cast the operands to float32 first")
        axes = dst.varying()
        srcs = tuple(self._broadcastable(s, axes) for s in srcs)
        vals = (dst,) + srcs
        # Leading axes over which some operand's rows are not evenly spaced (m[i, j] read by
        # every b of s[b, i, j] + m[i, j]) become IR loops around the instruction(s).
        lead = next(n for n in range(len(axes)) if all(
            self._uniform(x, axes[n:-1]) for x in vals))
        loops = []
        for a in axes[:lead]:
            var = self.b.loop_var(f"{self.stage}_b")
            loops.append((var, self.dom[a].extent, self.dom[a].name))
            vals = tuple(replace(x, offset=x.offset + Affine.of(var) * x.strides[a])
                         for x in vals)
        axes = axes[lead:]
        ext = [self.dom[a].extent for a in axes] or [1]
        cols = ext[-1]
        rows = int(np.prod(ext[:-1])) if len(ext) > 1 else 1
        rs = [self._row_stride(x, axes) for x in vals]
        cs = [(x.strides[axes[-1]] if axes else 1) for x in vals]
        cs = [0 if x.block else c for x, c in zip(vals, cs)]
        out = self._cover(op, list(zip(vals, rs, cs)), rows, cols, attrs,
                          comment or f"{self.stage}: {fn}")
        for var, n, name in reversed(loops):
            out = [For(var, n, tuple(out), comment=f"{name} of {self.stage}: an operand repeats "
                       f"over it")]
        self.v.instrs.extend(out)

    def _uniform(self, x: Val, outer: tuple[int, ...]) -> bool:
        """Rows of ``x`` over the flattened ``outer`` axes are evenly spaced."""
        return all(x.strides[p] == x.strides[q] * self.dom[q].extent
                   for p, q in zip(outer[:-1], outer[1:]))

    def _cover(self, op: str, opnds: list[tuple[Val, int, int]], rows: int, cols: int,
               attrs: tuple, comment: str) -> list[Stmt]:
        """Statements computing a ``rows x cols`` elementwise op; operand ``(x, rs, cs)`` holds
        element (r, c) at ``x.offset + r*rs + c*cs`` (``cs`` 0: a Brcb'd block per row).

        A row splits into 256-byte chunks of ``epr`` lanes. Two orientations cover them with
        statements whose number does not depend on the row width:

        * along rows: an IR loop over the rows, one instruction per row with a repeat per full
          chunk (repeat stride ``epr*cs``: 8 blocks when dense, 0 for a Brcb'd block), then one
          masked instruction for every row's tail chunk (a repeat per row);
        * across rows: an IR loop over the full chunks, one instruction per chunk with a repeat
          per row (repeat stride ``rs``), then the masked tail chunk the same way.

        The one issuing fewer dynamic calls wins (across rows on a tie); rows further apart than
        a repeat stride can reach leave only the first, with the tail inside the row loop.
        Operands whose rows are back to back are one row of ``rows * cols`` elements.

        Hardware facts relied on (mirror-cann/asc-devkit @82b89a15, docs/zh/api/SIMD-API/
        基础API/Memory矢量计算/SIMD计算说明/): a source block stride 0 re-reads the first
        DataBlock (高维切分.md:54) and a repeat stride 0 re-reads the first 8 DataBlocks in
        every repeat (高维切分.md:73), so a Brcb'd block feeds every lane of every chunk of
        its row; the continuous-mode mask is the number of leading lanes of each repeat
        (掩码.md:16), so one count masks a tail chunk in every repeat.
        """
        t = self.t
        epr = t.repeat_bytes // max(x.dtype.bytes for x, _, _ in opnds)
        if all(c == 1 for _, _, c in opnds) and (rows == 1 or all(r == cols for _, r, _ in opnds)):
            # dense: every operand is one contiguous row (cut into repeats of epr elements)
            rows, cols, opnds = 1, rows * cols, [(x, epr, c) for x, _, c in opnds]
        if rows > 1:
            for x, r, _ in opnds:
                if (r * x.dtype.bytes) % t.block_bytes:
                    raise UnsupportedError(
                        f"stage '{self.stage}': operand {x.buf} has a row stride of {r} "
                        f"elements, not a multiple of {t.block_bytes} B; choose tiles whose "
                        f"rows are multiples of 32 B")
        fits = rows == 1 or all(r * x.dtype.bytes // t.block_bytes <= t.max_rep_stride
                                for x, r, _ in opnds)
        full, tail = divmod(cols, epr)
        per_chunk = -(-rows // t.max_repeat)  # calls covering one chunk of every row
        tail_calls = (per_chunk if fits else rows) if tail else 0
        along = rows * -(-full // t.max_repeat) + tail_calls
        across = (full + (tail > 0)) * per_chunk

        def instr(row: Affine, n: int, col: Affine, lanes: int, over_rows: bool) -> list[Instr]:
            """``n`` repeats of ``lanes`` lanes from (row, col): over rows or along chunks."""
            regs = [Region(x.buf, x.offset + row * r + col * c,
                           (Dim(n, r if over_rows else epr * c), Dim(lanes, c)), x.copy)
                    for x, r, c in opnds]
            return self._instr(op, regs, attrs, comment)

        def tail_rows() -> list[Stmt]:
            return self._span(rows, t.max_repeat, lambda r, n: instr(
                r, n, Affine(full * epr), tail, True), "p", f"rows of {self.stage}")

        if fits and across <= along:
            out = self._span(full, 1, lambda k, _: self._span(
                rows, t.max_repeat, lambda r, n: instr(r, n, k * epr, epr, True), "p",
                f"rows of {self.stage}"), "c", f"{epr}-lane column chunks of {self.stage}")
            return out + (tail_rows() if tail else [])

        def one_row(row: Affine, _n: int) -> list[Stmt]:
            out = self._span(full, t.max_repeat, lambda k, n: instr(row, n, k * epr, epr, False),
                             "p", f"{epr}-lane chunks of {'a row of ' * (rows > 1)}{self.stage}")
            if tail and not fits:
                out += instr(row, 1, Affine(full * epr), tail, False)
            return out

        return self._span(rows, 1, one_row, "r", f"rows of {self.stage}") + (
            tail_rows() if tail and fits else [])

    def _span(self, n: int, limit: int, make: Callable[[Affine, int], list[Stmt]],
              stem: str, what: str, *, even: bool = False) -> list[Stmt]:
        """``make(start, count)`` for consecutive pieces of at most ``limit`` of ``n`` items,
        as few pieces as possible: equal pieces (``even``: of an even count) as one IR loop
        (variable ``<stage>_<stem><k>``) when they divide ``n``, else the whole pieces of
        ``limit`` (a loop when two or more) and the rest."""
        pieces = -(-n // limit)
        size = n // pieces if pieces else 0
        if pieces > 1 and size * pieces == n and not (even and size % 2):
            whole, rest, limit = pieces, 0, size
        else:
            whole, rest = divmod(n, limit)
        out: list[Stmt] = []
        if whole == 1:
            out += make(Affine(), limit)
        elif whole > 1:
            var = self.b.loop_var(f"{self.stage}_{stem}")
            out.append(For(var, whole, tuple(make(Affine.of(var) * limit, limit)),
                           comment=what if limit == 1 else f"{what}, {limit} per instruction"))
        if rest:
            out += make(Affine(whole * limit), rest)
        return out

    def _instr(self, op: str, regs: list[Region], attrs: tuple, comment: str) -> list[Instr]:
        for r in regs:
            if r.tensor in self.b.buffers:
                self._check_aligned(r)
        if op == "vec_select":
            return self._select_pair(regs, attrs, comment)
        return [Instr(op, Pipe.V, (regs[0],), tuple(regs[1:]), attrs, comment)]

    def _check_aligned(self, r: Region) -> None:
        dt = self.b.buffers[r.tensor].dtype
        per = self.t.elems_per_block(dt.bytes)
        off = r.offset
        if off.const % per or any(c % per for _, c in off.terms) or any(
                c % per for _, _, c in off.mods) or any(c % per for _, _, c in off.divs):
            raise UnsupportedError(
                f"stage '{self.stage}': a vector operand of {r.tensor} starts at element "
                f"offset {off}, not on a 32-byte boundary (hardware requires it); use tiles "
                f"and subscripts that keep row starts 32-byte aligned (e.g. no x[i, j+1] "
                f"shifts of computed stages)")

    def _row_stride(self, x: Val, axes: tuple[int, ...]) -> int:
        """Element stride between the flattened rows (all axes but the last) of ``x``."""
        if len(axes) < 2:
            return 0
        outer = axes[:-1]
        rs = x.strides[outer[-1]]
        for p, q in zip(outer[:-1], outer[1:]):
            if x.strides[p] != x.strides[q] * self.dom[q].extent:
                raise UnsupportedError(
                    f"stage '{self.stage}': operand {x.buf} is not uniformly strided over the "
                    f"flattened rows {[self.dom[i].name for i in outer]}; tile so that inner "
                    f"row axes are whole")
        return rs

    def _broadcastable(self, x: Val, axes: tuple[int, ...]) -> Val:
        """Make ``x`` usable as a source over dst ``axes`` (Brcb for per-row values)."""
        if x.const is not None:
            raise AssertionError("constants are handled by the caller")
        if not axes:
            return x
        last = axes[-1]
        if x.strides[last] != 0 or x.block:
            return x
        # per-row value: Brcb its (contiguous) values into one 32-byte block per row
        outer = [a for a in axes[:-1]]
        if any(a not in outer for a in x.varying()):
            raise UnsupportedError(f"stage '{self.stage}': cannot broadcast {x.buf}")
        rows = int(np.prod([self.dom[a].extent for a in outer])) if outer else 1
        src = self.plain(x, f"rows of {x.buf}") if x.varying() else x
        if x.varying() and outer and set(x.varying()) != set(outer):
            src = self.full(x, tuple(outer), f"rows of {x.buf}")
        per = self.t.elems_per_block(x.dtype.bytes)
        g = self.t.brcb_elems_per_repeat
        # one value for every row: one Brcb repeat (its first block holds the value in every
        # lane) read with row stride 0; Brcb itself needs a contiguous source
        n8 = -(-rows // g) * g if x.varying() else g
        self.v.temps += 1
        name = f"{self.stage}_brcb{self.v.temps}{self.v.suffix}"
        self.b._alloc(name, x.dtype, n8 * per, 1, (n8, per),
                      f"{x.buf} broadcast to one 32 B block per row (Brcb)")
        srcbuf = self.b.buffers[src.buf]
        need = (src.offset.const if src.offset.is_const else 0) + n8
        if srcbuf.elems < need:
            self.b.buffers[src.buf] = replace(srcbuf, elems=-(-need // per) * per)
        self._check_aligned(Region(src.buf, src.offset, (Dim(1, 1),)))
        src_rs = src.strides[x.varying()[-1]] if x.varying() else 0
        if x.varying() and src_rs != 1:
            raise UnsupportedError(f"stage '{self.stage}': per-row values of {x.buf} not contiguous")
        self.v.instrs.extend(self._span(n8 // g, self.t.max_repeat, lambda r, n: [Instr(
            "vec_brcb", Pipe.V,
            (Region(name, r * (g * per), (Dim(n * g, per), Dim(per, 1))),),
            (Region(src.buf, src.offset + r * g, (Dim(n * g, 1), Dim(1, 1)), src.copy),),
            comment=f"{self.stage}: broadcast {x.buf} per row")], "p",
            f"Brcb of {x.buf}, {g} rows per repeat"))
        strides = [0] * len(self.dom)
        acc = per
        for a in reversed(outer if x.varying() else []):
            strides[a] = acc
            acc *= self.dom[a].extent
        return Val(name, Affine(), x.dtype, Affine(), tuple(strides), block=True)

    def emit_reduce(self, op: str, out: Val, body: Val, axes: tuple[int, ...]) -> None:
        """Reduce the last axis of ``body`` into ``out`` with ``WholeReduce*`` levels.

        A row longer than one 256-byte repeat is first reduced to a row of partials
        (:meth:`_partials`, again while the partials are wider than a repeat), then one
        WholeReduce repeat per row reduces the partials.
        """
        k = len(self.dom) - 1
        cols = self.dom[k].extent
        # an axis of extent 1 in this tile (a leading axis split by 1) adds no rows: its
        # stride, padded or not, never steps
        axes = tuple(a for a in axes if self.dom[a].extent > 1)
        rows = int(np.prod([self.dom[a].extent for a in axes])) if axes else 1
        rs = self._row_stride(body, axes + (k,)) if axes else 0
        if axes and out.strides[axes[-1]] != 1:
            raise UnsupportedError(
                f"stage '{self.stage}': the {op}-reduction result over "
                f"{[self.dom[a].name for a in axes]} is not contiguous; reduce a tile whose "
                f"inner result axes are whole")
        for p_, q_ in zip(axes[:-1], axes[1:]):
            if out.strides[p_] != out.strides[q_] * self.dom[q_].extent:
                raise UnsupportedError(
                    f"stage '{self.stage}': the {op}-reduction result over "
                    f"{[self.dom[a].name for a in axes]} is not contiguous; reduce a tile whose "
                    f"inner result axes are whole")
        epr = self.t.repeat_bytes // body.dtype.bytes
        src, src_rs = body, rs
        if cols % epr == 0 and (rows == 1 or rs >= cols):
            src, src_rs, cols = self._halve(op, body, rs, rows, cols // epr, epr)
        while cols > epr:
            src, src_rs, cols = self._partials(op, src, src_rs, rows, cols)
        self.v.instrs.extend(self._reduce_rows(op, out, 1, src, src_rs, cols, rows,
                                               f"{self.stage}: {op} over {self.dom[k].name}"))

    def _partials(self, op: str, src: Val, src_rs: int, rows: int, cols: int
                  ) -> tuple[Val, int, int]:
        """Partials of each row of ``src`` (``rows`` rows ``src_rs`` apart, ``cols`` wide)
        whose ``op``-reduction is the row's: ``(partials, their row stride, their count)``.

        Two ways, with a number of statements that does not depend on the row width; the one
        issuing fewer dynamic calls wins (per row on a tie):

        * per row: an IR loop over the rows, a WholeReduce per row with a repeat per full
          256-byte chunk (one partial each), then the masked tail chunks of every row (a
          repeat per row). Rows of partials are padded to 32 B for the next level's repeat
          stride. A sum's dst may sit on any element (sizeof(T) alignment: asc-devkit docs
          ReduceRepeat.md:171-172); a max/min dst must sit on 2 elements (the library checks
          2 * sizeof(T), impl/basic_api/kernel_operator_vec_reduce_intf_impl.h:177), so for
          max/min after an odd number of full chunks the tail's partial skips a slot, which
          holds op's identity. Rows of whole chunks back to back are reduced as one row.
        * fold: one chunk of partials per row: the first chunk copied, then every further
          chunk (an IR loop over them) and the masked tail combined into it elementwise, a
          repeat per row; a V barrier per chunk.
        """
        t = self.t
        dt = src.dtype
        epr = t.repeat_bytes // dt.bytes
        per = t.elems_per_block(dt.bytes)
        full, tail = divmod(cols, epr)
        self.v.temps += 1
        acc = f"{self.stage}_part{self.v.temps}{self.v.suffix}"
        accv = Val(acc, Affine(), dt, Affine(), ())
        what = f"{op} partials of the rows of {self.stage}"
        chunks = f"{self.stage}: {op} of each {epr}-column chunk"
        if (rows == 1 or src_rs == cols) and not tail and (rows == 1 or full % per == 0):
            # rows of whole chunks back to back (next level's rows stay 32 B apart): one row
            self.b._alloc(acc, dt, rows * full, 1, (rows, full), what)
            self.v.instrs.extend(self._reduce_rows(op, accv, 1, src, epr, epr, rows * full,
                                                   chunks))
            return accv, full, full
        fits = rows == 1 or src_rs * dt.bytes // t.block_bytes <= t.max_rep_stride
        per_chunk = -(-rows // t.max_repeat)  # calls covering one chunk of every row
        pair = _reduce_dst_elems(op) == 2  # max/min: each dst on 2 elements
        step = t.max_repeat - t.max_repeat % 2 if pair else t.max_repeat
        gap = pair and tail > 0 and full % 2 == 1
        slot = full + gap  # the tail's partial
        width = slot + 1 if tail else full
        npad = -(-width // per) * per
        per_row = rows * -(-full // step) + ((per_chunk if fits else rows) if tail else 0) \
            + (per_chunk if gap else 0)
        fold = (full + (tail > 0)) * per_chunk
        if fits and fold < per_row:
            return self._fold(op, src, src_rs, rows, cols, accv, what)
        self.b._alloc(acc, dt, rows * npad, 1, (rows, npad), what)
        out: list[Stmt] = []
        if gap:  # op's identity in the 32 B block holding the skipped slot, in every row
            ident = {"sum": 0.0, "max": -math.inf, "min": math.inf}[op]
            blk = Val(acc, Affine(), dt, Affine(full - full % per), ())
            out += self._cover("vec_dup", [(blk, npad, 1)], rows, per, (("value", ident),),
                               f"{self.stage}: {op} identity in the slot before the tail's")

        def shift(x: Val, by: Affine | int) -> Val:
            return replace(x, offset=x.offset + by)

        def one_row(r: Affine, _n: int) -> list[Stmt]:
            row = self._reduce_rows(op, shift(accv, r * npad), 1, shift(src, r * src_rs), epr,
                                    epr, full, chunks)
            if tail and not fits:
                row += self._reduce_rows(op, shift(accv, r * npad + slot), 1,
                                         shift(src, r * src_rs + full * epr), epr, tail, 1,
                                         f"{self.stage}: {op} of the {tail}-column tail")
            return row

        out += self._span(rows, 1, one_row, "r", f"rows of {self.stage}")
        if tail and fits:
            out += self._reduce_rows(op, shift(accv, slot), npad, shift(src, full * epr), src_rs,
                                     tail, rows, f"{self.stage}: {op} of the {tail}-column tails")
        self.v.instrs.extend(out)
        return accv, npad, width

    def _fold(self, op: str, src: Val, src_rs: int, rows: int, cols: int, accv: Val,
              what: str) -> tuple[Val, int, int]:
        """``accv`` row r = op over the 256-byte chunks of ``src`` row r, elementwise."""
        epr = self.t.repeat_bytes // src.dtype.bytes
        full, tail = divmod(cols, epr)
        self.b._alloc(accv.buf, src.dtype, rows * epr, 1, (rows, epr), what)
        fn = {"sum": "add", "max": "max", "min": "min"}[op]
        a = (accv, epr, 1)

        def chunk(col: Affine) -> tuple[Val, int, int]:
            return replace(src, offset=src.offset + col), src_rs, 1

        out = self._cover("vec_unary", [a, chunk(Affine())], rows, epr, (("fn", "copy"),),
                          f"{self.stage}: {op} partials = first chunk")
        out += self._span(full - 1, 1, lambda k, _: self._cover(
            "vec_binary", [a, a, chunk(k * epr + epr)], rows, epr, (("fn", fn),),
            f"{self.stage}: {op} partials += a chunk"), "c",
            f"{epr}-column chunks of {self.stage} folded into the first")
        if tail:
            out += self._cover("vec_binary", [a, a, chunk(Affine(full * epr))], rows, tail,
                               (("fn", fn),), f"{self.stage}: {op} partials += the tail")
        self.v.instrs.extend(out)
        return accv, epr, epr

    def _halve(self, op: str, src: Val, src_rs: int, rows: int, n: int, epr: int
               ) -> tuple[Val, int, int]:
        """Fold each row's ``n`` 256-byte chunks pairwise with the elementwise op, up to
        HALVINGS times while ``n`` is even (chunks 2i and 2i+1 into chunk i of a new partial
        row, so the two sources are 256 B apart and hit different UB bank groups); the
        WholeReduce levels take the rest. An elementwise repeat costs 1 cycle where
        WholeReduceMax costs 7 and WholeReduceSum 3 (target/costs.py; the binary-tree scheme
        of the ASC reduction guide), but each level is one more dependent instruction (a V
        barrier, ~27 cycles of tail and head): three levels take a 4096-float row's max
        from 448 to ~112 cycles of repeats, and keep the statement count independent of the
        row width. The first level's partials take half the rows' bytes, so a tile whose
        partials fail ``halving_fits`` (``schedule/ub_budget.py``) reduces by WholeReduce
        alone. Returns the partials, their row stride and their columns."""
        fn = {"sum": "add", "max": "max", "min": "min"}[op]
        if not halving_fits(rows, n, self.t):
            return src, src_rs, n * epr  # the first level's partials would crowd the tile out
        for _ in range(HALVINGS):
            if n < 2 or n % 2:
                break
            n //= 2
            self.v.temps += 1
            name = f"{self.stage}_half{self.v.temps}{self.v.suffix}"
            self.b._alloc(name, src.dtype, rows * n * epr, 1, (rows, n * epr),
                          f"{op} of column pairs of the rows of {self.stage}")
            dst = Val(name, Affine(), src.dtype, Affine(), ())
            self._pair_op(fn, dst, n * epr, src, src_rs, rows, n, epr)
            src, src_rs = dst, n * epr
        return src, src_rs, n * epr

    def _pair_op(self, fn: str, dst: Val, dst_rs: int, src: Val, src_rs: int, rows: int,
                 n: int, epr: int) -> None:
        """``dst[r, chunk i] = fn(src[r, chunk 2i], src[r, chunk 2i + 1])`` for ``r < rows``,
        ``i < n``: per row one instruction repeating over its chunks, or per chunk one
        repeating over the rows, whichever issues fewer calls (rows too far apart for a
        repeat stride: per row); loops as ``_span`` makes them."""
        t = self.t
        mr = t.max_repeat
        big = src_rs * src.dtype.bytes // t.block_bytes > t.max_rep_stride
        what = f"{self.stage}: {fn} of column pairs"

        def instr(row: Affine, col: Affine, k: int, over_rows: bool) -> list[Stmt]:
            """``k`` repeats from output (row, chunk col): over rows or along the row."""
            d_step, s_step = (dst_rs, src_rs) if over_rows else (epr, 2 * epr)
            d = Region(dst.buf, row * dst_rs + col * epr, (Dim(k, d_step), Dim(epr, 1)))
            a = Region(src.buf, src.offset + row * src_rs + col * (2 * epr),
                       (Dim(k, s_step), Dim(epr, 1)), src.copy)
            return [Instr("vec_binary", Pipe.V, (d,), (a, replace(a, offset=a.offset + epr)),
                          (("fn", fn),), what)]

        if big or rows * -(-n // mr) <= n * -(-rows // mr):
            out = self._span(rows, 1, lambda r, _: self._span(
                n, mr, lambda c, k: instr(r, c, k, False), "p", what), "r",
                f"rows of {self.stage}")
        else:
            out = self._span(n, 1, lambda c, _: self._span(
                rows, mr, lambda r, k: instr(r, c, k, True), "p", what), "c",
                f"column pairs of {self.stage}")
        self.v.instrs.extend(out)

    def _reduce_rows(self, op: str, dst: Val, dst_rs: int, src: Val, src_rs: int, cols: int,
                     rows: int, comment: str) -> list[Stmt]:
        """``dst[r * dst_rs] = op(src[r * src_rs : + cols])`` in max_repeat pieces; for max/min
        each piece's dst on 2 elements (``_reduce_dst_elems``)."""
        odd = _reduce_dst_elems(op) == 2 and dst_rs % 2 == 1
        step = self.t.max_repeat - (self.t.max_repeat % 2 if odd else 0)
        return self._span(rows, step, lambda r, n: [Instr(
            "vec_reduce", Pipe.V,
            (Region(dst.buf, dst.offset + r * dst_rs, (Dim(n, dst_rs), Dim(1, 1)), dst.copy),),
            (Region(src.buf, src.offset + r * src_rs, (Dim(n, src_rs), Dim(cols, 1)),
                    src.copy),),
            (("fn", op),), comment=comment)], "p", f"rows reduced by {self.stage}", even=odd)


# --------------------------------------------------------------------------- helpers
def cast_steps(src: DType, dst: DType, round_mode: str, target: Target, where: str
               ) -> list[tuple[DType, str]]:
    """The ``Cast`` calls converting ``src`` to ``dst``: ``[(to dtype, round mode), ...]``.

    A pair of ``target.vector_casts`` is one call; a pair of ``target.cast_chains`` goes
    through its intermediate dtypes (exact: the chain's value is the direct conversion's).
    Round modes: the first float -> int step of a float source takes ``round_mode``; other
    float -> int steps see integers (``rint``); int -> int steps ``none`` (saturating); widening float -> float
    ``none``, narrowing ``rint``; int -> float ``none`` where the table allows it (CAST_NONE is
    CAST_RINT when the conversion loses precision, docs Cast.md), else ``rint``.
    """
    pair = (src.name, dst.name)
    if pair in target.vector_casts:
        path = [src.name, dst.name]
    elif pair in target.cast_chains:
        path = [src.name, *target.cast_chains[pair], dst.name]
    else:
        direct = ", ".join(f"{a}->{b}" for a, b in sorted(target.vector_casts))
        chained = ", ".join(f"{a}->{b}" for a, b in sorted(target.cast_chains))
        raise UnsupportedError(
            f"{where}: cast {src} -> {dst} is neither a vector Cast on {target.name} nor an "
            f"exact chain of them; cast to an intermediate type explicitly if its double "
            f"rounding is acceptable (Cast pairs: {direct}; chained: {chained})")
    steps: list[tuple[DType, str]] = []
    rounded = not src.is_float  # integral values: no later step has anything to round
    for a, b in zip(path, path[1:]):
        da, db = as_dtype(a), as_dtype(b)
        modes = target.vector_casts[(a, b)]
        if da.is_float and not db.is_float:
            mode = "rint" if rounded else round_mode
            rounded = True
        elif not db.is_float:
            mode = "none"
        elif da.is_float and da == db:  # rounding to an integral value (expand_math's round)
            mode = round_mode if round_mode in modes else "rint"
        elif da.is_float:
            mode = "none" if db.bytes > da.bytes else "rint"
        else:
            mode = "none" if "none" in modes else "rint"
        if mode not in modes:
            raise UnsupportedError(
                f"{where}: Cast {a} -> {b} on {target.name} takes round modes "
                f"{', '.join(sorted(modes))}, not {mode!r}; use one of them")
        steps.append((db, mode))
    return steps


def _reduce_dst_elems(op: str) -> int:
    """Elements a WholeReduce dst must be aligned to: 1 for sum (sizeof(T), asc-devkit docs
    ReduceRepeat.md:171-172), 2 for max/min (the library checks 2 * sizeof(T) for every order,
    impl/basic_api/kernel_operator_vec_reduce_intf_impl.h:177; the docs' sizeof(T) for
    ORDER_ONLY_VALUE, ReduceRepeat.md:178, is the laxer of the two)."""
    return 1 if op == "sum" else 2


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


def _combo_comment(axes: tuple[str, ...], ver: dict[str, str]) -> str:
    return ", ".join(f"{a}: {ver[a]} tile" for a in axes)


def _subst(e: Expr, mapping: dict) -> Expr:
    if isinstance(e, IndexVar) and e in mapping:
        return mapping[e]
    kids = children(e)
    if not kids:
        return e
    return _rebuild(e, tuple(_subst(c, mapping) for c in kids))


def _rebuild(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    if kids == children(e):
        return e
    if isinstance(e, Load):
        return replace(e, indices=kids)
    if isinstance(e, (Binary, Compare, IndexArith)):
        return replace(e, a=kids[0], b=kids[1])
    if isinstance(e, (Unary, Cast)):
        return replace(e, x=kids[0])
    if isinstance(e, Select):
        return replace(e, cond=kids[0], a=kids[1], b=kids[2])
    if isinstance(e, Reduce):
        return replace(e, body=kids[0])
    raise AssertionError(e)


def _fold(op: str, a: float | int, b: float | int, dt: DType) -> float | int:
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
         "max": np.maximum, "min": np.minimum}[op]
    return store(dt, f(store(dt, a), store(dt, b))).item()


def _fold1(op: str, x: float | int, dt: DType) -> float | int:
    f = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v),
         "abs": np.abs, "relu": lambda v: np.maximum(v, 0), "neg": np.negative,
         "reciprocal": lambda v: 1 / v}[op]
    return store(dt, f(store(dt, x))).item()


