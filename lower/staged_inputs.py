"""Inputs a vector kernel reads outside its tile loop: their choice and schedule checks.

A part of ``_Builder`` (lower/build_loop_nest.py), whose schedule, loop nest, bounds inference
and stage bodies it uses. Two ways an input is read once for many tiles:

- ``load_once(t)``: loaded whole, per core, before the tile loops (``_invariant_inputs``), and
  every value computed from such inputs alone (``float32(gamma[j])``) computed once there too
  when ``hoist=True`` (``invariant_axes`` keys it);
- ``cache_read(t, 'UB', at=(out, loop))``: staged at an outer tile loop, once per iteration
  of it (``_staged_inputs``), its chunked reads starting on 32-byte blocks
  (``_check_staged_chunks``).

A stage computed at an outer tile loop reads only what exists there
(``_check_outer_placements``).
"""

from __future__ import annotations

from ascendsched.algo.algorithm import loads
from ascendsched.algo.check import children
from ascendsched.algo.expr import Expr, IndexVar, Load, Reduce, ReduceVar
from ascendsched.algo.gemm_epilogue import walk
from ascendsched.algo.tensor import Tensor
from ascendsched.errors import ScheduleError
from ascendsched.lower.affine import Affine
from ascendsched.lower.bounds import Axis


class _StagedInputs:
    """Inputs read outside the tile loop, a part of ``_Builder`` (lower/build_loop_nest.py)."""

    def _invariant_inputs(self) -> frozenset[str]:
        """The inputs the schedule loads once (``load_once``): loaded whole, per core, before
        the tile loops, into one copy the tiles read: every tile the whole input (``gamma[j]``
        when only rows are tiled), or each its part (``gamma[j]`` when rows are cut into pieces:
        one load per core instead of one per piece of every row)."""
        wanted = [t for t in self.algo.inputs if self.s.loaded_once(t.name)]
        if not wanted or not self.nest.loops:
            return frozenset()
        box = tuple(Axis(a, Affine.of(f"{a}__tile") * self.nest.factors[a], self.nest.factors[a])
                    if self.nest.factors[a] < self.sizes[a] else Axis(a, Affine(), self.sizes[a])
                    for a in self.out_axes)
        boxes = self._bounds(box)
        return frozenset(t.name for t in wanted if t.name in boxes)

    def invariant_axes(self, e: Expr, dom: list[Axis], env: dict) -> tuple | None:
        """The key of ``e``'s hoisted value when ``e`` is computed from load_once inputs alone
        (at least one, no other tensor; ``load_once(..., hoist=True)``) over domain axes whose box does not move with the tile
        (constant starts): ``(e, ((axis, start, extent), ...))``; else None."""
        hoist = {t for t in self.hoisted if self.s.hoists(t)}
        if not hoist:
            return None
        read: list[Load] = []
        free: set = set()

        def walk(x: Expr, bound: frozenset) -> None:
            if isinstance(x, Load):
                read.append(x)
            if isinstance(x, (IndexVar, ReduceVar)) and x not in bound:
                free.add(x)
            inner = bound | set(x.axes) if isinstance(x, Reduce) else bound
            for c in children(x):
                walk(c, inner)

        walk(e, frozenset())
        if not read or any(ld.tensor.name not in hoist for ld in read):
            return None
        box = []
        for v in free:
            ax = dom[env[v]]
            if not ax.start.is_const:
                return None
            box.append((env[v], ax.start.const, ax.extent))
        return (e, tuple(sorted(box)))

    def _staged_inputs(self, names: list[str]) -> dict[int, list[Tensor]]:
        """The inputs staged at an outer tile loop (``cache_read(t, 'UB', at=(out, loop))``),
        by the loop's level."""
        out: dict[int, list[Tensor]] = {}
        for t in self.algo.inputs:
            d = self.s.loaded_at(t.name)
            if d is None:
                continue
            call = f"cache_read('{t.name}', 'UB', at=('{d.stage}', '{d.loop}'))"
            if d.stage != self.out.name:
                raise ScheduleError(
                    f"{call}: the kernel's tile loops are those of output '{self.out.name}'; "
                    f"stage '{t.name}' at one of them: {', '.join(names[:-1]) or '(none)'}")
            if d.loop not in names[:-1]:
                raise ScheduleError(
                    f"{call}: '{d.loop}' is not an outer tile loop of '{self.out.name}' (its "
                    f"loops now: {', '.join(names) or '(none)'}); stage it at one of "
                    f"{', '.join(names[:-1]) or '(none: split first)'}")
            level = names.index(d.loop)
            self._check_staged_chunks(t, level, call)
            out.setdefault(level, []).append(t)
        return out

    def _check_staged_chunks(self, t: Tensor, level: int, call: str) -> None:
        """Chunks read out of an input staged at tile loop ``level`` start where the previous
        chunk ends, so along its last axis a chunk must be a whole number of 32-byte blocks
        (a vector operand starts on one); loaded into a buffer of their own (a stage computed
        further out), any width is fine."""
        per = self.t.elems_per_block(t.dtype.bytes)
        inner = len(self.nest.loops) - 1
        for name, (d, red) in self.chunks.items():
            if self.level_of.get(name, inner) < level:
                continue
            rv = red.axes[0]
            along_rows = any(ld.tensor is t and rv in walk(ld.indices[-1])
                             for ld in loads(red.body))
            if along_rows and d.factor < int(rv.extent) and d.factor % per:
                raise ScheduleError(
                    f"{call}: '{name}' reads '{t.name}' in chunks of {d.factor} x {t.dtype} "
                    f"({d.factor * t.dtype.bytes} B) out of the staged row, so a chunk would "
                    f"start off a 32-byte block; split('{name}', '{d.axis}', ...) by a "
                    f"multiple of {per}, or read '{t.name}' per chunk (no cache_read)")

    def _check_outer_placements(self, names: list[str]) -> None:
        """A stage computed at an outer tile loop reads only stages computed there or further
        out: one computed per tile inside does not exist yet."""
        inner = len(names) - 1
        for st in self.tile_stages:
            at = self.level_of.get(st.name)
            if at is None:
                continue
            for r in sorted(self._reads(st)):
                lv = self.level_of.get(r, inner if r in self.bodies else None)
                if lv is not None and lv > at:
                    raise ScheduleError(
                        f"compute_at('{st.name}', '{self.out.name}', '{names[at]}'): "
                        f"'{st.name}' reads '{r}', which is computed inside that loop (at "
                        f"'{names[lv]}'); compute '{r}' at '{names[at]}' or further out too, or "
                        f"'{st.name}' at '{names[lv]}'")
