"""Copy a template's syncs into the kernel it stands for (``sync_template.py``): the matcher.

``transplanted(kernel, template, runs)`` walks the kernel's tile-class loops (``runs``, from
``build_gemm.class_runs``) against the template's one class of whole tiles and matches every
kernel statement to its image: the template instruction at the same place of the same trip
(same op and pipe, the same buffer copies on every core and trip that runs the class, on-chip
bytes among the image's, checked on ``cube_ops.cube_footprints``), a peeled trip to its
loop's trip, a loop of one instruction and no sync to the template loop as a whole. The
template's syncs go in at the images' places with their ids at the place's values; an Mmad
too small for the hardware to order gets a ``PipeBarrier<PIPE_M>`` (``_barriered``). None
where a statement has no image or a sync no place (the kernel is then synchronised by
itself). Why a match makes the copied syncs exact: ``sync_template.py``'s docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cache

import islpy as isl
import numpy as np

from ascendsched.errors import NotAffineError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.cube_ops import (
    CUBE_OPS,
    MMAD_OPS,
    cube_footprints,
    cube_params,
    mmad_fractals,
)
from ascendsched.lower.instances import affine_text
from ascendsched.lower.ir import (
    BLOCK_IDX,
    UNNUMBERED,
    Dim,
    For,
    If,
    Instr,
    Kernel,
    Stmt,
    StmtMutator,
)
from ascendsched.lower.substitute import map_affines, mapped_cond, substituted
from ascendsched.lower.sync_ir import Barrier, Sync
from ascendsched.lower.tile_loops import ClassRun
from ascendsched.target import CoreType, Pipe


def transplanted(kernel: Kernel, template: Kernel, runs: tuple[ClassRun, ...]
                  ) -> Kernel | None:
    """``kernel`` with ``template``'s syncs copied to the images' places, or None when a
    statement has no image (module docstring)."""
    top = template.program(CoreType.AIC).body  # type: ignore[union-attr]
    loops = [i for i, s in enumerate(top) if not isinstance(s, Sync)]
    match = _Match(kernel, template)
    if len(loops) == 1 and isinstance(top[loops[0]], For | If):
        x = top[loops[0]]
        pre, post = top[:loops[0]], top[loops[0] + 1:]
        var = x.var if isinstance(x, For) else None
        inner = x.body if isinstance(x, For) else (x,)
        guards = [s for s in inner if isinstance(s, If)]
        if len(guards) == 1 and any(isinstance(s, Sync) for s in inner):
            return None  # syncs beside the guard run on the template's empty trips only
        tile = guards[0].body if guards else inner
    else:  # one tile per core, no guard: the whole program is the tile
        var, pre, post, tile = None, (), (), top
    body = kernel.program(CoreType.AIC).body  # type: ignore[union-attr]
    got = match.pieces(tile, var, runs, body, 0)
    if got is None:
        return None
    moved = tuple(match.moved(s, {}) for s in pre) + _barriered(got, match.small) + tuple(
        match.moved(s, {}) for s in post)
    return kernel.replace_body(CoreType.AIC, moved)


def _barriered(body: tuple[Stmt, ...], small: set[int]) -> tuple[Stmt, ...]:
    """``body`` with a ``PipeBarrier<PIPE_M>`` before each Mmad of ``small``: the K steps of
    a tile accumulate into its C tile, and the hardware orders consecutive Mmads only when
    they are big (``cube_ops.same_pipe_ordered``), as the template's are. Mmads of different
    tiles need none: the Fixpipe's flags (M -> FIX, FIX -> M) order them, as in the
    template."""
    if not small:
        return body

    class _Barrier(StmtMutator):
        def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
            if s.id not in small:
                return (s,)
            c = s.writes[0]
            name = c.tensor + ("" if c.copy == Affine() else f"[copy {c.copy}]")
            return (Barrier(Pipe.M, comment=f"{name}: M write -> M read (RAW); {name}: M read "
                            f"-> M write (WAR); {name}: M write -> M write (WAW)"), s)

    return _Barrier().visit_body(body)


Ends = dict[int, tuple[Stmt, ...]]  # where a matched stretch of the kernel ends -> its statements


class _Match:
    """Matches template statements (with their syncs) to the kernel's, by place. Each
    stretch of template statements, kernel position and variable values is matched once,
    keeping one match per end position (the rest of the match depends on nothing else)."""

    def __init__(self, kernel: Kernel, template: Kernel) -> None:
        self.kernel, self.template = kernel, template
        self._seen: dict[tuple, Ends] = {}
        self.small: set[int] = set()  # kernel Mmads too small for the hardware to order
        # the class being matched: its loop (variable, trips) and guard, where its copies
        # must agree with the template's (``same_copy``)
        self.where: tuple[tuple[str, int] | None, tuple[Cond, ...]] = (None, ())

    # ----------------------------------------------------------------- the class loops
    def pieces(self, tile: tuple[Stmt, ...], var: str | None, runs: tuple[ClassRun, ...],
               body: tuple[Stmt, ...], j: int) -> tuple[Stmt, ...] | None:
        """The kernel's class loops from ``body[j]`` on, each tile matched to ``tile`` (the
        template's tile body) with ``var`` (the template's loop) at the class's running tile
        number; None: no match."""
        if not runs:
            return () if j == len(body) else None
        run, rest = runs[0], runs[1:]
        sigma = {var: run.run} if var is not None else {}
        if run.var is None and not run.guarded:  # one trip, no guard: the tile is spliced in
            for k, out in self.seq(tile, 0, body, j, sigma).items():
                more = self.pieces(tile, var, rest, body, k)
                if more is not None:
                    return out + more
            return None
        if j >= len(body):
            return None
        node = body[j]
        loop = node if run.var is not None else None
        if loop is not None and not (isinstance(loop, For) and loop.var == run.var):
            return None
        inner = loop.body if loop is not None else (node,)
        guard = None
        if run.guarded:
            if len(inner) != 1 or not isinstance(inner[0], If):
                return None
            guard = inner[0]
            inner = guard.body
        self.where = ((run.var, run.iters) if run.var is not None else None,
                      guard.conds if guard is not None else ())
        out = self.whole(tile, inner, sigma)
        more = self.pieces(tile, var, rest, body, j + 1) if out is not None else None
        if more is None:
            return None
        if guard is not None:
            out = (If(guard.conds, out, guard.comment),)
        if loop is not None:
            out = (For(loop.var, loop.extent, out, loop.comment),)
        return out + more

    # ----------------------------------------------------------------- statement lists
    def whole(self, rs: tuple[Stmt, ...], es: tuple[Stmt, ...], sigma: Mapping[str, Affine]
              ) -> tuple[Stmt, ...] | None:
        """A match of template list ``rs`` to all of ``es`` (None: none)."""
        return self.seq(rs, 0, es, 0, sigma).get(len(es))

    def seq(self, rs: tuple[Stmt, ...], i: int, es: tuple[Stmt, ...], j: int,
            sigma: Mapping[str, Affine]) -> Ends:
        """Matches of ``rs[i:]`` to stretches of ``es`` from ``j``."""
        key = (id(rs), i, id(es), j, tuple(sorted(sigma.items(), key=lambda x: x[0])),
               self.where)
        got = self._seen.get(key)
        if got is None:
            got = {}
            if i == len(rs):
                got[j] = ()
            else:
                for k, out in self.one(rs[i], es, j, sigma).items():
                    for m, rest in self.seq(rs, i + 1, es, k, sigma).items():
                        got.setdefault(m, out + rest)
            self._seen[key] = got
        return got

    def one(self, r: Stmt, es: tuple[Stmt, ...], j: int, sigma: Mapping[str, Affine]
            ) -> Ends:
        e = es[j] if j < len(es) else None
        got: Ends = {}
        if isinstance(r, Sync):
            got[j] = (self.moved(r, sigma),)
        elif isinstance(r, Instr):
            if isinstance(e, Instr | For) and self.fits(r, e, sigma):
                got[j + 1] = (e,)
        elif isinstance(r, If):
            fn = substituted(sigma)
            if isinstance(e, If) and e.conds == tuple(mapped_cond(c, fn) for c in r.conds):
                out = self.whole(r.body, e.body, sigma)
                if out is not None:
                    got[j + 1] = (If(e.conds, out, e.comment),)
            known = _known(r.conds, sigma)
            if known is True:  # the kernel's copy dropped the guard of a trip that has it
                for k, out in self.seq(r.body, 0, es, j, sigma).items():
                    got.setdefault(k, out)
            elif known is False:
                got.setdefault(j, ())
        else:
            got = self.loop(r, es, j, sigma)
        return got

    def loop(self, r: For, es: tuple[Stmt, ...], j: int, sigma: Mapping[str, Affine]) -> Ends:
        """A template loop: the kernel's loop over its first trips with the rest peeled, all
        trips peeled, or, for a loop of one instruction and no sync, a loop or instruction
        whose trips together touch bytes among its trips'."""
        e = es[j] if j < len(es) else None
        got: Ends = {}
        if isinstance(e, For) and e.var == r.var and e.extent <= r.extent:
            body = self.whole(r.body, e.body, sigma)
            if body is not None:
                head = (For(e.var, e.extent, body, e.comment),)
                for k, rest in self.peeled(r, e.extent, es, j + 1, sigma).items():
                    got.setdefault(k, head + rest)
        for k, out in self.peeled(r, 0, es, j, sigma).items():
            got.setdefault(k, out)
        inner = _one_instr(r)
        if inner is not None and isinstance(e, Instr | For) and self.fits(
                inner, e, sigma, (r.var, r.extent)):
            got.setdefault(j + 1, (e,))
        return got

    def peeled(self, r: For, start: int, es: tuple[Stmt, ...], j: int,
               sigma: Mapping[str, Affine]) -> Ends:
        """Trips ``start..`` of loop ``r`` as straight copies of its body in ``es``."""
        if start == r.extent:
            return {j: ()}
        got: Ends = {}
        for k, out in self.seq(r.body, 0, es, j, {**sigma, r.var: Affine(start)}).items():
            for m, rest in self.peeled(r, start + 1, es, k, sigma).items():
                got.setdefault(m, out + rest)
        return got

    # ----------------------------------------------------------------- one statement
    def moved(self, s: Sync, sigma: Mapping[str, Affine]) -> Sync:
        """Template sync ``s`` at a kernel place: its ids at the place's values, a fresh id."""
        return replace(map_affines(s, substituted(sigma)), id=UNNUMBERED)

    def fits(self, r: Instr, e: Stmt, sigma: Mapping[str, Affine],
             over: tuple[str, int] | None = None) -> bool:
        """Whether kernel statement ``e`` maps to template instruction ``r`` at ``sigma``:
        same op and pipe, and on-chip bytes among ``r``'s in the same buffer copies (module
        docstring). ``over`` (variable, trips): ``r`` stands for all trips of its loop; ``e``
        may be a loop of one instruction and no sync, its trips compared together."""
        mine: tuple[str, int] | None = None
        if isinstance(e, For):
            if _one_instr(e) is None:
                return False
            mine, e = (e.var, e.extent), e.body[0]
        if (r.op != e.op or r.pipe != e.pipe or r.op not in CUBE_OPS or isinstance(e, Sync)
                or len(r.writes) != len(e.writes) or len(r.reads) != len(e.reads)):
            return False
        fn = substituted(sigma)
        kt, tt = self.kernel, self.template
        rregs, eregs = r.writes + r.reads, e.writes + e.reads
        rboxes = cube_footprints(r.op, cube_params(r), tuple(tt.dtype_of(x.tensor)
                                                               for x in rregs), tt.target)
        eboxes = cube_footprints(e.op, cube_params(e), tuple(kt.dtype_of(x.tensor)
                                                               for x in eregs), kt.target)
        for rr, er, rb, eb in zip(rregs, eregs, rboxes, eboxes, strict=True):
            if rr.tensor != er.tensor:
                return False
            if rr.tensor not in kt.buffer_map:
                continue  # GM: the AIC writes no tensor it reads (_gm_free), tiles are disjoint
            copy, off = fn(rr.copy), fn(rr.offset)
            if not self.same_copy(copy, er.copy) or any(
                    v[0] in copy.vars() for v in (over, mine) if v):
                return False
            if over is None and mine is None and off == er.offset:
                at, among = (0,), (0,)  # the same place (most pairs)
            else:
                theirs, ours = _trips(off, over), _trips(er.offset, mine)
                shifts = [x - ours[0] for x in theirs + ours]
                if any(not x.is_const for x in shifts):
                    return False
                at = tuple(x.const for x in shifts[len(theirs):])
                among = tuple(x.const for x in shifts[:len(theirs)])
            if not _inside(tuple(eb), tuple(rb), at, among):
                return False
        if r.op == "mmad" and not _reads_c_alike(r, e, fn):
            return False
        if r.op in MMAD_OPS:
            least = kt.target.mmad_ordered_fractals
            if least > 0 and mmad_fractals(r, tt.target) >= least > mmad_fractals(e, kt.target):
                self.small.add(e.id)  # the hardware orders the template's Mmads, not this one
        return True

    def same_copy(self, mine: Affine, theirs: Affine) -> bool:
        """Whether buffer copy expressions ``mine`` (the template's at the place) and
        ``theirs`` (the kernel's) agree wherever the class runs: equal once ``x mod m`` is
        canonical, or else equal on every core and trip of the class loop its guard admits
        (isl). A class that only some cores run numbers its copies from the core's running
        tile count, an expression in ``block_idx`` that is constant on those cores: the M
        edge row block of GEMM + softmax 252 x 3313 x 195, on core 15 alone, has
        ``(kt + nj + 1 - floor((block_idx + 1) / 16)) mod 2`` where the template has
        ``(kt + nj) mod 2``."""
        a, b = _canonical(mine), _canonical(theirs)
        return a == b or _equal_where(a, b, *self.where, self.kernel.block_dim)


