"""The bytes each instruction reads and writes, as isl relations per physical space.

Byte rules (shared with the simulator's trace format): the UB side of a DMA moves whole 32-byte
blocks per row; GM is exact; vector operands are exact element bytes, except block-broadcast
sources (column stride 0), which read the whole 32-byte block at each row start. Cube ops
touch the element boxes their AscendC params imply (``cube_ops.cube_footprints``: Nd2Nz writes
whole 32 B fractal rows, loads whole fractals, Mmad whole padded tiles, Fixpipe reads whole
16-element row blocks and writes the exact mSize x nSize region); an ``mmad`` also reads its C
tile on the instances where ``cmatrixInitVal`` is false. Before memory planning every on-chip
buffer is its own space and copy ``c`` occupies bytes ``[c * round32(nbytes), ...)`` of it;
after planning (``Buffer.offsets`` set) the space is the scope and copy ``c`` starts at
``offsets[c]``. ``k mod 2`` terms become quasi-affine constraints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property

import islpy as isl
import numpy as np

from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.cube_ops import CUBE_OPS, cube_footprints, cube_params
from ascendsched.lower.instances import (
    InstrInfo,
    Where,
    affine_text,
    block_count,
    coalesced,
    loop_dims,
)
from ascendsched.lower.ir import BLOCK_IDX, DMA_OPS, VECTOR_OPS, Dim, Instr, Kernel, Region
from ascendsched.lower.sync_ir import Sync

BYTE = "__byte"


@dataclass(frozen=True, eq=False)
class Access:
    """The bytes one instruction reads or writes in one space. Its isl relations are built on
    first use (most accesses never meet a conflicting one)."""

    instr: int
    kind: str  # "R" or "W"
    space: str
    tensors: tuple[str, ...]  # region descriptions, e.g. "x_ub[copy (k % 2)]"
    hull: tuple[int, int]  # lowest and highest byte it may touch (an over-estimate)
    make_parts: Callable[[], tuple[tuple[str, isl.Map], ...]] = field(repr=False)
    # every instance touches the same bytes (no loop variable or block index in any region's
    # offset or copy, no instance condition): conflicts are decided on the byte sets alone
    fixed: bool = False
    # every block that runs the instruction touches the same bytes: no block index in a
    # region, no instance condition, and no domain condition ties the loops the regions use
    # to the block index or to other loops (the domain is a product of the two)
    block_free: bool = False
    # per region, masks of the 32-byte blocks its bytes touch at all and of those they fill
    # (None: isl decides), for an access whose instances together touch exactly the union of
    # its loop values' bytes
    make_blocks: Callable[[], tuple[tuple[int, int], ...] | None] | None = field(
        default=None, repr=False)
    part_names: tuple[str, ...] = ()  # the description of each part (``parts``), in order
    uses: frozenset[str] = frozenset()  # the variables its regions' offsets and copies name
    conditional: bool = False  # some region is touched on some instances only (``when``)

    @cached_property
    def part_blocks(self) -> tuple[int, ...] | None:
        """Per region, the bytes its instances touch as a mask of 32-byte blocks (bit ``8k``:
        block ``k`` of the space), or None: a region touches part of a block, has more than
        ``MAX_MASK_ROWS`` rows over the loop values it uses, or its bytes depend on the block
        index or on loops the instance conditions restrict (not every combination of loop
        values occurs). Where both accesses have masks, their bytes meet iff the masks do
        (the byte sets are unions of whole blocks)."""
        got = self.touched
        return tuple(c for c, f in got) if got is not None and all(
            c == f for c, f in got) else None

    @cached_property
    def touched(self) -> tuple[tuple[int, int], ...] | None:
        """Per region, (the blocks it touches at all, the blocks it fills) as masks like
        ``part_blocks``'s, which a region touching part of a block (a scalar, a masked tail)
        has too; None where ``part_blocks`` is None for another reason."""
        return self.make_blocks() if self.make_blocks is not None else None

    @cached_property
    def cover(self) -> int | None:
        """The blocks the access touches at all: where two accesses' covers do not meet,
        neither do their bytes."""
        return _union(c for c, _ in self.touched) if self.touched is not None else None

    @cached_property
    def full(self) -> int | None:
        """The blocks some region of the access fills: where one access's cover meets the
        other's full blocks, their bytes meet."""
        return _union(f for _, f in self.touched) if self.touched is not None else None

    @cached_property
    def parts(self) -> tuple[tuple[str, isl.Map], ...]:
        """Per region: (description, instance -> space[byte] relation)."""
        return self.make_parts()

    @cached_property
    def relation(self) -> isl.Map:
        """instance -> space[byte]."""
        m = self.parts[0][1]
        for _, p in self.parts[1:]:
            m = m.union(p)
        return coalesced(m)

    @cached_property
    def part_bytes(self) -> tuple[isl.Set, ...]:
        """Per region, the bytes its instances touch (all instances alike when ``fixed``)."""
        return tuple(m.range() for _, m in self.parts)

    @cached_property
    def byte_set(self) -> isl.Set:
        """The bytes the instances touch, every region."""
        return self.relation.range()


