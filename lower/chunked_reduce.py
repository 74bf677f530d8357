"""Chunked reductions on the vector path: a stage whose reduce axis the schedule splits.

``split("mx", "k", 3600)`` on ``mx[i] = max_k x[i, k]`` (``schedule/chunks.py``) reads each
row of 32 000 in 3600-column chunks instead of whole: the stage's box of rows starts from the
reduction's identity, every chunk of the inputs the reduction reads along ``k`` is loaded into
UB (its own buffer ``x_ub_mx``, double buffered when ``x`` is, so the next chunk loads while
this one is reduced), reduced to one value per row and combined into the running result. The
tail chunk is a branch of the chunk loop's last trip, in the copy that trip's number gives, so
its load joins the loop's ping-pong flags; peeled after the loop it waited for all of the loop's vector work
before loading (log-softmax 4096 x 32 000 in pieces and chunks of 8 800: modelled 734.9 us
peeled, 663.4 us as a branch). What the stage computes from the finished reduction
(``rsqrt(sum / n + eps)``) follows, once::

    [V] vec_dup mx_ub <- -inf                        # running max
    for mx_k_o1 in 0..9:                             # chunks of k (split by 3600)
      if mx_k_o1 < 8:                                # a whole chunk
        [MTE2] copy_gm_ub x_ub_mx[mx_k_o1 % 2] <- x@(row, 3600*mx_k_o1)
        [V] ... max of the chunk's rows -> mx_t2
        [V] vec_binary fn=max mx_ub <- mx_ub, mx_t2
      if mx_k_o1 == 8:                               # the tail chunk: 3200 columns
        ...

Only inputs are read in chunks: a stage the reduction reads along its reduce axis must be
inlined (computed chunk by chunk with it), and an input loaded once is whole in UB already.

An ``online`` pair (``schedule/online.py``: a sum of ``exp(... - mx[row])`` and its max) is
one chunk loop: each chunk is loaded and cast once, its max found, the running sum scaled by
``exp(old mx - new mx)`` and the running max moved on, then the chunk's sum of exponentials
against the new max added (``_online_stage``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ascendsched.algo.algorithm import loads
from ascendsched.algo.check import subst
from ascendsched.algo.expr import Expr, IndexVar, Load, Reduce, ReduceVar
from ascendsched.algo.gemm_epilogue import walk
from ascendsched.algo.tensor import Tensor
from ascendsched.errors import ScheduleError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.bounds import Axis, _union
from ascendsched.lower.ir import For, If, Stmt
from ascendsched.lower.select_reduce import COMBINE, IDENTITY
from ascendsched.lower.select_vector import repeated
from ascendsched.lower.tile_memory import Layout
from ascendsched.lower.vector_instrs import Val
from ascendsched.schedule.chunks import chunk_split, reads_along
from ascendsched.schedule.online import online_form, online_of

if TYPE_CHECKING:
    from ascendsched.lower.build_loop_nest import _Version
    from ascendsched.lower.select_vector import _ExprGen
    from ascendsched.schedule.schedule import Split

class _ChunkedReductions:
    """Chunked reductions, a part of ``_Builder`` (lower/build_loop_nest.py), whose schedule,
    stage bodies, tiles and instruction selection they use."""

    def _find_chunks(self) -> dict[str, tuple[Split, Reduce]]:
        """Every tile stage whose reduction the schedule chunks: its split and the reduction
        (a node of the stage's inlined body), checked."""
        out: dict[str, tuple[Split, Reduce]] = {}
        self.chunk_loads: dict[str, frozenset[int]] = {}  # ids of the loads read in chunks
        for st in self.algo.stages:
            d = chunk_split(self.s, st.name)
            if d is None:
                continue
            call = f"split('{st.name}', '{d.axis}', {d.factor})"
            if st.name in self.inlined:  # its chunks would be dropped without a word
                raise ScheduleError(
                    f"{call}: '{st.name}' is inlined into its consumers, where its reduction "
                    f"is read whole; compute it at a tile loop to read it in chunks: "
                    f"compute_at('{st.name}', '{self.out.name}', <tile loop>)")
            reds = [e for e in walk(self.bodies[st.name])
                    if isinstance(e, Reduce) and any(v.name == d.axis for v in e.axes)]
            if len(reds) != 1 or len(reds[0].axes) != 1:
                raise ScheduleError(
                    f"{call}: '{st.name}' must hold one reduction over '{d.axis}' alone to read "
                    f"it in chunks; write each reduction as a stage of its own")
            red = reds[0]
            rv = red.axes[0]
            for ld in loads(red.body):
                if not reads_along(ld, rv):
                    continue
                t = ld.tensor
                if not t.is_placeholder and t in self.algo.outputs:
                    raise ScheduleError(
                        f"{call}: the reduction reads '{t.name}' along '{d.axis}', an output "
                        f"of '{self.algo.name}' stored whole to GM, which cannot be computed "
                        f"chunk by chunk with it (nor inlined): write '{st.name}' over what "
                        f"'{t.name}' is made of (its expression in the inputs), which the "
                        f"chunks can read")
                if not t.is_placeholder:
                    raise ScheduleError(
                        f"{call}: the reduction reads stage '{t.name}' along '{d.axis}', so "
                        f"'{t.name}' would have to be computed chunk by chunk with it: "
                        f"compute_inline('{t.name}')")
                if self.s.loaded_once(t.name):
                    raise ScheduleError(
                        f"{call}: load_once('{t.name}') keeps '{t.name}' whole in UB, but "
                        f"'{st.name}' reads it in chunks of {d.factor}; drop one of the two")
            out[st.name] = (d, red)
            self.chunk_loads[st.name] = frozenset(
                id(ld) for ld in loads(red.body) if reads_along(ld, rv))
        self.online = self._find_online()
        return out

    def _find_online(self) -> dict[str, str]:
        """Sum stage -> max stage of the schedule's ``online`` pairs, checked on the stage
        bodies as built (``schedule/online.py``; the schedule checked the rest)."""
        pairs = online_of(self.s)
        names = [st.name for st in self.tile_stages]
        for s_name, m_name in pairs.items():
            call = f"online('{s_name}', '{m_name}')"
            why = online_form(self.bodies[s_name], self.algo.tensor(m_name),
                              self.algo.tensor(s_name))
            if why is not None:
                raise ScheduleError(f"{call}: {why}")
            between = [n for n in names[names.index(m_name) + 1:names.index(s_name)]
                       if any(ld.tensor.name == m_name for ld in loads(self.bodies[n]))]
            if between:
                raise ScheduleError(
                    f"{call}: '{between[0]}' reads '{m_name}' before '{s_name}' is reduced, "
                    f"but the online loop finishes '{m_name}' only with '{s_name}': "
                    f"compute_inline('{between[0]}')")
        return pairs

    def chunk_read(self, stage: str, ld: Load) -> bool:
        """Whether ``ld`` in ``stage``'s body is read chunk by chunk (not over the tile's
        box, which bounds inference then leaves out)."""
        return id(ld) in self.chunk_loads.get(stage, ())

    def _chunked_stage(self, v: _Version, st: Tensor, lay: Layout,
                       layouts: dict[str, Layout], copy: Affine) -> None:
        """``st`` into ``lay``: its reduction over the chunks (module docstring), then the
        rest of its body. A max an ``online`` sum joins is computed in that sum's loop."""
        from ascendsched.lower.select_vector import _ExprGen

        if st.name in self.online.values():
            return  # in the loop of its sum (_online_stage), the next statistic
        if st.name in self.online:
            self._online_stage(v, st, lay, layouts)
            return
        d, red = self.chunks[st.name]
        rv = red.axes[0]
        dom = list(lay.box)
        env = {ax: i for i, ax in enumerate(st.op.axes)}  # type: ignore[union-attr]
        gen = _ExprGen(self, v, st.name, dom, env, layouts)
        dst = Val(lay.buf, lay.copy, lay.dtype, Affine(), lay.strides)
        body = self.bodies[st.name]
        acc = self._accumulator(gen, st, red, lay, dst)
        ident = IDENTITY[red.op]
        gen.vec("vec_dup", acc, (), "dup", (("value", ident),),
                f"{st.name}: the running {red.op} starts at {ident}")
        self._chunk_loop(v, st.name, d, int(rv.extent),
                         f"chunks of {rv.name} (split by {d.factor}): the running {red.op} of "
                         f"{st.name}",
                         lambda inner, chunk, cp: self._chunk(inner, st, red, dom, env, layouts,
                                                              acc, chunk, cp))
        if acc is not dst:  # the rest of the body, with the finished reduction
            gen.known = (red, acc)
            gen.emit_into(body, dst)

    def _accumulator(self, gen: _ExprGen, st: Tensor, red: Reduce, lay: Layout, dst: Val
                     ) -> Val:
        """Where ``st``'s running reduction goes: its own tile when its body is the
        reduction alone over all its axes, else a temporary."""
        env = {ax: i for i, ax in enumerate(st.op.axes)}  # type: ignore[union-attr]
        axes = tuple(sorted({env[x] for x in walk(red.body) if isinstance(x, IndexVar)}))
        whole = self.bodies[st.name] is red and red.dtype == lay.dtype and \
            axes == tuple(range(len(lay.box)))
        return dst if whole else gen.temp(axes, red.dtype,
                                          f"running {red.op} over '{red.axes[0].name}'")

    def _chunk_loop(self, v: _Version, stage: str, d: Split, size: int, what: str,
                    one: Callable[[_Version, Axis, Affine], None]) -> None:
        """Into ``v``: the loop over the chunks of a reduce axis of ``size`` (``d``'s
        factor), ``one(version, chunk, copy)`` making each chunk's statements; the tail chunk
        a branch of the last trip."""
        from ascendsched.lower.build_loop_nest import _Version

        full, tail = divmod(size, d.factor)
        if full == 1 and not tail:
            one(v, Axis(d.axis, Affine(), d.factor), Affine())
            return
        var = self.loop_var(f"{stage}_{d.outer}")
        start = Affine.of(var) * d.factor
        loop: list[Stmt] = []
        for ext, cond in ((d.factor, "<"), (tail, "==")):
            if not ext:
                continue
            inner = _Version(suffix=v.suffix, note=v.note, temps=v.temps)
            one(inner, Axis(d.axis, start, ext), Affine.mod(var, 2))
            v.temps = inner.temps
            loop += [If((Cond(Affine.of(var), cond, full),), tuple(inner.instrs),
                        comment="a whole chunk" if cond == "<" else "the tail chunk")
                     ] if tail else inner.instrs
        v.instrs.append(For(var, full + (tail > 0), tuple(loop), comment=what))

    def _online_stage(self, v: _Version, st: Tensor, lay: Layout,
                      layouts: dict[str, Layout]) -> None:
        """``st`` (a sum of ``exp(... - mx[row])``) and its max ``mx`` in one chunk loop,
        the running sum rescaled as the running max grows (``schedule/online.py``), then the
        rest of ``st``'s body."""
        from ascendsched.lower.select_vector import _ExprGen

        mx = self.algo.tensor(self.online[st.name])
        mlay = layouts[mx.name]
        (d, red), (_, mred) = self.chunks[st.name], self.chunks[mx.name]
        dom = list(lay.box)
        # one loop, the same rows: statistics of one shape computed at one loop
        assert [(a.start, a.extent) for a in mlay.box] == [(a.start, a.extent) for a in dom]
        env = {ax: i for i, ax in enumerate(st.op.axes)}  # type: ignore[union-attr]
        menv = {ax: i for i, ax in enumerate(mx.op.axes)}  # type: ignore[union-attr]
        gen = _ExprGen(self, v, st.name, dom, env, layouts)
        dst = Val(lay.buf, lay.copy, lay.dtype, Affine(), lay.strides)
        top = Val(mlay.buf, mlay.copy, mlay.dtype, Affine(), mlay.strides)  # mx: its body
        acc = self._accumulator(gen, st, red, lay, dst)
        gen.vec("vec_dup", top, (), "dup", (("value", IDENTITY["max"]),),
                f"{mx.name}: the running max starts at -inf")
        gen.vec("vec_dup", acc, (), "dup", (("value", 0),),
                f"{st.name}: the running sum starts at 0")
        rv, mrv = red.axes[0], mred.axes[0]
        # the sum over the max's axis: what both bodies compute of the chunk (its cast) is
        # then one node, computed once
        same = _over(red, rv, mrv)
        both = repeated(mred.body, same.body)

        def one(inner: _Version, chunk: Axis, cp: Affine) -> None:
            mine = self._chunk_loads(inner, mx.name, ((mred, dom, menv), (red, dom, env)),
                                     chunk, layouts, cp)
            common: dict[Expr, Val] = {}
            g = _ExprGen(self, inner, mx.name, dom, menv, mine)
            g.chunk = (mrv, chunk)
            rows = top.varying()
            # the old max kept aside, so the chunk's exponentials wait only for the new max,
            # not for the rescale factor's subtraction too (the copy depends on nothing of
            # the chunk: order_vector.py lets it run beside the chunk's first instructions)
            old = g.temp(rows, top.dtype, f"the running max of {mx.name} before this chunk")
            g.vec("vec_unary", old, (top,), "copy", (("fn", "copy"),),
                  f"{mx.name}: the running max before this chunk")
            part = g.reduce(mred, None, (common, both))
            g.vec("vec_binary", top, (top, part), "max", (("fn", "max"),),
                  f"{mx.name}: running max and this chunk's")
            scale = g.temp(rows, top.dtype, f"exp(old {mx.name} - new {mx.name})")
            g.vec("vec_binary", scale, (old, top), "sub", (("fn", "sub"),),
                  f"{st.name}: old {mx.name} - new {mx.name}")
            g.vec("vec_unary", scale, (scale,), "exp", (("fn", "exp"),),
                  f"{st.name}: the rescale factor exp(old {mx.name} - new {mx.name})")
            g.vec("vec_binary", acc, (acc, scale), "mul", (("fn", "mul"),),
                  f"{st.name}: the sum so far, against the new max")
            gs = _ExprGen(self, inner, st.name, dom, env, mine)
            gs.chunk = (mrv, chunk)
            part = gs.reduce(same, None, (common, both))
            g.vec("vec_binary", acc, (acc, part), "add", (("fn", "add"),),
                  f"{st.name}: running sum and this chunk's, against the new max")

        self._chunk_loop(v, mx.name, d, int(rv.extent),
                         f"chunks of {mrv.name} and {rv.name} (split by {d.factor}): the "
                         f"running max of {mx.name} and the rescaled sum of {st.name} (online)",
                         one)
        if acc is not dst:
            gen.known = (red, acc)
            gen.emit_into(self.bodies[st.name], dst)

    def _chunk(self, v: _Version, st: Tensor, red: Reduce, dom: list[Axis], env: dict,
               layouts: dict[str, Layout], acc: Val, chunk: Axis, copy: Affine) -> None:
        """One chunk into ``v``: its loads, its reduction, combined into ``acc``."""
        from ascendsched.lower.select_vector import _ExprGen

        mine = self._chunk_loads(v, st.name, ((red, dom, env),), chunk, layouts, copy)
        gen = _ExprGen(self, v, st.name, dom, env, mine)
        gen.chunk = (red.axes[0], chunk)
        part = gen.reduce(red, None)
        fn = COMBINE[red.op]
        gen.vec("vec_binary", acc, (acc, part), fn, (("fn", fn),),
                f"{st.name}: running {red.op} and this chunk's")

    def _chunk_loads(self, v: _Version, stage: str, reds: tuple[tuple[Reduce, list[Axis],
                     dict], ...], chunk: Axis, layouts: dict[str, Layout], copy: Affine
                     ) -> dict[str, Layout]:
        """Into ``v``: the loads of the inputs the reductions ``reds`` (each with its domain
        and axes) read along their axes over ``chunk``, one UB buffer per input named after
        ``stage`` (an input two reductions read is loaded once); ``layouts`` with them."""
        boxes: dict[str, tuple[Axis, ...]] = {}
        for red, dom, env in reds:
            rv = red.axes[0]
            where = {**{x: dom[i] for x, i in env.items()}, rv: chunk}
            for ld in loads(red.body):
                if reads_along(ld, rv):
                    b = tuple(self._index_range(e, where, ld) for e in ld.indices)
                    b = tuple(Axis(f"{ld.tensor.name}.{k}", s, n) for k, (s, n) in enumerate(b))
                    boxes[ld.tensor.name] = _union(boxes.get(ld.tensor.name), b, ld)
        mine = dict(layouts)
        for t in self.algo.inputs:
            if t.name not in boxes:
                continue
            if t.name in self.outside:  # staged at a tile loop: read there
                continue
            lay = self._layout(f"{t.name}_ub_{stage}{v.suffix}", t, boxes[t.name], copy)
            mine[t.name] = lay
            v.instrs.extend(self._dma(t, lay, to_ub=True))
        return mine


def _over(red: Reduce, old: ReduceVar, new: ReduceVar) -> Reduce:
    """``red`` reducing over ``new`` instead of ``old`` (one extent): the same values."""
    return replace(red, body=subst(red.body, {old: new}), axes=(new,))
