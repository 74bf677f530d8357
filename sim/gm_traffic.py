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
    streams = [_block_accesses(kernel, b) for b in range(kernel.block_dim)]
    acc = [a for s in streams for a in s]
    progress = np.concatenate([np.arange(len(s)) / max(len(s), 1) for s in streams]) \
        if acc else np.zeros(0)
    order = np.argsort(progress, kind="stable")
    cache: OrderedDict[tuple, tuple[int, bool]] = OrderedDict()
    size = 0
    read: dict[str, int] = {}
    written: dict[str, int] = {}
    hits: dict[str, int] = {}
    hbm_read = writeback = 0
    for i in order.tolist():
        is_write, tensor, start, nbytes = acc[i]
        key = (tensor, start, nbytes)
        if is_write:
            old = cache.pop(key, None)
            written[tensor] = written.get(tensor, 0) + nbytes
            if old is None:
                size += nbytes
            cache[key] = (nbytes, True)
        else:
            read[tensor] = read.get(tensor, 0) + nbytes
            if tensor in bypass:
                hbm_read += nbytes
                continue
            old = cache.pop(key, None)
            if old is not None:
                hits[tensor] = hits.get(tensor, 0) + nbytes
                cache[key] = old
            else:
                hbm_read += nbytes
                size += nbytes
                cache[key] = (nbytes, False)
        while size > l2_bytes and cache:
            _, (nb, dirty) = cache.popitem(last=False)
            size -= nb
            if dirty:
                writeback += nb
    hit = {t: hits.get(t, 0) / n for t, n in read.items() if n}
    return GmTraffic(read, written, hit, hbm_read, writeback, len(acc))


def _count(kernel: Kernel) -> tuple[dict[str, int], dict[str, int], int]:
    """Bytes read and written per GM tensor and the number of DMA instances, all blocks."""
    read: dict[str, int] = {}
    written: dict[str, int] = {}
    n = 0

    def walk(body: tuple[Stmt, ...], env: dict[str, int], mult: int, has: dict) -> None:
        nonlocal n
        for s in body:
            if isinstance(s, Instr):
                if s.op in _READS or s.op in _WRITES:
                    reg = s.reads[0] if s.op in _READS else s.writes[0]
                    d = written if s.op in _WRITES else read
                    d[reg.tensor] = d.get(reg.tensor, 0) + mult * reg.count * kernel.dtype_of(
                        reg.tensor).bytes
                    n += mult
            elif not has.get(id(s), False):
                continue
            elif isinstance(s, For):
                if _uses(s.body, s.var):
                    for j in range(s.extent):
                        env[s.var] = j
                        walk(s.body, env, mult, has)
                    env.pop(s.var, None)
                else:
                    walk(s.body, env, mult * s.extent, has)
            elif all(c.evaluate(env) for c in s.conds):
                walk(s.body, env, mult, has)

    for prog in kernel.programs:
        has = _has_gm(prog.body, {})
        for b in range(kernel.block_dim):
            for sub, _ in kernel.streams(prog.core):
                walk(prog.body, {BLOCK_IDX: b, SUB_BLOCK_IDX: sub}, 1, has)
    return read, written, n


def _uses(body: tuple[Stmt, ...], var: str) -> bool:
    """Does any If condition under ``body`` mention ``var`` (so trips must be walked)?"""
    for s in body:
        if isinstance(s, If):
            if any(var in c.lhs.vars() for c in s.conds) or _uses(s.body, var):
                return True
        elif isinstance(s, For) and _uses(s.body, var):
            return True
    return False


def _block_accesses(kernel: Kernel, block: int) -> list[tuple[bool, str, int, int]]:
    out: list[tuple[bool, str, int, int]] = []
    for prog in kernel.programs:
        for sub, _ in kernel.streams(prog.core):
            env = {BLOCK_IDX: block, SUB_BLOCK_IDX: sub}
            _walk(kernel, prog.body, env, out, _has_gm(prog.body, {}))
    return out


def _has_gm(body: tuple[Stmt, ...], memo: dict[int, bool]) -> dict[int, bool]:
    """Which For/If subtrees contain a GM DMA (so the walk can skip the others)."""
    def visit(s: Stmt) -> bool:
        if isinstance(s, Instr):
            return s.op in _READS or s.op in _WRITES
        found = False
        for c in s.body:
            found = visit(c) or found
        memo[id(s)] = found
        return found

    for s in body:
        visit(s)
    return memo


def _walk(kernel: Kernel, body: tuple[Stmt, ...], env: dict[str, int],
          out: list[tuple[bool, str, int, int]], has: dict[int, bool]) -> None:
    for s in body:
        if isinstance(s, Instr):
            if s.op in _READS:
                out.append((False,) + _span(kernel, s.reads[0], env))
            elif s.op in _WRITES:
                out.append((True,) + _span(kernel, s.writes[0], env))
        elif not has.get(id(s), False):
            continue
        elif isinstance(s, For):
            if not _linear_loop(kernel, s, env, out, has):
                for j in range(s.extent):
                    env[s.var] = j
                    _walk(kernel, s.body, env, out, has)
            env.pop(s.var, None)
        elif isinstance(s, If) and all(c.evaluate(env) for c in s.conds):
            _walk(kernel, s.body, env, out, has)


def _span(kernel: Kernel, reg: Region, env: dict[str, int]) -> tuple[str, int, int]:
    eb = kernel.dtype_of(reg.tensor).bytes
    return (reg.tensor, reg.offset.evaluate(env) * eb, reg.count * eb)


def _linear_loop(kernel: Kernel, loop: For, env: dict[str, int],
                 out: list[tuple[bool, str, int, int]], has: dict[int, bool]) -> bool:
    """A loop whose GM DMAs sit directly in its body with offsets linear in its variable:
    append every instance without evaluating the expressions per iteration."""
    items = []
    for s in loop.body:
        if isinstance(s, Instr):
            if s.op in _READS or s.op in _WRITES:
                reg = s.reads[0] if s.op in _READS else s.writes[0]
                a = reg.offset
                if any(v == loop.var for v, _, _ in a.mods) or any(
                        loop.var in d.vars() for d, _, _ in a.divs):
                    return False
                items.append((s.op in _WRITES, reg, dict(a.terms).get(loop.var, 0)))
        elif has.get(id(s), False):
            return False
    env[loop.var] = 0
    base = [(w, *_span(kernel, reg, env), c * kernel.dtype_of(reg.tensor).bytes)
            for w, reg, c in items]
    for j in range(loop.extent):
        for w, tensor, start, nbytes, step in base:
            out.append((w, tensor, start + j * step, nbytes))
    return True