def _equal_where(a: Affine, b: Affine, loop: tuple[str, int] | None, guard: tuple[Cond, ...],
                 cores: int) -> bool:
    """Whether ``a == b`` for every ``block_idx < cores`` and class loop trip (``loop``:
    variable, trips) where ``guard`` holds, any other variable a non-negative integer."""
    names = sorted(a.vars() | b.vars() | {v for c in guard for v in c.lhs.vars()}
                   | {BLOCK_IDX} | ({loop[0]} if loop else set()))
    bound = frozenset(names)
    try:
        parts = [f"0 <= {BLOCK_IDX} < {cores}"] + [f"{v} >= 0" for v in names]
        if loop is not None:
            parts.append(f"{loop[0]} < {loop[1]}")
        for c in guard:
            parts.append(f"{affine_text(c.lhs, bound, 'a class guard')} "
                         f"{'=' if c.op == '==' else c.op} {c.rhs}")
        diff = f"{affine_text(a, bound, 'a copy')} - {affine_text(b, bound, 'a copy')}"
        text = f"{{ [{', '.join(names)}] : {' and '.join(parts)} and ({diff} >= 1 or " \
               f"{diff} <= -1) }}"
        return isl.Set(text).is_empty()
    except (NotAffineError, isl.Error):
        return False


