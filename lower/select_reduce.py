"""Row reductions on the vector path: the innermost axis of a stage body -> WholeReduce levels.

A float32 row reduction over rows of whole chunks lying back to back first reduces every
32-byte block with BlockReduce (``_block_level``, 8x per level) while the rows are still whole
chunks; other rows of whole chunks are first halved with elementwise ops on chunk pairs
(``_halve``, three levels at most); WholeReduce does the rest. A row still wider than one
256-byte repeat is reduced to a row of partials (``_partials``, per row or folded chunk by chunk,
whichever issues fewer calls) until one WholeReduce repeat per row finishes it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ascendsched.errors import UnsupportedError
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import Dim, Instr, Region, Stmt
from ascendsched.lower.vector_instrs import Val
from ascendsched.schedule.ub_budget import block_reduces, halving_fits
from ascendsched.target import Pipe

HALVINGS = 3  # pairwise elementwise levels before WholeReduce in a row reduction (_halve)
COMBINE = {"sum": "add", "max": "max", "min": "min"}  # the elementwise op joining two partials
IDENTITY = {"sum": 0, "max": -math.inf, "min": math.inf}  # (reductions are float only)


class _Reductions:
    """Row reductions, a part of ``_ExprGen`` (lower/select_vector.py), whose builder, tile
    version, stage name, domain and instruction emission (``vector_instrs.py``) they use."""

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
        if axes and (out.strides[axes[-1]] != 1 or any(
                out.strides[p_] != out.strides[q_] * self.dom[q_].extent
                for p_, q_ in zip(axes[:-1], axes[1:]))):
            raise UnsupportedError(
                f"stage '{self.stage}': the {op}-reduction result over "
                f"{[self.dom[a].name for a in axes]} is not contiguous; reduce a tile whose "
                f"inner result axes are whole")
        epr = self.t.repeat_bytes // body.dtype.bytes
        src, src_rs = body, rs
        if block_reduces(cols, body.dtype.bytes, self.t) and (rows == 1 or rs == cols):
            while cols > epr and cols % epr == 0:
                src, src_rs, cols = self._block_level(op, src, rows, cols)
        elif cols % epr == 0 and (rows == 1 or rs >= cols):
            src, src_rs, cols = self._halve(op, body, rs, rows, cols // epr, epr)
        while cols > epr:
            src, src_rs, cols = self._partials(op, src, src_rs, rows, cols)
        self.v.instrs.extend(self._reduce_rows(op, out, 1, src, src_rs, cols, rows,
                                               f"{self.stage}: {op} over {self.dom[k].name}"))

    def emit_column_reduce(self, op: str, out: Val, body: Val, k: int) -> None:
        """Reduce ``body`` along domain axis ``k``, not the innermost (a column sum
        ``sum_k x[k, j]``), into ``out`` (over the other axes): rows combined elementwise,
        halving their count per level (``n`` rows -> ``n // 2``: the first half with the
        second, an odd last row into the first), one instruction over all the kept rows per
        level, so log2(n) levels whatever the row width. The first level writes a temporary,
        the next ones halve it in place, the last writes ``out``."""
        from ascendsched.lower.select_vector import _ExprGen

        fn = {"sum": "add", "max": "max", "min": "min"}[op]
        what = f"{self.stage}: {op} over {self.dom[k].name}, rows pairwise"
        n = self.dom[k].extent
        dst = replace(out, strides=out.strides[:k] + (0,) + out.strides[k:])

        def rows(count: int) -> _ExprGen:  # this domain with ``count`` rows along k
            dom = list(self.dom)
            dom[k] = replace(dom[k], extent=count)
            return _ExprGen(self.b, self.v, self.stage, dom, self.env, self.layouts)

        def at(x: Val, row: int) -> Val:
            return replace(x, offset=x.offset + row * x.strides[k])

        src = body
        if n == 1:
            rows(1).move(src, dst)
            return
        while True:  # n >= 2 rows left; the level that leaves one writes ``out`` and returns
            h = n // 2
            gen = rows(h)
            last = n == 2
            if last:
                t = dst
            elif src is body:  # the first level: a temporary, which later levels halve in place
                t = gen.temp(tuple(a for a in range(len(self.dom)) if src.strides[a] or a == k),
                             body.dtype, f"{op} of rows of {self.dom[k].name}")
            else:
                t = src
            gen.vec("vec_binary", t, (src, at(src, h)), fn, (("fn", fn),),
                    f"{what}: {n} -> {h}")
            if n % 2:  # the odd last row into the first
                one = rows(1)
                target = dst if h == 1 else t
                one.vec("vec_binary", target, (t, at(src, n - 1)), fn, (("fn", fn),),
                        f"{what}: row {n - 1} into row 0")
                if h == 1:
                    return
            if last:
                return
            src, n = t, h

    def _block_level(self, op: str, src: Val, rows: int, cols: int) -> tuple[Val, int, int]:
        """One BlockReduce level over rows of whole 256-byte chunks lying back to back: each
        32-byte block -> one partial, so a row of ``cols`` becomes ``cols / B`` partials (B
        elements per block), the partials of all rows again back to back.

        float32 only: a BlockReduce repeat costs 1 cycle for float32 (vcgadd/vcgmax, KPP 910B1
        table and PTO; SOURCES.md 2.5) and reduces 64 lanes to 8, where the pairwise halving
        (``_halve``) needs three dependent levels for the same 8x and a WholeReduce repeat costs
        3 (sum) or 7 (max/min) cycles; for float16 BlockReduce costs 7 per repeat, no gain.
        AscendC's own softmax reduces its folded rows with two BlockReduceMax/Sum levels before
        the broadcast (mirror-cann/asc-devkit @fa9586e2, impl/adv_api/detail/activation/
        softmax/softmax_flash_base_impl/softmax_flash_basic_block_impl.h). Returns the
        partials, their row stride and their columns."""
        t = self.t
        dt = src.dtype
        epr = t.repeat_bytes // dt.bytes
        per_rep = t.repeat_bytes // t.block_bytes  # results of one repeat
        reps = rows * cols // epr
        width = cols // epr * per_rep
        self.v.temps += 1
        name = f"{self.stage}_blk{self.v.temps}{self.v.suffix}"
        self.b._alloc(name, dt, rows * width, 1, (rows, width),
                      f"{op} of each 32 B block of the rows of {self.stage}")
        what = f"{self.stage}: {op} of each 32 B block"
        self.v.instrs.extend(self._span(reps, t.max_repeat, lambda r, n: [Instr(
            "vec_block_reduce", Pipe.V,
            (Region(name, r * per_rep, (Dim(n, per_rep), Dim(per_rep, 1))),),
            (Region(src.buf, src.offset + r * epr, (Dim(n, epr), Dim(epr, 1)), src.copy),),
            (("fn", op),), comment=what)], "p", f"repeats of {what}"))
        return Val(name, Affine(), dt, Affine(), ()), width, width

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
            ident = IDENTITY[op]
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
        fn = COMBINE[op]
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
        fn = COMBINE[op]
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


def _reduce_dst_elems(op: str) -> int:
    """Elements a WholeReduce dst must be aligned to: 1 for sum (sizeof(T), asc-devkit docs
    ReduceRepeat.md:171-172), 2 for max/min (the library checks 2 * sizeof(T) for every order,
    impl/basic_api/kernel_operator_vec_reduce_intf_impl.h:177; the docs' sizeof(T) for
    ORDER_ONLY_VALUE, ReduceRepeat.md:178, is the laxer of the two)."""
    return 1 if op == "sum" else 2
