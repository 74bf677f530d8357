"""UB bank groups: how many beats the sources of one vector repeat take, from their addresses.

The 910B UB is 48 banks x 128 rows x 32 B in 16 bank groups; one row per bank group per
cycle, so a repeat whose sources need k 32-byte blocks of one group takes k beats (ASC
``docs/.../避免bank冲突（NPU架构版本2201）.md``; shared/calibration/SOURCES.md section 2.5: the ASC
Add sample runs at 2.18 cycles per repeat with its two sources in the same groups and 1.18
after offsetting the second by 256 B). The geometry (``ub_bank_groups``, the block size) is
the target's (``target/costs.py``); a block's group is ``(address // block) % groups``, so the
pattern repeats every ``groups * block`` bytes (512 B on 910B).

One module, two users: the timing model (``sim/costs.py``) charges the beats, the memory
planner (``lower/plan_memory.py``) places buffers read by one instruction so that they take
one beat. A dense float32 pair (8 blocks per repeat each) is conflict-free exactly when the
two start addresses differ by 256 B modulo 512 B.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import For, Kernel, Region, iter_instrs
from ascendsched.target.model import Pipe, Scope, Target

_Key = tuple[str, int]  # (buffer, copy)


@dataclass(frozen=True)
class Footprint:
    """What one source reads per repeat: ``span`` bytes from ``addr + r * step``."""

    addr: int
    span: int
    step: int


def footprint(reg: Region, addr: int, eb: int) -> Footprint:
    """The per-repeat bytes of source ``reg`` starting at UB byte ``addr`` (elements of
    ``eb`` bytes): its innermost dim is one repeat's elements (stride 0: one element, a
    Brcb'd block), its outer dim the repeats."""
    d = reg.dims[-1]
    span = eb if d.stride == 0 else (d.extent - 1) * d.stride * eb + eb
    step = reg.dims[0].stride * eb if len(reg.dims) > 1 else 0
    return Footprint(addr, span, step)


