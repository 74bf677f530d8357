"""GM traffic of a kernel through the shared L2: which reads hit, what reaches HBM.

Every GM-side DMA instance of every block (reads: ``copy_gm_ub``, ``copy_gm_l1``; writes:
``copy_ub_gm``, ``fixpipe``) is replayed through an LRU cache of the L2's capacity, with the
blocks interleaved in lockstep (instance ``i`` of a block with ``n`` instances at progress
``i / n``), as the cores run concurrently. A read whose region (tensor, first byte, bytes) is
resident hits; writes allocate dirty lines (write-back cache) and an evicted dirty region is a
write-back to HBM. So operands that fit in L2 come from HBM once, re-reads by other cores or
later K steps hit while their reuse distance stays under the capacity, and streamed outputs
larger than L2 are written back during the kernel.

The result gives each tensor's read hit fraction (it sets the DMA rates, ``sim/costs.py``) and
the bytes that pass HBM and L2 (the chip-wide caps of ``sim/timing.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ascendsched.lower.ir import BLOCK_IDX, SUB_BLOCK_IDX, For, If, Instr, Kernel, Region, Stmt

_READS = {"copy_gm_ub": 0, "copy_gm_l1": 0, "copy_gm_l1_cont": 0}
_WRITES = {"copy_ub_gm": 0, "fixpipe": 0, "fixpipe_quant": 0}


@dataclass(frozen=True)
class GmTraffic:
    """Bytes by tensor and by level. ``hbm_bytes`` = missed reads + write-backs."""

    read_bytes: dict[str, int]
    write_bytes: dict[str, int]
    hit: dict[str, float]
    hbm_read: int
    writeback: int
    instances: int

    @property
    def total_read(self) -> int:
        return sum(self.read_bytes.values())

    @property
    def total_write(self) -> int:
        return sum(self.write_bytes.values())


def gm_traffic(kernel: Kernel, l2_bytes: int, *, bypass: frozenset[str] = frozenset(),
               max_instances: int = 1_500_000) -> GmTraffic:
    """Replay the kernel's GM DMA instances through an L2 of ``l2_bytes``.

    ``bypass``: input tensors read with the L2 disabled (``SetL2CacheHint(CACHE_MODE_DISABLE)``:
    every read comes from HBM and allocates nothing). Two shortcuts keep large kernels cheap:
    when every GM tensor fits in L2 together (and nothing bypasses it), each input is read from
    HBM once and nothing is written back; beyond ``max_instances`` DMA instances the replay is
    replaced by an estimate (re-reads hit with probability L2 / footprint, the same share of the
    writes stays in L2).
    """
    read, written, n = _count(kernel)
    sizes = {p.name: p.nbytes for p in kernel.params}
    footprint = sum(sizes[t] for t in set(read) | set(written))
    if footprint <= l2_bytes and not bypass:
        first = {t: min(b, sizes[t]) for t, b in read.items()}
        hit = {t: 1.0 - first[t] / b for t, b in read.items() if b}
        return GmTraffic(read, written, hit, sum(first.values()), 0, n)
    if n > max_instances:
        h = min(1.0, l2_bytes / footprint)
        first = {t: min(b, sizes[t]) for t, b in read.items()}
        miss = {t: first[t] + (b - first[t]) * (1 - h) if t not in bypass else b
                for t, b in read.items()}
        hit = {t: 1.0 - miss[t] / b for t, b in read.items() if b}
        wb = int(sum(written.values()) * (1 - h))
        return GmTraffic(read, written, hit, int(sum(miss.values())), wb, n)
    return _replay(kernel, l2_bytes, bypass)


def _replay(kernel: Kernel, l2_bytes: int, bypass: frozenset[str]) -> GmTraffic:
    streams = _Streams(kernel)
    writes, tensors, starts, nbytes, count = streams.interleaved()
    names = streams.tensors
    # bytes read and written per tensor need no replay
    w, t, nb = (np.asarray(x, dtype=np.int64) for x in (writes, tensors, nbytes))
    read_by = np.bincount(t, weights=nb * (1 - w), minlength=len(names))
    written_by = np.bincount(t, weights=nb * w, minlength=len(names))
    cache: OrderedDict[tuple, bool] = OrderedDict()  # (tensor id, start, bytes) -> dirty
    size = writeback = 0
    hits = [0] * len(names)
    skip = {n for n, name in enumerate(names) if name in bypass}
    for is_write, tid, key in zip(writes, tensors, zip(tensors, starts, nbytes)):
        if is_write:
            if key in cache:
                cache.move_to_end(key)
            else:
                size += key[2]
            cache[key] = True
        elif tid in skip:
            continue  # read from HBM, allocates nothing
        elif key in cache:
            hits[tid] += key[2]
            cache.move_to_end(key)
        else:
            size += key[2]
            cache[key] = False
        while size > l2_bytes and cache:
            (_, _, old), dirty = cache.popitem(last=False)
            size -= old
            if dirty:
                writeback += old
    read = {names[n]: int(b) for n, b in enumerate(read_by) if b}
    written = {names[n]: int(b) for n, b in enumerate(written_by) if b}
    hit = {names[n]: hits[n] / int(b) for n, b in enumerate(read_by) if b}
    hbm_read = int(read_by.sum()) - sum(hits)
    return GmTraffic(read, written, hit, hbm_read, writeback, count)


def dma_streams(kernel: Kernel) -> list[list[tuple[bool, str, int, int]]]:
    """Per block, its GM DMA instances in program order (the AIC program's, then each AIV's):
    (is a write, tensor, first byte, bytes), as the replay sees them."""
    streams = _Streams(kernel)
    return [[(bool(w), streams.tensors[t], int(s), int(n)) for w, t, s, n in zip(*p, strict=True)]
            for p in streams.per_block()]


def _count(kernel: Kernel) -> tuple[dict[str, int], dict[str, int], int]:
    """Bytes read and written per GM tensor and the number of DMA instances, all blocks (every
    block at once: ``block_idx`` is an array over the blocks, a guard a mask of them). A loop
    whose trips a guard below tests is an array axis too (its variable an ``arange`` along a
    new axis, the mask broadcast over it) while the mask stays under ``_AXIS_CELLS`` cells,
    else its trips are walked one by one: the count costs what the loop nest's text does, not
    its trip counts (a persistent loop of 4032 tiles around 63-trip chunk loops with a tail
    guard walked 760 000 bodies)."""
    read: dict[str, int] = {}
    written: dict[str, int] = {}
    n = 0

    def walk(body: tuple[Stmt, ...], env: dict, mult: int, mask: np.ndarray, has: dict
             ) -> None:
        nonlocal n
        for s in body:
            if isinstance(s, Instr):
                dma = _dma(s)
                if dma is not None:
                    is_write, reg = dma
                    d = written if is_write else read
                    times = mult * int(mask.sum())
                    d[reg.tensor] = d.get(reg.tensor, 0) + times * reg.count * kernel.dtype_of(
                        reg.tensor).bytes
                    n += times
            elif not has.get(id(s), False):
                continue
            elif isinstance(s, For):
                if not _uses(s.body, s.var):
                    walk(s.body, env, mult * s.extent, mask, has)
                elif mask.size * s.extent <= _AXIS_CELLS:  # the trips as a new last axis
                    inner = {v: x[..., None] if isinstance(x, np.ndarray) else x
                             for v, x in env.items()}
                    inner[s.var] = np.arange(s.extent).reshape((1,) * mask.ndim + (-1,))
                    walk(s.body, inner, mult, np.broadcast_to(
                        mask[..., None], mask.shape + (s.extent,)), has)
                else:
                    for j in range(s.extent):
                        env[s.var] = j
                        walk(s.body, env, mult, mask, has)
                    env.pop(s.var, None)
            else:
                inner = _masked(mask, s, env)
                if inner.any():
                    walk(s.body, env, mult, inner, has)

    blocks = np.arange(kernel.block_dim)
    for prog in kernel.programs:
        has = _has_gm(prog.body, {})
        for sub, _ in kernel.streams(prog.core):
            walk(prog.body, {BLOCK_IDX: blocks, SUB_BLOCK_IDX: sub}, 1,
                 np.ones(kernel.block_dim, bool), has)
    return read, written, n


_AXIS_CELLS = 1 << 22  # mask cells (blocks x guarded trips) counted at once, about 4 MB


def _masked(mask: np.ndarray, s: If, env: dict) -> np.ndarray:
    """``mask`` and the blocks where every condition of ``s`` holds."""
    out = mask
    for c in s.conds:
        out = out & np.broadcast_to(c.evaluate(env), mask.shape)
    return out


def _uses(body: tuple[Stmt, ...], var: str) -> bool:
    """Does any If condition under ``body`` mention ``var`` (so trips must be walked)?"""
    for s in body:
        if isinstance(s, If):
            if any(var in c.lhs.vars() for c in s.conds) or _uses(s.body, var):
                return True
        elif isinstance(s, For) and _uses(s.body, var):
            return True
    return False


class _Streams:
    """Every block's GM DMA instances in program order, found for all blocks at once: the
    programs are walked once per sub-block with ``block_idx`` an array over the blocks, each
    DMA instance a row of start bytes per block and a mask of the blocks that run it (an
    instance's guards). A block's stream is its programs' rows (AIC, then each AIV) where its
    mask holds."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.tensors: list[str] = []
        self._ids: dict[str, int] = {}
        self.parts: list[tuple[np.ndarray, ...]] = []  # per program and sub-block
        nblk = kernel.block_dim
        for prog in kernel.programs:
            has = _has_gm(prog.body, {})
            for sub, _ in kernel.streams(prog.core):
                self._rows: list[tuple] = []
                env = {BLOCK_IDX: np.arange(nblk), SUB_BLOCK_IDX: sub}
                self._walk(prog.body, env, np.ones(nblk, bool), has)
                self.parts.append(self._stack(self._rows, nblk))

    def per_block(self) -> list[tuple[np.ndarray, ...]]:
        """Per block, (is write, tensor id, start byte, bytes) of its instances in order."""
        out = []
        for b in range(self.kernel.block_dim):
            cols = [(w[m[:, b]], t[m[:, b]], st[m[:, b], b], nb[m[:, b]])
                    for w, t, nb, st, m in self.parts]
            out.append(tuple(np.concatenate(x) for x in zip(*cols, strict=True)))
        return out

    def interleaved(self) -> tuple[list, list, list, list, int]:
        """(is write, tensor id, start byte, bytes) of every instance, the blocks interleaved
        in lockstep (instance ``i`` of a block with ``n`` at progress ``i / n``; ties: the
        lower block first), and the number of instances."""
        per_block = self.per_block()
        progress = np.concatenate([np.arange(len(p[0])) / max(len(p[0]), 1)
                                   for p in per_block])
        order = np.argsort(progress, kind="stable")
        cols = [np.concatenate([p[i] for p in per_block])[order] for i in range(4)]
        return (cols[0].tolist(), cols[1].tolist(), cols[2].tolist(), cols[3].tolist(),
                len(order))

    def _id(self, tensor: str) -> int:
        got = self._ids.get(tensor)
        if got is None:
            got = self._ids[tensor] = len(self.tensors)
            self.tensors.append(tensor)
        return got

    @staticmethod
    def _stack(rows: list[tuple], nblk: int) -> tuple[np.ndarray, ...]:
        """Rows (is write, tensor id, bytes, starts, mask), each a scalar or an array of
        rows, as (writes, tensor ids, bytes, starts [rows x blocks], masks [rows x blocks])."""
        if not rows:
            return (np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0, np.int64),
                    np.zeros((0, nblk), np.int64), np.zeros((0, nblk), bool))
        w = np.concatenate([np.broadcast_to(r[0], len(r[3])) for r in rows])
        t = np.concatenate([np.broadcast_to(r[1], len(r[3])) for r in rows])
        nb = np.concatenate([np.broadcast_to(r[2], len(r[3])) for r in rows])
        st = np.concatenate([r[3] for r in rows])
        m = np.concatenate([np.broadcast_to(r[4], r[3].shape) for r in rows])
        return w, t, nb, st, m

    def _walk(self, body: tuple[Stmt, ...], env: dict, mask: np.ndarray, has: dict) -> None:
        for s in body:
            if isinstance(s, Instr):
                dma = _dma(s)
                if dma is not None:
                    w, reg = dma
                    tensor, start, nb = self._span(reg, env)
                    self._rows.append((np.array([w]), np.array([self._id(tensor)]),
                                       np.array([nb]), start[None, :], mask[None, :]))
            elif not has.get(id(s), False):
                continue
            elif isinstance(s, For):
                if not self._linear_loop(s, env, mask, has):
                    for j in range(s.extent):
                        env[s.var] = j
                        self._walk(s.body, env, mask, has)
                env.pop(s.var, None)
            else:
                inner = _masked(mask, s, env)  # type: ignore[arg-type]
                if inner.any():
                    self._walk(s.body, env, inner, has)

    def _span(self, reg: Region, env: dict) -> tuple[str, np.ndarray, int]:
        eb = self.kernel.dtype_of(reg.tensor).bytes
        start = np.broadcast_to(np.asarray(reg.offset.evaluate(env)) * eb,
                                (self.kernel.block_dim,))
        return reg.tensor, start, reg.count * eb

    def _linear_loop(self, loop: For, env: dict, mask: np.ndarray, has: dict) -> bool:
        """A loop whose GM DMAs sit directly in its body with offsets linear in its variable:
        every instance at once, trips x DMAs rows, without evaluating per trip."""
        items = []
        for s in loop.body:
            if isinstance(s, Instr):
                dma = _dma(s)
                if dma is not None:
                    a = dma[1].offset
                    if any(v == loop.var for v, _, _ in a.mods) or any(
                            loop.var in d.vars() for d, _, _ in a.divs):
                        return False
                    items.append((dma[0], dma[1], dict(a.terms).get(loop.var, 0)))
            elif has.get(id(s), False):
                return False
        if not items:
            return True
        env[loop.var] = 0
        trips = np.arange(loop.extent)[:, None, None]
        spans = [self._span(reg, env) for _, reg, _ in items]
        base = np.stack([start for _, start, _ in spans])[None]  # 1 x DMAs x blocks
        step = np.array([c * self.kernel.dtype_of(reg.tensor).bytes
                         for _, reg, c in items])[None, :, None]
        starts = (base + trips * step).reshape(-1, self.kernel.block_dim)
        reps = loop.extent
        self._rows.append((np.tile([w for w, _, _ in items], reps),
                           np.tile([self._id(t) for t, _, _ in spans], reps),
                           np.tile([nb for _, _, nb in spans], reps), starts,
                           np.broadcast_to(mask, starts.shape)))
        return True


def _dma(s: Instr) -> tuple[bool, Region] | None:
    """(is a write, its GM region) of a GM DMA, else None."""
    if s.op in _READS:
        return False, s.reads[0]
    if s.op in _WRITES:
        return True, s.writes[0]
    return None


def _has_gm(body: tuple[Stmt, ...], memo: dict[int, bool]) -> dict[int, bool]:
    """Which For/If subtrees contain a GM DMA (so the walk can skip the others)."""
    def visit(s: Stmt) -> bool:
        if isinstance(s, Instr):
            return _dma(s) is not None
        found = False
        for c in s.body:
            found = visit(c) or found
        memo[id(s)] = found
        return found

    for s in body:
        visit(s)
    return memo
