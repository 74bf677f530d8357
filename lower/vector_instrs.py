"""Elementwise vector ops over tile operands (``Val``) -> V-pipe instructions in 256-byte repeats.

A vector op over a tile of rows x cols is cut into 256-byte repeats. The number of statements
does not depend on the row width: rows of many repeats get one multi-repeat instruction per row
in an IR loop over the rows, many short rows one instruction per column chunk (a repeat per
row) in an IR loop over the chunks, whichever issues fewer calls, and a row's partial last
chunk is one masked instruction. ``e = xf - mx[i]`` over 8 rows of 4096 fp32::

    for e_r3 in 0..8:   # rows of e
      [V] vec_binary fn=sub  e_t2@(4096*e_r3)[64:64, 64:1] <- xf_ub@(4096*e_r3)[64:64, 64:1],
                                                                e_brcb3@(8*e_r3)[64:0, 64:0]

An operand holding one value per row (``mx[i]`` above) is first broadcast by Brcb to one 32-byte
block per row; a select is a Compare into a mask buffer followed by a Select.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ascendsched.dtypes import DType, uint8
from ascendsched.errors import UnsupportedError
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import Dim, For, Instr, Region, Stmt
from ascendsched.target import Pipe


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
    alt: int = 0  # a Brcb'd operand's second copy, this many elements on (see _cover)

    def varying(self) -> tuple[int, ...]:
        return tuple(a for a, s in enumerate(self.strides) if s != 0)


class _VectorInstrs:
    """Instruction emission, a part of ``_ExprGen`` (lower/select_vector.py), whose builder,
    tile version, stage name and domain it uses."""

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

        phased = 2 <= full <= 2 * t.max_repeat and any(x.alt for x, _, _ in opnds) and all(
            x.alt or c == 1 for x, _, c in opnds)

        def phase(row: Affine, ph: int) -> list[Instr]:
            """Chunks ph, ph + 2, ...: a dense operand walks 512 B per repeat, staying in one
            half of the 16 bank groups, and the Brcb'd operand's copy for this phase sits in
            the other half (the planner places it so, lower/bank_groups.py): the repeats
            take one beat where one instruction over every chunk would meet the block in
            half of them (ASC bank-conflict doc, SOURCES.md 2.5)."""
            regs = [Region(x.buf, x.offset + row * r + (ph * x.alt if x.alt else ph * epr * c),
                           (Dim((full + 1 - ph) // 2, 2 * epr * c), Dim(epr, c)), x.copy)
                    for x, r, c in opnds]
            return self._instr(op, regs, attrs, comment)

        def one_row(row: Affine, _n: int) -> list[Stmt]:
            if phased:
                out: list[Stmt] = [*phase(row, 0), *phase(row, 1)]
                if tail and not fits:
                    out += instr(row, 1, Affine(full * epr), tail, False)
                return out
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
        # rows of at least two chunks run as two phases (_cover): a second Brcb copy one
        # Brcb repeat (256 B) on serves the odd chunks from the other half of the bank groups
        cols = self.dom[last].extent
        phases = 2 if n8 == g and rows < cols // (self.t.repeat_bytes // x.dtype.bytes) // 2 \
            else 1
        self.v.temps += 1
        name = f"{self.stage}_brcb{self.v.temps}{self.v.suffix}"
        self.b._alloc(name, x.dtype, phases * n8 * per, 1, (phases * n8, per),
                      f"{x.buf} broadcast to one 32 B block per row (Brcb)"
                      + (", twice: one copy per phase" if phases == 2 else ""))
        srcbuf = self.b.buffers[src.buf]
        need = (src.offset.const if src.offset.is_const else 0) + n8
        if srcbuf.elems < need:
            self.b.buffers[src.buf] = replace(srcbuf, elems=-(-need // per) * per)
        self._check_aligned(Region(src.buf, src.offset, (Dim(1, 1),)))
        src_rs = src.strides[x.varying()[-1]] if x.varying() else 0
        if x.varying() and src_rs != 1:
            raise UnsupportedError(f"stage '{self.stage}': per-row values of {x.buf} not contiguous")
        for ph in range(phases):
            self.v.instrs.extend(self._span(n8 // g, self.t.max_repeat, lambda r, n, ph=ph: [Instr(
                "vec_brcb", Pipe.V,
                (Region(name, r * (g * per) + ph * n8 * per, (Dim(n * g, per), Dim(per, 1))),),
                (Region(src.buf, src.offset + r * g, (Dim(n * g, 1), Dim(1, 1)), src.copy),),
                comment=f"{self.stage}: broadcast {x.buf} per row")], "p",
                f"Brcb of {x.buf}, {g} rows per repeat"))
        strides = [0] * len(self.dom)
        acc = per
        for a in reversed(outer if x.varying() else []):
            strides[a] = acc
            acc *= self.dom[a].extent
        return Val(name, Affine(), x.dtype, Affine(), tuple(strides), block=True,
                   alt=n8 * per if phases == 2 else 0)