def beats(srcs: list[Footprint], repeats: int, block: int, groups: int, *,
          distinct: bool = False) -> list[int]:
    """Per repeat (the first ``groups`` of them: the pattern's period), the most 32 B blocks
    any bank group must deliver to the sources. Sources walking at different repeat strides (a
    dense tile against a Brcb'd block, repeat stride 0) meet in a group on some repeats only.
    A block two sources both read is delivered once, unless ``distinct`` (the sources are
    different buffers, whatever their addresses modulo the period say)."""
    out = []
    for r in range(min(max(repeats, 1), groups)):
        spans = []  # each source's blocks, a contiguous range (first, last)
        for f in srcs:
            a = f.addr + r * f.step
            spans.append((a // block, (a + f.span - 1) // block))
        if not distinct:  # a block two sources read is delivered once: count their union
            spans = _union(spans)
        # n blocks from lo: n // groups in every group, and one more in the n % groups groups
        # from lo on (a window, as a bit mask); the busiest group has every full round plus
        # the most windows that meet in one group
        every = (1 << groups) - 1
        base = 0
        at_least = [every] + [0] * len(spans)  # groups that at least c windows hit
        for lo, hi in spans:
            full, rest = divmod(hi - lo + 1, groups)
            base += full
            w = ((1 << rest) - 1) << (lo % groups)
            w = (w | (w >> groups)) & every
            for c in range(len(spans), 0, -1):
                at_least[c] |= at_least[c - 1] & w
        out.append(base + max(c for c in range(len(spans) + 1) if at_least[c]))
    return out


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive integer ranges merged where they overlap."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def invariant_mod(a: Affine, scale: int, period: int) -> bool:
    """``a * scale`` modulo ``period`` is the same for every value of its variables."""
    return (all(c * scale % period == 0 for _, c in a.terms)
            and all(c * scale % period == 0 for _, _, c in a.mods)
            and all(c * scale % period == 0 for _, _, c in a.divs))


def bank_invariant(reg: Region, offsets: tuple[int, ...] | None, eb: int, period: int) -> bool:
    """True when the region's UB start address modulo ``period`` (the bank-group cycle, 512 B)
    is the same for every value of the loop variables."""
    copies_same = offsets is None or len({o % period for o in offsets}) == 1
    return invariant_mod(reg.offset, eb, period) and (reg.copy.is_const or copies_same)


@dataclass(frozen=True)
class ReadTogether:
    """Two UB buffer copies one vector instruction reads in the same repeats: per sampled
    instance of its enclosing loops, each side's byte offset inside its buffer copy; each
    side's per-repeat (span, step); repeats per execution, and executions in all."""

    a: _Key
    b: _Key
    a_offs: tuple[int, ...]
    b_offs: tuple[int, ...]
    a_span: tuple[int, int]  # (span, step)
    b_span: tuple[int, int]
    repeats: int
    runs: int

    def extra_beats(self, a_addr: int, b_addr: int, block: int, groups: int) -> float:
        """Beats beyond one per repeat, over all runs, with the copies at these addresses
        (two buffers never share a block, so only the addresses modulo the bank period
        matter: memoised on them)."""
        period = block * groups
        return _extra_beats(self, a_addr % period, b_addr % period, block, groups)

    def _extra(self, a_addr: int, b_addr: int, block: int, groups: int) -> float:
        period = block * groups
        seen: dict[tuple[int, int], float] = {}  # distinct sources: only addresses mod period
        extra = 0.0
        for oa, ob in zip(self.a_offs, self.b_offs):
            key = ((a_addr + oa) % period, (b_addr + ob) % period)
            got = seen.get(key)
            if got is None:
                # moving both sources by whole blocks turns the groups round, which changes
                # no count: the memo needs ``a`` only within its block
                turn = key[0] - key[0] % block
                got = seen[key] = _pair_extra(key[0] - turn, (key[1] - turn) % period,
                                              self.a_span, self.b_span,
                                              min(max(self.repeats, 1), groups), block, groups)
            extra += got
        return extra / len(self.a_offs) * self.repeats * self.runs


@lru_cache(maxsize=1 << 16)
def _pair_extra(a_mod: int, b_mod: int, a_span: tuple[int, int], b_span: tuple[int, int],
                repeats: int, block: int, groups: int) -> float:
    """Mean beats beyond one per repeat of two distinct sources at these addresses modulo the
    bank period (``repeats`` already cut to the period): the same for every pair of copies
    with these spans, so one compile's many pairs of like tiles share it."""
    bs = beats([Footprint(a_mod, *a_span), Footprint(b_mod, *b_span)], repeats, block, groups,
               distinct=True)
    return sum(b - 1 for b in bs) / len(bs)


@lru_cache(maxsize=1 << 16)
def _extra_beats(pair: ReadTogether, a_mod: int, b_mod: int, block: int, groups: int) -> float:
    return pair._extra(a_mod, b_mod, block, groups)


SAMPLES = 64  # loop instances sampled per instruction (each loop's first ``groups`` values)


def read_together(kernel: Kernel, target: Target) -> dict[_Key, list[ReadTogether]]:
    """Every pair of UB buffer copies a V instruction reads as two sources, by each copy
    (both directions), for the memory planner to keep apart in the bank groups. Offsets that
    move with the enclosing loops (a Brcb'd block per row) are sampled over the loops' first
    ``groups`` values, the period of any 32-byte-multiple step; a source whose copy varies,
    or whose offset moves with another variable, is left out."""
    if target.costs is None:
        return {}
    groups = target.costs.ub_bank_groups
    period = groups * target.block_bytes
    bufs = kernel.buffer_map
    out: dict[_Key, list[ReadTogether]] = {}
    for prog in kernel.programs:
        for ins, around in iter_instrs(prog.body):
            if ins.pipe != Pipe.V or ins.op not in ("vec_binary", "vec_fma"):
                continue
            loops = [n for n in around if isinstance(n, For)]
            # Weights and samples must not depend on the problem size, or a reduced instance
            # of the kernel (schedule/reduce.py) gets another memory plan than the full one:
            # the outermost loop (a core's tiles) counts once, and only the loops the
            # sources' offsets move with are sampled.
            runs = 1
            for n in loops[1:]:
                runs *= n.extent
            moving = {v for reg in ins.reads for v in reg.offset.vars()}
            envs: list[dict[str, int]] = [{}]
            for n in loops:
                if n.var in moving:
                    envs = [{**e, n.var: v} for e in envs for v in range(min(n.extent, groups))]
            if len(envs) > SAMPLES:
                continue
            known = {n.var for n in loops}
            srcs: dict[_Key, tuple] = {}  # a vec_fma's dst is one of its sources
            for reg in ins.reads:
                buf = bufs.get(reg.tensor)
                if buf is None or buf.scope != Scope.UB or not reg.copy.is_const:
                    break
                eb = buf.dtype.bytes
                if not _fixed_outside(reg.offset, known, eb, period):
                    break
                offs = tuple(reg.offset.evaluate({**dict.fromkeys(reg.offset.vars(), 0), **e})
                             * eb for e in envs)
                f = footprint(reg, 0, eb)
                srcs.setdefault((reg.tensor, reg.copy.const), (offs, (f.span, f.step)))
            else:
                dst = ins.writes[0]
                repeats = dst.dims[0].extent if len(dst.dims) > 1 else 1
                # every pair of distinct sources (three for vec_fma: they cannot all be apart,
                # 24 blocks in 16 groups, and the pairwise beats prefer the two-beat layouts)
                keys = list(srcs)
                for n, ka in enumerate(keys):
                    for kb in keys[n + 1:]:
                        (oa, sa), (ob, sb) = srcs[ka], srcs[kb]
                        out.setdefault(ka, []).append(
                            ReadTogether(ka, kb, oa, ob, sa, sb, repeats, runs))
                        out.setdefault(kb, []).append(
                            ReadTogether(kb, ka, ob, oa, sb, sa, repeats, runs))
    return out


def _fixed_outside(a: Affine, known: set[str], scale: int, period: int) -> bool:
    """``a * scale`` modulo ``period`` depends on no variable outside ``known``."""
    return (all(c * scale % period == 0 for v, c in a.terms if v not in known)
            and all(c * scale % period == 0 for v, _, c in a.mods if v not in known)
            and all(c * scale % period == 0 for n, _, c in a.divs if n.vars() - known))