def instr_accesses(kernel: Kernel, info: InstrInfo) -> list[Access]:
    """The byte accesses of one instruction (one per kind and space), as the analysis uses."""
    return _accesses(kernel, info)


def region_space(kernel: Kernel, tensor: str) -> str:
    """The physical space a tensor lives in: GM tensor name, buffer name, or planned scope."""
    if tensor in kernel.buffer_map:
        b = kernel.buffer_map[tensor]
        return str(b.scope) if b.offsets is not None else b.name
    if tensor in kernel.param_map:
        return tensor
    raise InternalCompilerError(f"region names unknown tensor {tensor!r}")


def _accesses(kernel: Kernel, info: InstrInfo) -> list[Access]:
    """One Access per (kind, space) of the instruction, regions of one kind united."""
    ins = info.instr
    if isinstance(ins, Sync):
        return []
    acc: dict[tuple[str, str], list[tuple[str, Region, str, str]]] = {}
    hulls: dict[tuple[str, str], tuple[int, int]] = {}
    writes, reads = ins.writes, ins.reads
    extra: list[tuple[Region, str]] = []
    if ins.op in CUBE_OPS:
        writes, reads, extra = _cube_regions(kernel, info)
    regions = [(k, r, "") for k, rs in (("W", writes), ("R", reads)) for r in rs]
    regions += [("R", r, when) for r, when in extra]  # reads that happen on some instances only
    for kind, r, when in regions:
        key = (kind, region_space(kernel, r.tensor))
        acc.setdefault(key, []).append((_describe(kernel, r), r, kind, when))
        lo, hi = _region_hull(kernel, info, r, kind)
        old = hulls.get(key)
        hulls[key] = (lo, hi) if old is None else (min(lo, old[0]), max(hi, old[1]))
    out = []
    for (k, s), parts in acc.items():
        names = tuple(dict.fromkeys(n for n, _, _, _ in parts))

        def make(parts=parts) -> tuple[tuple[str, isl.Map], ...]:  # noqa: ANN001
            return tuple((n, _region_map(kernel, info, r, kind, when))
                         for n, r, kind, when in parts)

        fixed = all(not when and not r.offset.vars() and r.copy.is_const
                    for _, r, _, when in parts)
        used = frozenset().union(*(r.offset.vars() | r.copy.vars() for _, r, _, _ in parts))
        block_free = BLOCK_IDX not in used and not any(when for *_, when in parts) and all(
            c.lhs.vars() <= used or not c.lhs.vars() & used for c in info.conds)
        # every combination of the loop values the regions use occurs (no instance condition
        # names those loops), so enumerating them gives the exact bytes as block masks
        enumerable = block_free and not any(c.lhs.vars() & used for c in info.conds)
        blocks = None
        if enumerable:
            def blocks(parts=parts) -> tuple[tuple[int, int], ...] | None:  # noqa: ANN001
                got = [_region_blocks(kernel, info, r, kind) for _, r, kind, _ in parts]
                return None if None in got else tuple(got)  # type: ignore[arg-type]
        out.append(Access(info.id, k, s, names, hulls[(k, s)], make, fixed, block_free,
                          blocks, tuple(n for n, _, _, _ in parts), used,
                          any(when for *_, when in parts)))
    return out


def shared_copy(kernel: Kernel, space: str, sides: tuple[tuple[Instr, tuple[str, ...]], ...]
                ) -> tuple[str, int] | None:
    """``(var, m)`` when every region the ``sides`` (an instruction, the region descriptions of
    a dependence on its side) touch in ``space`` is one buffer's copy ``var % m``, and the
    buffer's copies occupy disjoint bytes: then two instances that conflict there have equal
    ``var % m`` (the same copy). None otherwise."""
    got = side_copies(kernel, space, sides)
    if got is None or len(set(got)) != 1:
        return None
    copy = got[0]
    mods = copy.mods
    if copy.terms or copy.divs or copy.const or len(mods) != 1 or mods[0][2] != 1:
        return None
    return mods[0][0], mods[0][1]