def _canonical(e: Affine) -> Affine:
    """``e``, and ``x mod m`` (``x - m*floor(x/m)``) with the coefficients of ``x`` reduced mod
    ``m`` (every term is an integer): ``(10 + t0) mod 2`` and ``t0 mod 2`` compare equal."""
    for n, (x, m, c) in enumerate(e.divs):
        if c == -m and Affine(e.const, e.terms, e.mods, e.divs[:n] + e.divs[n + 1:]) == x:
            break
    else:
        return e
    r = Affine(x.const % m, tuple((v, k % m) for v, k in x.terms if k % m),
               tuple((v, n, k % m) for v, n, k in x.mods if k % m),
               tuple((a, d, k % m) for a, d, k in x.divs if k % m))
    if r.is_const:
        return Affine(r.const % m)
    if r.const == 0 and not r.mods and not r.divs and r.terms == ((r.terms[0][0], 1),):
        return Affine.mod(r.terms[0][0], m)
    return r.modulo(m)


def _trips(off: Affine, loop: tuple[str, int] | None) -> list[Affine]:
    """``off`` at each trip of ``loop`` (variable, trips); None: ``off`` alone."""
    if loop is None:
        return [off]
    return [off.substitute(loop[0], Affine(k)) for k in range(loop[1])]


