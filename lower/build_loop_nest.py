"""Algorithm + schedule -> kernel IR for the vector (AIV) path: the tile loops and versions.

The output stage's tile loops come from the schedule (splits, reorder, fuse, bind); tiles the
factors do not divide are peeled (serial loops, and bound loops over one axis: the tail after
the persistent loop on the core that owns it) or guarded (fused loops), each version with
static extents; what the full and tail versions of a fused loop's last axis both compute runs
once, between their guards (``shared_versions.py``). Per tile: inputs are copied GM -> UB
(MTE2), every non-inlined stage is computed into its UB buffer by vector instructions over the
box bounds inference asks of it, and the output tile goes UB -> GM (MTE3). Example, ``z = x + y`` split by 2048, 2 cores::

    for k in 0..2:                       # tiles k*2 + block_idx
      [MTE2] copy_gm_ub x_ub <- x@(2048*(2*k + block_idx))
      [MTE2] copy_gm_ub y_ub <- y@(...)
      [V] vec_binary fn=add z_ub[16:128, 128:1] <- x_ub[...], y_ub[...]
      [MTE3] copy_ub_gm z@(...) <- z_ub

Inputs the schedule loads once (``load_once``: ``gamma[j]`` with only rows tiled) are copied
before the tile loops, and so is every value computed from them alone: a subexpression such as
``float32(gamma[j])`` is computed once per core into a buffer of its own, before the tile loops
(loop-invariant code motion, as Halide's ``LICM``), and every tile reads it
(``select_vector._hoist``; which inputs and values: ``staged_inputs.py``). Inlined stages are
substituted into their consumers here. The pieces a tile is made of live next door:
``bounds.py`` (the box of every tensor a tile reads), ``tile_memory.py`` (UB tiles and their
GM <-> UB copies), ``chunked_reduce.py`` (reductions read in chunks) and ``select_vector.py``
(a stage body -> vector instructions).

No syncs and no addresses yet: later passes add them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ascendsched.algo.algorithm import loads
from ascendsched.algo.check import inlined
from ascendsched.algo.expr import (
    Expr,
)
from ascendsched.algo.tensor import Tensor
from ascendsched.errors import ScheduleError, UnsupportedError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.bounds import Axis, _Bounds
from ascendsched.lower.chunked_reduce import _ChunkedReductions
from ascendsched.lower.expand_math import expand_math
from ascendsched.lower.ir import Buffer, For, GmTensor, Kernel, Program, Stmt
from ascendsched.lower.select_vector import _ExprGen
from ascendsched.lower.several_outputs import check_output_tiles
from ascendsched.lower.shared_versions import Version, shared_once
from ascendsched.lower.staged_inputs import _StagedInputs
from ascendsched.lower.tile_loops import class_loop, class_run
from ascendsched.lower.tile_memory import Layout, _TileMemory
from ascendsched.lower.vector_instrs import Val
from ascendsched.schedule.chunks import chunk_split
from ascendsched.schedule.cube_directives import check_vector_schedule
from ascendsched.schedule.schedule import ComputeAt, ComputeInline, Schedule
from ascendsched.target import CoreType, Target


def build_loop_nest(sched: Schedule, target: Target | None = None) -> Kernel:
    """Lower ``sched`` (vector algorithms) to an unsynchronised, unplanned AIV kernel."""
    check_vector_schedule(sched)
    return _Builder(sched, target or sched.target).build()


@dataclass
class _Version:
    """State while generating one tile version."""

    instrs: list[Stmt] = field(default_factory=list)
    temps: int = 0
    suffix: str = ""  # appended to every buffer name of a tail tile version
    note: str = ""  # appended to the comment of every temporary


# --------------------------------------------------------------------------- builder
class _Builder(_Bounds, _TileMemory, _ChunkedReductions, _StagedInputs):
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
                        "Split", "Reorder", "Fuse", "Bind") and d != chunk_split(sched, st.name):
                    raise ScheduleError(
                        f"{type(d).__name__.lower()} on '{st.name}' has no effect: '{st.name}' is "
                        f"computed inside '{self.out.name}''s tile, whose box bounds inference "
                        f"derives; schedule the loops of '{self.out.name}' instead")
        self.inlined = {n for n, p in self.placement.items() if isinstance(p, ComputeInline)}
        self.tile_stages = [st for st in self.algo.stages if st.name not in self.inlined]
        self.bodies = {st.name: expand_math(self._inline(st.op.body), target)  # type: ignore
                       for st in self.tile_stages}
        self.chunks = self._find_chunks()  # stages whose reduction reads chunks of its rows
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
        # values of load_once inputs alone, computed once before the tile loops
        self.once = _Version(suffix="_once", note=" (computed once, before the tile loops)")
        self.once_vals: dict[tuple, Val] = {}
        self.block_dim = self.nest.bound[1] if self.nest.bound else 1
        self.n_loops = 0  # IR loops made for vector instructions (numbers their variables)
        self.suffixes: dict[tuple[str, ...], str] = {}  # tail version -> its buffers' suffix
        self.depth = 0  # tile loops around the version being generated
        self.in_peeled_tail = False  # generating the tail of _peeled_tail
        # stages computed at an outer tile loop (once per iteration of it, before the loops
        # inside): the loop's level per stage, and their layouts while the loops inside it
        # are generated
        names = [n for n, _ in self.nest.loops]
        self.level_of = {st.name: names.index(p.loop) for st in self.tile_stages
                         if isinstance(p := self.placement.get(st.name), ComputeAt)
                         and p.loop in names[:-1]}
        self.outside: dict[str, Layout] = {}
        self._read_cache: dict[str, frozenset[str]] = {}
        self.staged = self._staged_inputs(names)
        self._check_outer_placements(names)
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
        loops = self._gen_loops(0, idx, ver, Affine())
        body = prologue + self.once.instrs + loops
        params = tuple(GmTensor(t.name, tuple(t.shape), t.dtype) for t in self.algo.inputs)  # type: ignore[arg-type]
        params += tuple(GmTensor(o.name, tuple(o.shape), o.dtype, "output")  # type: ignore[arg-type]
                        for o in self.algo.outputs)
        return Kernel.build(
            name=self.algo.name, params=params, buffers=tuple(self.buffers.values()),
            block_dim=self.block_dim, programs=(Program(CoreType.AIV, tuple(body)),),
            target=self.t, notes=tuple(str(self.s).splitlines()),
        )

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
                inner = self._below(level, {**idx, a: Affine.of(name)}, {**ver, a: "full"},
                                    Affine.mod(name, 2))
                self.depth -= 1
                out.append(For(name, full[a], tuple(inner), comment=f"tiles of {a} (split by "
                               f"{self.nest.factors[a]})"))
            if full[a] < tiles[a]:
                out.extend(self._below(level, {**idx, a: Affine(full[a])},
                                       {**ver, a: "tail"}, Affine(full[a] % 2)))
            return out
        total = int(np.prod([tiles[a] for a in axes]))
        # a bound loop over one axis runs its full tiles, the tail is peeled after it
        peel = bound and len(axes) == 1 and full[axes[0]] < tiles[axes[0]]
        count = full[axes[0]] if peel else total  # (>= 1: a factor never exceeds its axis)
        if bound:  # tile T on core T % cores (tile_loops.py), the tail a class of its own
            cores = self.block_dim
            k = f"{name}_k"
            run = class_run(count, 0, cores, total, k, every_loop=True)
            v, copy_in = run.tile(cores), Affine.mod(k, 2)
            what = f"{'full ' * peel}tiles {name} = {k}*{cores} + block_idx over {cores} cores"
        else:
            v, copy_in = Affine.of(name), Affine.mod(name, 2)
            what = f"fused tiles of {', '.join(axes)}"
        per_axis: dict[str, Affine] = {}
        inner_count = 1
        for a in reversed(axes):
            per_axis[a] = v.floordiv(inner_count).modulo(tiles[a]) if a != axes[0] else \
                v.floordiv(inner_count)
            inner_count *= tiles[a]
        versions: list[Version] = []
        tail_axes = [a for a in axes if full[a] < tiles[a] and not peel]
        shared_comment: dict[tuple[Cond, ...], str] = {}
        last_comment: dict[Cond, str] = {}
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
            inner = self._below(level, {**idx, **per_axis}, cver, copy_in)
            self.depth -= 1
            versions.append((tuple(conds), inner, _combo_comment(axes, cver)))
            if conds:
                last = tail_axes[-1]
                shared_comment[tuple(conds[:-1])] = _combo_comment(
                    tuple(a for a in axes if a != last), cver)
                last_comment[conds[-1]] = _combo_comment((last,), cver)
        # what the last axis's full and tail versions both run, once (shared_versions.py)
        body = shared_once(versions, shared_comment, last_comment)
        if not bound:
            return [For(name, total, tuple(body), comment=what)]
        loop = class_loop(run, cores, body, what,
                          f"this core's last {'full ' * peel}tile")
        return loop + self._peeled_tail(level, idx, ver, name, axes[0], count) if peel else loop

    def _peeled_tail(self, level: int, idx: dict[str, Affine], ver: dict[str, str],
                     name: str, a: str, full: int) -> list[Stmt]:
        """The tail tile of a bound loop over one axis, peeled after the loop of its full
        tiles, on the core that owns it (tile ``full`` runs on core ``full % cores``, after
        that core's full tiles, as in the loop).

        Peeled, the loop body is one version, so a carried flag's set follows its source
        statement instead of the last version in the body. With the tail a branch inside the
        loop (``if tile < full: ... if tile == full: ...``), the x_ub slot-free set of a
        one-copy LayerNorm 4096x4096 in 3-row tiles came after the whole tile, and the next
        load waited for every vector instruction: modelled 71.96 us, 49.04 us peeled."""
        cores = self.block_dim
        self.in_peeled_tail = True
        tail = self._below(level, {**idx, a: Affine(full)}, {**ver, a: "tail"},
                           Affine((full // cores) % 2))
        self.in_peeled_tail = False
        run = class_run(1, full, cores, full + 1, f"{name}_tail")
        return class_loop(run, cores, tail, "",
                          f"{a}: tail tile {name} = {full}, on core {full % cores}")

    def _below(self, level: int, idx: dict[str, Affine], ver: dict[str, str], copy: Affine
               ) -> list[Stmt]:
        """The body of one iteration (one version) of tile loop ``level``: the inputs staged
        at that loop (``cache_read(..., 'UB', at=...)``) and the stages computed there, over
        the box every tile inside reads (the axes of the loops inside whole, the chunks of
        every chunked reduction too), then the loops inside, whose tiles and chunks read
        those buffers."""
        here = [st for st in self.tile_stages if self.level_of.get(st.name) == level]
        staged = self.staged.get(level, [])
        if not here and not staged:
            return self._gen_loops(level + 1, idx, ver, copy)
        inner_axes = {a for _, axes in self.nest.loops[level + 1:] for a in axes}
        box = tuple(Axis(a, Affine(), self.sizes[a]) if a in inner_axes else ax
                    for a, ax in zip(self.out_axes, self._tile_box(idx, ver)))
        boxes = self._bounds(box)
        v = _Version(suffix=self._suffix(ver))
        saved = self.outside
        if staged:
            whole = self._bounds(box, chunks_whole=True)
            mine = {}
            for t in staged:
                if t.name not in whole:
                    raise ScheduleError(
                        f"cache_read('{t.name}', 'UB', at=('{self.out.name}', "
                        f"'{self.nest.loops[level][0]}')): nothing inside that loop reads "
                        f"'{t.name}'; stage it at a loop further out, or drop the call")
                lay = self._layout(self._tile_name(t, f"_ub_at{level}", v), t, whole[t.name],
                                   copy)
                v.instrs.extend(self._dma(t, lay, to_ub=True))
                mine[t.name] = lay
            self.outside = {**saved, **mine}
        wanted = set().union(*(self._reads(st) for st in here))
        layouts = self._compute(v, here, boxes, copy, wanted, f"_ub_at{level}")
        self.outside = {**self.outside, **{st.name: layouts[st.name] for st in here}}
        inner = self._gen_loops(level + 1, idx, ver, copy)
        self.outside = saved
        return v.instrs + inner

    def _compute(self, v: _Version, stages: list[Tensor], boxes: dict, copy: Affine,
                 wanted: set[str] | None, input_buf: str = "_ub") -> dict[str, Layout]:
        """Into ``v``: the loads of the inputs of ``wanted`` (None: every input the boxes
        name) that are not loaded once, then ``stages`` over their boxes, reading what is
        computed outside (``self.outside``) too; the layouts of all of them."""
        layouts: dict[str, Layout] = dict(self.outside)
        for t in self.algo.inputs:
            if t.name in self.hoisted:
                layouts[t.name] = self.hoisted_layouts[t.name]
            elif t.name in self.outside:  # staged at an outer tile loop
                continue
            elif t.name in boxes and (wanted is None or t.name in wanted):
                lay = self._layout(self._tile_name(t, input_buf, v), t, boxes[t.name], copy)
                layouts[t.name] = lay
                v.instrs.extend(self._dma(t, lay, to_ub=True))
        for st in stages:
            lay = self._layout(self._tile_name(st, "_ub", v), st, boxes[st.name], copy)
            layouts[st.name] = lay
            if st.name in self.chunks:
                self._chunked_stage(v, st, lay, layouts, copy)
            else:
                self._stage(v, st, lay, layouts)
        return layouts

    def _tile_name(self, t: Tensor, stem: str, v: _Version) -> str:
        """The UB buffer of ``t``'s tile in version ``v``. The tail peeled after a bound loop
        keeps the loop's double-buffered tiles, in the copy the loop would have used next:
        its loads then fill the copy the loop's last tile does not use, while that tile is
        computed. (With buffers of its own, which the planner put in the last tile's bytes,
        the load waited for the loop's last store: bias_add 16384x256 modelled 16.73 us
        against 16.40.) Its other buffers are its own (``_suffix``)."""
        if self.in_peeled_tail and self.s.copies(t.name) == 2:
            return f"{t.name}{stem}"
        return f"{t.name}{stem}{v.suffix}"

    def _reads(self, st: Tensor) -> frozenset[str]:
        """The tensors ``st``'s body (inlined stages substituted) reads over its box (not in
        chunks of a chunked reduction)."""
        got = self._read_cache.get(st.name)
        if got is None:
            got = self._read_cache[st.name] = frozenset(
                ld.tensor.name for ld in loads(self.bodies[st.name])
                if not self.chunk_read(st.name, ld))
        return got

    def loop_var(self, stem: str) -> str:
        """A loop variable name no other loop of the kernel uses."""
        self.n_loops += 1
        return f"{stem}{self.n_loops}"

    # ----------------------------------------------------------------- one tile
    def _tile_box(self, idx: dict[str, Affine], ver: dict[str, str]) -> tuple[Axis, ...]:
        """The output box of one tile (of the given version)."""
        box = []
        for a in self.out_axes:
            f = self.nest.factors[a]
            ext = {"whole": self.sizes[a], "full": f, "tail": self.sizes[a] % f}[ver[a]]
            box.append(Axis(a, idx[a] * f if ver[a] != "whole" else Affine(), ext))
        return tuple(box)

    def _suffix(self, ver: dict[str, str]) -> str:
        """The buffer-name suffix of a version. A tail version after every tile loop gets
        buffers of its own: one name used by two versions would live from the first version's
        first use to the other's last use, and lifetimes spanning both versions keep the
        planner from reusing any UB between them. (A tail inside a loop keeps the shared
        names: its own buffers could take space the next iteration's full tile uses, and the
        syncs for that would serialise the loop.)"""
        key = tuple(ver[a] for a in self.out_axes)
        if "tail" in key and key not in self.suffixes and self.depth == 0:
            self.suffixes[key] = "_tail" + (str(len(self.suffixes) + 1) if self.suffixes else "")
        return self.suffixes.get(key, "")

    def _tile(self, idx: dict[str, Affine], ver: dict[str, str], copy: Affine) -> list[Stmt]:
        boxes = self._bounds(self._tile_box(idx, ver))
        v = _Version(suffix=self._suffix(ver))
        inside = [st for st in self.tile_stages if st.name not in self.outside]
        # the inputs the tile's own stages read (all it needs, when none is computed outside)
        wanted = set().union(*(self._reads(st) for st in inside)) if self.outside else None
        layouts = self._compute(v, inside, boxes, copy, wanted)
        for o in self.algo.outputs:
            v.instrs.extend(self._dma(o, layouts[o.name], to_ub=False))
        return v.instrs

    # ----------------------------------------------------------------- stage codegen
    def _stage(self, v: _Version, st: Tensor, lay: Layout, layouts: dict[str, Layout]) -> None:
        dom = list(lay.box)
        env = {ax: i for i, ax in enumerate(st.op.axes)}  # type: ignore[union-attr]
        gen = _ExprGen(self, v, st.name, dom, env, layouts)
        dst = Val(lay.buf, lay.copy, lay.dtype, Affine(), lay.strides)
        gen.emit_into(self.bodies[st.name], dst)

    def _inline(self, e: Expr) -> Expr:
        return inlined(e, self.inlined)


def _combo_comment(axes: tuple[str, ...], ver: dict[str, str]) -> str:
    return ", ".join(f"{a}: {ver[a]} tile" for a in axes)
