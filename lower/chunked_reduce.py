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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendsched.algo.algorithm import loads
from ascendsched.algo.expr import IndexVar, Load, Reduce
from ascendsched.algo.gemm_epilogue import walk
from ascendsched.algo.tensor import Tensor
from ascendsched.errors import ScheduleError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.bounds import Axis, _union
from ascendsched.lower.ir import For, If, Stmt
from ascendsched.lower.select_reduce import COMBINE, IDENTITY
from ascendsched.lower.tile_memory import Layout
from ascendsched.lower.vector_instrs import Val
from ascendsched.schedule.chunks import chunk_split, reads_along

if TYPE_CHECKING:
    from ascendsched.lower.build_loop_nest import _Version
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
        return out

    def chunk_read(self, stage: str, ld: Load) -> bool:
        """Whether ``ld`` in ``stage``'s body is read chunk by chunk (not over the tile's
        box, which bounds inference then leaves out)."""
        return id(ld) in self.chunk_loads.get(stage, ())

    def _chunked_stage(self, v: _Version, st: Tensor, lay: Layout,
                       layouts: dict[str, Layout], copy: Affine) -> None:
        """``st`` into ``lay``: its reduction over the chunks (module docstring), then the
        rest of its body."""
        from ascendsched.lower.build_loop_nest import _Version
        from ascendsched.lower.select_vector import _ExprGen

        d, red = self.chunks[st.name]
        rv = red.axes[0]
        size = int(rv.extent)
        full, tail = divmod(size, d.factor)
        dom = list(lay.box)
        env = {ax: i for i, ax in enumerate(st.op.axes)}  # type: ignore[union-attr]
        gen = _ExprGen(self, v, st.name, dom, env, layouts)
        dst = Val(lay.buf, lay.copy, lay.dtype, Affine(), lay.strides)
        axes = tuple(sorted({env[x] for x in walk(red.body) if isinstance(x, IndexVar)}))
        body = self.bodies[st.name]
        whole = body is red and red.dtype == lay.dtype and axes == tuple(range(len(dom)))
        acc = dst if whole else gen.temp(axes, red.dtype, f"running {red.op} over '{rv.name}'")
        ident = IDENTITY[red.op]
        gen.vec("vec_dup", acc, (), "dup", (("value", ident),),
                f"{st.name}: the running {red.op} starts at {ident}")
        what = f"chunks of {rv.name} (split by {d.factor}): the running {red.op} of {st.name}"
        if full == 1 and not tail:
            self._chunk(v, st, red, dom, env, layouts, acc, Axis(rv.name, Affine(), d.factor),
                        Affine())
        else:
            var = self.loop_var(f"{st.name}_{d.outer}")
            start = Affine.of(var) * d.factor
            loop: list[Stmt] = []
            for ext, cond in ((d.factor, "<"), (tail, "==")):
                if not ext:
                    continue
                inner = _Version(suffix=v.suffix, note=v.note, temps=v.temps)
                self._chunk(inner, st, red, dom, env, layouts, acc, Axis(rv.name, start, ext),
                            Affine.mod(var, 2))
                v.temps = inner.temps
                loop += [If((Cond(Affine.of(var), cond, full),), tuple(inner.instrs),
                            comment="a whole chunk" if cond == "<" else "the tail chunk")
                         ] if tail else inner.instrs
            v.instrs.append(For(var, full + (tail > 0), tuple(loop), comment=what))
        if acc is not dst:  # the rest of the body, with the finished reduction
            gen.known = (red, acc)
            gen.emit_into(body, dst)

    def _chunk(self, v: _Version, st: Tensor, red: Reduce, dom: list[Axis], env: dict,
               layouts: dict[str, Layout], acc: Val, chunk: Axis, copy: Affine) -> None:
        """One chunk into ``v``: its loads, its reduction, combined into ``acc``."""
        from ascendsched.lower.select_vector import _ExprGen

        rv = red.axes[0]
        where = {**{x: dom[i] for x, i in env.items()}, rv: chunk}
        boxes: dict[str, tuple[Axis, ...]] = {}
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
            lay = self._layout(f"{t.name}_ub_{st.name}{v.suffix}", t, boxes[t.name], copy)
            mine[t.name] = lay
            v.instrs.extend(self._dma(t, lay, to_ub=True))
        gen = _ExprGen(self, v, st.name, dom, env, mine)
        gen.chunk = (rv, chunk)
        part = gen.reduce(red, None)
        fn = COMBINE[red.op]
        gen.vec("vec_binary", acc, (acc, part), fn, (("fn", fn),),
                f"{st.name}: running {red.op} and this chunk's")