def _one_instr(loop: For) -> Instr | None:
    """The instruction of a loop whose body is one instruction (not a sync), else None."""
    body = loop.body
    if len(body) == 1 and isinstance(body[0], Instr) and not isinstance(body[0], Sync):
        return body[0]
    return None


def _reads_c_alike(r: Instr, e: Instr, fn) -> bool:  # noqa: ANN001 -- Affine -> Affine
    """An Mmad of the kernel that reads its C tile (``cmatrixInitVal`` not true) maps to one
    that reads it on the same instances."""
    ei, ri = e.attr("cmatrixInitVal"), r.attr("cmatrixInitVal")
    if isinstance(ri, Cond):
        ri = mapped_cond(ri, fn)
        known = ri.decided()
        ri = ri if known is None else known
    return ei is True or ri is False or ei == ri


def _known(conds: tuple[Cond, ...], sigma: Mapping[str, Affine]) -> bool | None:
    """The value of a guard at ``sigma`` when that settles it (``Cond.decided``: the
    builder drops a guard that is constant over its loops, the K tail step's first-step test),
    else None."""
    fn = substituted(sigma)
    vals = [mapped_cond(c, fn).decided() for c in conds]
    if False in vals:
        return False
    return True if all(vals) else None


def _has_sync(body: tuple[Stmt, ...]) -> bool:
    return any(isinstance(s, Sync) or (not isinstance(s, Instr) and _has_sync(s.body))
               for s in body)


@cache
def _inside(small: tuple[Dim, ...], big: tuple[Dim, ...], at: tuple[int, ...],
            among: tuple[int, ...]) -> bool:
    """Whether box ``small`` placed at each of ``at`` lies among box ``big`` placed at each of
    ``among`` (element offsets)."""
    if at == (0,) and among == (0,) and len(small) == len(big) and all(
            a.stride == b.stride and a.extent <= b.extent for a, b in zip(small, big)):
        return True
    have = _unique(np.concatenate([_elements(big) + s for s in among]))
    want = np.concatenate([_elements(small) + s for s in at])
    where = np.minimum(np.searchsorted(have, want), have.size - 1)
    return bool((have[where] == want).all())


@cache
def _elements(box: tuple[Dim, ...]) -> np.ndarray:
    """The element offsets of a box, sorted and unique."""
    out = np.zeros(1, dtype=np.int64)
    for d in box:
        out = (out[:, None] + np.arange(d.extent, dtype=np.int64)[None, :] * d.stride).ravel()
    return _unique(out)


def _unique(a: np.ndarray) -> np.ndarray:
    """``a`` sorted, without repeats (``np.unique``, which imports ``numpy.ma`` on its first
    call: 14 ms of a compile in a fresh process)."""
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))]
