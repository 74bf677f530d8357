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

from ascendsched.lower.ir import BLOCK_IDX, For, If, Instr, Kernel, Region, Stmt

_READS = {"copy_gm_ub": 0, "copy_gm_l1": 0}
_WRITES = {"copy_ub_gm": 0, "fixpipe": 0}


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


def gm_traffic(kernel: Kernel, l2_bytes: int) -> GmTraffic:
    """Replay the kernel's GM DMA instances through an L2 of ``l2_bytes``."""
    streams = [_block_accesses(kernel, b) for b in range(kernel.block_dim)]
    order: list[tuple[float, int, int]] = []
    for b, acc in enumerate(streams):
        n = len(acc)
        order.extend((i / n, b, i) for i in range(n))
    order.sort()
    cache: OrderedDict[tuple, tuple[int, bool]] = OrderedDict()
    size = 0
    read: dict[str, int] = {}
    written: dict[str, int] = {}
    hits: dict[str, int] = {}
    hbm_read = writeback = 0
    for _, b, i in order:
        is_write, tensor, start, nbytes = streams[b][i]
        key = (tensor, start, nbytes)
        old = cache.pop(key, None)
        if is_write:
            written[tensor] = written.get(tensor, 0) + nbytes
            if old is None:
                size += nbytes
            cache[key] = (nbytes, True)
        else:
            read[tensor] = read.get(tensor, 0) + nbytes
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
    return GmTraffic(read, written, hit, hbm_read, writeback, len(order))


def _block_accesses(kernel: Kernel, block: int) -> list[tuple[bool, str, int, int]]:
    out: list[tuple[bool, str, int, int]] = []
    for prog in kernel.programs:
        env = {BLOCK_IDX: block}
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