def side_copies(kernel: Kernel, space: str, sides: tuple[tuple[Instr, tuple[str, ...]], ...]
                ) -> tuple[Affine, ...] | None:
    """The copy expression of each side (an instruction, the region descriptions of a
    dependence on its side) when each touches, in ``space``, one copy expression of one
    buffer, the same buffer on every side, whose copies occupy disjoint bytes: two instances
    that conflict there have equal copy values. None otherwise."""
    got: list[Affine] = []
    tensors: set[str] = set()
    for ins, names in sides:
        found = _copies_touched(kernel, space, ins, names)
        if len(found) != 1:
            return None
        (tensor, copy), = found
        tensors.add(tensor)
        got.append(copy)
    if len(tensors) != 1 or not _disjoint_copies(kernel, tensors.pop()):
        return None
    return tuple(got)


def _copies_touched(kernel: Kernel, space: str, ins: Instr, names: tuple[str, ...]
                    ) -> set[tuple[str, Affine]]:
    """(buffer, copy expression) of each region of ``ins`` described by ``names`` in
    ``space``."""
    return {(r.tensor, r.copy) for r in ins.reads + ins.writes
            if _describe(kernel, r) in names and region_space(kernel, r.tensor) == space}


def _disjoint_copies(kernel: Kernel, tensor: str) -> bool:
    """Whether buffer ``tensor``'s copies occupy disjoint bytes."""
    buf = kernel.buffer_map.get(tensor)
    if buf is None:
        return False
    span = -(-buf.nbytes // kernel.target.block_bytes) * kernel.target.block_bytes
    bases = sorted(buf.offsets if buf.offsets is not None else
                   tuple(c * span for c in range(buf.copies)))
    return all(b - a >= span for a, b in zip(bases, bases[1:], strict=False))


def _region_hull(kernel: Kernel, info: InstrInfo, r: Region, kind: str) -> tuple[int, int]:
    """Lowest and highest byte of ``r``'s space the instruction may touch, by interval
    arithmetic over the loop ranges (an over-estimate of ``_region_map``'s byte set)."""
    ranges = {BLOCK_IDX: (0, block_count(kernel, info.core) - 1)}
    ranges.update({f.var: (0, f.extent - 1) for f in info.loops})
    affine_text(r.offset, frozenset(ranges),
                Where(lambda: f"region {r} of S{info.id} ({info.instr.op})"))
    lo, hi = r.offset.bounds(ranges)
    for d in r.dims:
        span = (d.extent - 1) * d.stride
        lo, hi = lo + min(span, 0), hi + max(span, 0)
    eb = kernel.dtype_of(r.tensor).bytes
    blk = kernel.target.block_bytes
    blo, bhi = lo * eb, (hi + 1) * eb - 1
    if r.tensor in kernel.buffer_map:  # whole 32 B blocks (DMA rows, block broadcasts)
        blo, bhi = blo // blk * blk, (bhi // blk + 1) * blk - 1
        bases = [b for b, _ in _copy_bases(kernel, r, frozenset(ranges),
                                          Where(lambda: f"region {r}"))]
        return blo + min(bases), bhi + max(bases)
    return blo, bhi


def conflicting_regions(sa: Access, da: Access, rel: isl.Map
                 ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The region descriptions of each side that take part in the dependence ``rel``."""
    if len(sa.parts) == 1 and len(da.parts) == 1:
        return sa.tensors, da.tensors
    src: list[str] = []
    dst: list[str] = []
    for sn, sm in sa.parts:
        for dn, dm in da.parts:
            if not sm.apply_range(dm.reverse()).intersect(rel).is_empty():
                src.append(sn)
                dst.append(dn)
    return tuple(dict.fromkeys(src)), tuple(dict.fromkeys(dst))


def _describe(kernel: Kernel, r: Region) -> str:
    b = kernel.buffer_map.get(r.tensor)
    if b is None or b.copies == 1:
        return r.tensor
    return f"{r.tensor}[copy {r.copy}]"


def _cube_regions(kernel: Kernel, info: InstrInfo
                  ) -> tuple[tuple[Region, ...], tuple[Region, ...], list[tuple[Region, str]]]:
    """A cube op's regions with the element boxes its params imply (cube_ops.cube_footprints), and
    mmad's read of C on the instances that accumulate (``cmatrixInitVal`` false)."""
    ins = info.instr
    params = cube_params(ins)
    regions = ins.writes + ins.reads
    boxes = cube_footprints(ins.op, params, tuple(kernel.dtype_of(r.tensor) for r in regions),
                            kernel.target)
    exact = tuple(Region(r.tensor, r.offset, box, r.copy)
                  for r, box in zip(regions, boxes, strict=True))
    nw = len(ins.writes)
    extra: list[tuple[Region, str]] = []
    if ins.op == "mmad":
        init = params["cmatrixInitVal"]
        bound = frozenset((BLOCK_IDX,) + info.loop_vars)
        if isinstance(init, Cond):
            lhs = affine_text(init.lhs, bound, f"cmatrixInitVal of S{info.id}")
            neg = {"<": f"{lhs} >= {init.rhs}", "<=": f"{lhs} > {init.rhs}",
                   ">=": f"{lhs} < {init.rhs}",
                   "==": f"({lhs} < {init.rhs} or {lhs} > {init.rhs})"}[init.op]
            extra.append((exact[0], neg))
        elif init is False:
            extra.append((exact[0], ""))
        elif init is not True:
            raise InternalCompilerError(f"S{info.id}: cmatrixInitVal must be a bool or a Cond, "
                                        f"not {init!r}")
    return exact[:nw], exact[nw:], extra


def _region_map(kernel: Kernel, info: InstrInfo, r: Region, kind: str, when: str = ""
                ) -> isl.Map:
    """instance -> M_<space>[byte] for one region, by the byte rules in the module docstring.

    ``when``: an isl condition on the instance restricting the access (empty: always)."""
    ins = info.instr
    bound = frozenset((BLOCK_IDX,) + info.loop_vars)
    where = Where(lambda: f"region {r} of S{info.id} ({ins.op})")
    eb = kernel.dtype_of(r.tensor).bytes
    blk = kernel.target.block_bytes
    off = affine_text(r.offset, bound, where)
    dims = r.dims or ()
    mode = _mode(kernel, ins, r, kind)
    row_dims, cols = _rows(dims, mode)
    exists: list[str] = []
    cons: list[str] = []
    elem = off
    for j, d in enumerate(row_dims):
        if d.extent == 1:
            continue
        e = f"_r{j}"
        exists.append(e)
        cons.append(f"0 <= {e} < {d.extent}")
        elem += f" + {d.stride}*{e}"
    pieces: list[str] = []
    for base, copy_cond in _copy_bases(kernel, r, bound, where):
        b = f"({BYTE} - {base})"
        if mode == "dma":
            byte_c = (f"{blk}*floor(({eb}*({elem}))/{blk}) <= {b} and "
                      f"{b} < {blk}*floor(({eb}*({elem} + {cols}) + {blk - 1})/{blk})")
        elif mode == "brcb":
            byte_c = (f"{blk}*floor(({eb}*({elem}))/{blk}) <= {b} and "
                      f"{b} < {blk}*floor(({eb}*({elem}))/{blk}) + {blk}")
        else:
            byte_c = f"{eb}*({elem}) <= {b} and {b} < {eb}*({elem}) + {eb * cols}"
        body = " and ".join(cons + [byte_c])
        ex = f"exists ({', '.join(exists)} : {body})" if exists else body
        pieces.append(f"{copy_cond} and {ex}" if copy_cond else ex)
    if when:
        pieces = [f"({when}) and {p}" for p in pieces]
    space = region_space(kernel, r.tensor)
    text = "; ".join(f"S{info.id}[{loop_dims(info.loops)}] -> M_{space}[{BYTE}] : {p}"
                     for p in pieces)
    # the statement's domain is parsed once (``kernel_instrs``), not again in every region
    return isl.Map(f"{{ {text} }}").intersect_domain(info.domain)


def _rows(dims: tuple[Dim, ...], mode: str) -> tuple[tuple[Dim, ...], int]:
    """A region's row dimensions and the elements of each row, by the byte rules: a DMA row
    and a block broadcast's row start are the last dimension; an exact region's contiguous last
    dimension is one byte range per row (the same bytes as element by element, with fewer
    existential variables for isl); else every element is a row of its own."""
    if mode != "exact" or (dims and dims[-1].stride == 1):
        return dims[:-1], dims[-1].extent
    return dims, 1


def _mode(kernel: Kernel, ins: Instr, r: Region, kind: str) -> str:
    """How a region's elements become bytes: ``dma`` (whole 32-byte blocks per row), ``brcb``
    (the whole block at each row start) or ``exact``."""
    dims = r.dims or ()
    buf = kernel.buffer_map.get(r.tensor)
    if buf is not None and ins.op in DMA_OPS and dims and dims[-1].stride == 1:
        return "dma"
    if (buf is not None and kind == "R" and ins.op in VECTOR_OPS and len(dims) >= 2
            and dims[-1].stride == 0):
        return "brcb"
    return "exact"


MAX_MASK_ROWS = 4096  # rows of one region enumerated into a block mask (more: isl decides)
MAX_MASK_BLOCKS = 1 << 16  # highest block of a mask (2 MiB of 32-byte blocks)


def _region_blocks(kernel: Kernel, info: InstrInfo, r: Region, kind: str
                   ) -> tuple[int, int] | None:
    """The bytes a region touches over every value of the loops its offset and copy use, by
    ``_region_map``'s rules, as masks of the 32-byte blocks they touch at all and of those
    one row fills (``Access.touched``; equal unless a row covers part of a block); None
    where there are too many rows to enumerate."""
    loops = {f.var: f.extent for f in info.loops}
    used = sorted(r.offset.vars() | r.copy.vars())
    if any(v not in loops for v in used):
        return None
    envs = [{}]
    for v in used:
        envs = [{**e, v: j} for e in envs for j in range(loops[v])]
        if len(envs) > MAX_MASK_ROWS:
            return None
    eb = kernel.dtype_of(r.tensor).bytes
    blk = kernel.target.block_bytes
    dims = r.dims or ()
    mode = _mode(kernel, info.instr, r, kind)
    rows, cols = _rows(dims, mode)
    rows = tuple(d for d in rows if d.extent != 1)
    bases = _copy_offsets(kernel, r)
    starts = set()  # (element offset, copy base): loop values often repeat them (k % 2)
    for env in envs:
        copy = r.copy.evaluate(env)
        if not 0 <= copy < len(bases):
            raise InternalCompilerError(f"region {r} of S{info.id}: copy {copy} of a "
                                        f"{len(bases)}-copy buffer")
        starts.add((r.offset.evaluate(env), bases[copy]))
    if not starts:  # a loop the offset or copy uses runs no trip: no instance, no byte
        return 0, 0
    count = len(starts)
    for d in rows:
        count *= d.extent
    if count > MAX_MASK_ROWS:
        return None
    pairs = np.array(sorted(starts), dtype=np.int64)
    e, base = pairs[:, 0], pairs[:, 1]
    for d in rows:  # every row start, with its copy's base
        e = (e[:, None] + np.arange(d.extent, dtype=np.int64) * d.stride).ravel()
        base = np.repeat(base, d.extent)
    if mode == "dma":
        lo, hi = eb * e // blk * blk, -(-eb * (e + cols) // blk) * blk
    elif mode == "brcb":
        lo = eb * e // blk * blk
        hi = lo + blk
    else:
        lo, hi = eb * e, eb * (e + cols)
    lo, hi = lo + base, hi + base
    if lo.min() < 0 or hi.max() > MAX_MASK_BLOCKS * blk:
        return None
    return _mask(lo // blk, -(-hi // blk)), _mask(-(-lo // blk), hi // blk)


def _mask(first: np.ndarray, end: np.ndarray) -> int:
    """Blocks ``first[i] <= k < end[i]`` for some i, as bit ``8k`` of an int."""
    keep = first < end
    first, end = first[keep], end[keep]
    if not len(first):
        return 0
    edges = np.zeros(int(end.max()) + 1, dtype=np.int64)  # +1 at a span's first block,
    np.add.at(edges, first, 1)                            # -1 after its last
    np.add.at(edges, end, -1)
    mask = (np.cumsum(edges[:-1]) > 0).astype(np.uint8)  # one byte per block: bit 8 * k
    return int.from_bytes(mask.tobytes(), "little")


def _union(masks: Iterable[int]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _copy_bases(kernel: Kernel, r: Region, bound: frozenset[str], where: str | Where
                ) -> list[tuple[int, str]]:
    """(byte base, isl condition selecting that copy) for each copy the region may touch."""
    buf = kernel.buffer_map.get(r.tensor)
    if buf is None:
        return [(0, "")]
    bases = _copy_offsets(kernel, r)
    if r.copy.is_const:
        c = r.copy.const
        if not 0 <= c < buf.copies:
            raise InternalCompilerError(f"{where}: copy {c} of a {buf.copies}-copy buffer")
        return [(bases[c], "")]
    text = affine_text(r.copy, bound, where)
    return [(bases[c], f"{text} = {c}") for c in range(buf.copies)]


def _copy_offsets(kernel: Kernel, r: Region) -> tuple[int, ...]:
    """The byte offset of each copy of ``r``'s buffer in its space (a GM tensor: (0,))."""
    buf = kernel.buffer_map.get(r.tensor)
    if buf is None:
        return (0,)
    if buf.offsets is not None:
        return tuple(buf.offsets)
    stride = -(-buf.nbytes // kernel.target.block_bytes) * kernel.target.block_bytes
    return tuple(c * stride for c in range(buf.copies))
