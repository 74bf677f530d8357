"""Default GEMM schedules: candidate tilings ranked by the analytical estimate.

``default_gemm_schedules`` offers every tiling whose buffers fit the target's L1, L0A, L0B and
L0C with the buffering it gets, best first by ``schedule/gemm_cost.py``'s estimate of the
busiest core's time. Estimates within 1% of the best one left (``CLOSE``) count as a tie,
broken by the longer L0 K step, then the estimate, larger tiles and longer L1 K tiles: the
estimate takes the slowest pipe per tile and misses what a near-critical Mmad pipe pays per
call (its head) and the scalar unit per step, so it ranked K steps of 16 or 32 a few hundred
cycles ahead of 64 or 128 by their smaller pipeline fill (modelled, identity sweep: GEMM
8192^3 4055.6 -> 3685.9 us, int8 4096^3 325.3 -> 308.3, GEMM + softmax 4096 x 32 000 x 4096
5875.0 -> 5604.1; 30 of 566 kernels faster, 9 slower by at most 0.34%; over 325 random
shapes of plain, batched and int8 GEMMs and GEMMs with Fixpipe, Vector and softmax
epilogues, the defaults that changed 1.9-3.4% faster per kind and seed (geometric mean),
the worst 3.8% slower). The candidates:

* output tiles ``m x n`` of 256, 128, 64, 32 or 16 (multiples of the fractal, clamped to the
  padded problem), L0 K steps ``k0`` of 128, 64, 32 or 16, L1 K tiles of 1, 2, 4 or 8 L0 steps;
* L1 and L0A/L0B double buffered when their loop has more than one step (L1 also across tiles)
  and two copies fit, L0C double buffered when a core runs more than one tile and two copies
  fit (the next tile's Mmads then run while this tile's Fixpipe drains L0C);
* every Cube core the tiles can use, tiles in strips of 4 M-tiles (``swizzle(4, "m")``) so
  cores running at the same time share A and B in L2;
* a Vector epilogue that reduces along rows (softmax) gets tiles of whole rows and row blocks
  (tiles of any width, each core taking whole blocks of rows, ``CubePlan.row_blocks``; also
  block heights that spread the rows evenly over the cores), ranked together by
  ``estimate_row_blocks``, which prices the Vector side too.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import replace

from ascendsched.algo.algorithm import Algorithm
from ascendsched.errors import UnsupportedError
from ascendsched.schedule.cube_plan import CubePlan
from ascendsched.schedule.gemm import GemmSchedule, L1Tile, Swizzle
from ascendsched.schedule.gemm_cost import estimate_gemm, estimate_row_blocks
from ascendsched.target import DEFAULT_TARGET, Target
from ascendsched.target.model import Scope

TILE_MN = (256, 128, 64, 32, 16)
STEP_K = (128, 64, 32, 16)
L1_STEPS = (8, 4, 2, 1)  # L0 steps per L1 K tile
SWIZZLE = 4
CLOSE = 1.01


def default_gemm_schedules(algo: Algorithm, target: Target = DEFAULT_TARGET, *,
                           close: float = CLOSE) -> Iterator[GemmSchedule]:
    """Candidate default schedules, best first (``schedule_for`` takes the first that fits;
    see the module docstring; ``close``: estimates within this factor of the best one left
    tie, 1.0 ranks by the estimate alone). The candidates are ranked on their resolved plans;
    each ``GemmSchedule`` is written only when the caller gets that far (most take the
    first)."""
    base = GemmSchedule(algo, target=target)
    sp = base.spec
    ng = base._n_granule()
    np_ = _round_up(sp.n, ng)
    cands: list[tuple[tuple, tuple]] = []
    seen: set[tuple] = set()
    # a Vector epilogue that reduces along rows (softmax): tiles of whole rows, which L0C
    # holds up to 2048 float32 columns, and row blocks of narrower tiles, whose epilogue reads
    # each row block back from the workspace (CubePlan.row_blocks), ranked together
    rowwise = base.vector_epilogue is not None and bool(base.vector_epilogue.rowwise)
    tns = {min(_round_up(x, ng), np_) for x in TILE_MN}
    _tilings(base, {np_} if rowwise else tns, cands, seen, blocks=False, rowwise=rowwise)
    if rowwise:
        _tilings(base, tns - {np_}, cands, seen, blocks=True, rowwise=True)
    if not cands:
        raise UnsupportedError(f"no default GEMM tiling of {sp} fits {target.name}'s L0/L1")
    return (_schedule(base, *key) for _, key in _ranked(cands, close))


def _ranked(cands: list[tuple[tuple, tuple]], close: float) -> list[tuple[tuple, tuple]]:
    """``cands`` by estimate, those within a factor ``close`` of the best one left taken
    together: the longer L0 K step first, then the estimate, the larger tile, the longer L1
    K tile (the module docstring says why)."""
    cands = sorted(cands, key=lambda c: c[0])
    ests = [c[0][0] for c in cands]
    out: list[tuple[tuple, tuple]] = []
    i = 0
    while i < len(cands):
        j = bisect.bisect_right(ests, ests[i] * close, lo=i + 1)
        out += sorted(cands[i:j], key=lambda c: (c[0][3], *c[0][:3]))
        i = j
    return out


def _tilings(base: GemmSchedule, tns: set[int], cands: list[tuple[tuple, tuple]],
             seen: set[tuple], *, blocks: bool, rowwise: bool) -> None:
    """Add to ``cands`` every tiling of tile widths ``tns`` whose buffers fit, with its
    estimate (module docstring). ``blocks``: the tiles are narrower than the rows a Vector
    epilogue reduces, so each core takes row blocks (no swizzle: a block's tiles are one
    after the other on its core). ``rowwise``: such an epilogue; its tilings, of whole rows
    or row blocks, are ranked by ``estimate_row_blocks`` (a tile of whole rows is a block of
    one tile), which prices the Vector side too."""
    sp, g, target = base.spec, base.geometry, base.target
    eb, ab = sp.in_dtype.bytes, sp.acc_dtype.bytes
    c0, mg = g.c0(eb), base._m_granule()
    cap = {s: target.scope(s).usable for s in (Scope.L1, Scope.L0A, Scope.L0B, Scope.L0C)}
    mp, kp = _round_up(sp.m, mg), _round_up(sp.k, c0)
    head = base.plan
    tms = {min(_round_up(x, mg), mp) for x in TILE_MN}
    if blocks:
        tms |= even_block_rows(base)
    for tm in sorted(tms, reverse=True):
        for tn in sorted(tns, reverse=True):
            blocks_m = sp.batch * -(-sp.m // tm)
            tiles = blocks_m * -(-sp.n // tn)
            cores = min(blocks_m if blocks else tiles, target.num_aic)
            multi_tile = tiles > cores
            l0c = 2 if multi_tile and 2 * tm * tn * ab <= cap[Scope.L0C] else 1
            if tm * tn * ab * l0c > cap[Scope.L0C]:
                continue
            for k0 in sorted({min(_round_up(x, c0), kp) for x in STEP_K}, reverse=True):
                l0 = 2 if -(-sp.k // k0) > 1 else 1
                if tm * k0 * eb * l0 > cap[Scope.L0A] or k0 * tn * eb * l0 > cap[Scope.L0B]:
                    if l0 == 1:
                        continue
                    l0 = 1
                    if tm * k0 * eb > cap[Scope.L0A] or k0 * tn * eb > cap[Scope.L0B]:
                        continue
                for mult in L1_STEPS:
                    tk = min(k0 * mult, _round_up(kp, k0))
                    l1 = 2 if -(-sp.k // tk) > 1 or multi_tile else 1
                    if (tm + tn) * tk * eb * l1 > cap[Scope.L1]:
                        continue
                    # the tile clamped to the problem: the plan's own tiling of these numbers
                    ctm, ctn, ctk, ck0 = head.clamped(L1Tile(tm, tn, tk), k0)
                    key = (ctm, ctn, ctk, ck0, l1, l0, l0c, cores,
                           1 if blocks else -(-sp.m // ctm))
                    if key in seen:
                        continue
                    seen.add(key)
                    plan = _plan(head, *key)
                    t = plan.tiling
                    est = estimate_row_blocks(plan) if rowwise else estimate_gemm(plan).cycles
                    cands.append(((round(est), -(t.tm * t.tn), -t.tk, -t.k0), key))


def even_block_rows(base: GemmSchedule) -> set[int]:
    """Row-block heights that spread the rows evenly over the Cube cores, one to four blocks
    per core: a core's blocks are its Cube work (GEMM + softmax 4096 x 32 000 x 4096: 128-row
    blocks leave 8 cores two of them, 7048 us modelled; 176-row blocks, one per core, 6054 us)."""
    sp, mg = base.spec, base._m_granule()
    rows, mp = sp.batch * sp.m, _round_up(sp.m, mg)
    return {min(_round_up(-(-rows // (base.target.num_aic * j)), mg), mp) for j in (1, 2, 3, 4)}


def _plan(head: CubePlan, tm: int, tn: int, tk: int, k0: int, l1: int, l0: int, l0c: int,
          cores: int, mtiles: int) -> CubePlan:
    """The plan ``_schedule`` of these numbers resolves to (what the estimate reads)."""
    copies = tuple((lv, n) for lv, n in (("l1", l1), ("l0", l0), ("l0c", l0c)) if n > 1)
    swizzle = Swizzle(min(SWIZZLE, mtiles), "m") if cores > 1 and mtiles > 1 else head.swizzle
    return replace(head, tile=L1Tile(tm, tn, tk), k0=k0, copies_given=copies,
                   cores=cores if cores > 1 else head.cores, swizzle=swizzle)


def _schedule(base: GemmSchedule, tm: int, tn: int, tk: int, k0: int, l1: int, l0: int,
              l0c: int, cores: int, mtiles: int) -> GemmSchedule:
    s = base.tile(tm, tn, tk).split_k(k0)
    for level, n in zip(("l1", "l0", "l0c"), (l1, l0, l0c)):
        if n > 1:
            s = s.buffer(level, n)
    if cores > 1:
        s = s.bind(cores)
    if cores > 1 and mtiles > 1:
        s = s.swizzle(min(SWIZZLE, mtiles), "m")
    return s


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a
