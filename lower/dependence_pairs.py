"""How one pair of accesses of two statements is decided for ``polyhedral.py``: whether they
conflict, their region descriptions and the loops that carry their pairs, on byte and block
sets where every instance touches the same bytes, read off the loops where both domains are
boxes, and by isl relations otherwise (built only when a later step asks for them).

``analyze_dependences`` picks the case: ``fixed_pair`` (both accesses touch the same bytes in
every instance, or vary only in loops inside the common ones: ``inner_only``), ``apart_pair``
(no common loop, the same bytes in every block), ``blocked_pair`` (no common loop, GM), and
the general case, whose ``levels`` isl measures.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import islpy as isl

from ascendsched.lower.byte_access import Access
from ascendsched.lower.instances import InstrInfo, coalesced, order_shape, program_order
from ascendsched.lower.ir import BLOCK_IDX


def inner_only(a: Access, info: InstrInfo, m: int) -> bool:
    """Whether access ``a`` touches the same bytes in every instance of ``info``'s first
    ``m`` loops and every block: its regions name only loops below those, each of which runs
    whole wherever the statement runs (no enclosing guard names them, no region is touched
    on some instances only). Its dependences with another such access of a statement sharing
    those ``m`` loops are then those of fixed accesses (``fixed_pair``) over the byte sets of
    all inner iterations: for any two outer instances, some inner values meet iff the sets
    do. (The instance relation still depends on the inner values: it is built on demand.)"""
    if a.conditional or BLOCK_IDX in a.uses:
        return False
    inner = set(info.loop_vars[m:])
    return a.uses <= inner and not any(c.lhs.vars() & inner for c in info.conds)


def apart_pair(sa: Access, da: Access, s: InstrInfo, d: InstrInfo, cache: dict
               ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """Whether two accesses of statements with no common loop, s first in the text, conflict
    (their conflicting region descriptions, or None), when each touches the same bytes in
    every block that runs it (``Access.block_free``): every s instance precedes every d
    instance of its block, so they conflict iff their byte sets meet and some block runs
    both. Decided on byte and block sets; the relation is built only if asked for."""
    if not _bytes_meet(sa, da):
        return None
    if _blocks(s, cache).intersect(_blocks(d, cache)).is_empty():
        return None
    if len(sa.part_names) == 1 and len(da.part_names) == 1:
        return sa.tensors, da.tensors
    return _meeting_parts(sa, da)


def blocked_pair(sa: Access, da: Access, s: InstrInfo, d: InstrInfo, cache: dict
                 ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """Whether two accesses of statements with no common loop, s first in the text, conflict
    (their conflicting region descriptions, or None), whatever their bytes depend on: every s
    instance precedes every d instance of its block, so they conflict iff in some block the
    bytes s touches meet the bytes d touches. Decided on each access's block -> bytes maps
    (its loops projected out, once per access), cheaper than relating instance pairs when the
    offsets carry the tile order's floors (a mixed kernel's output stores of two tile
    classes: 31 -> 16 ms for one pair). Asked for GM accesses only: on-chip ones rarely carry
    such floors, and for them the projection cost more than it saved (126 mixed kernels:
    median compile +1.7%). The relation is built only if asked for."""
    hits = [(sn, dn) for sn, sm in _block_bytes(sa, s, cache)
            for dn, dm in _block_bytes(da, d, cache) if not sm.intersect(dm).is_empty()]
    if not hits:
        return None
    return tuple(dict.fromkeys(x for x, _ in hits)), tuple(dict.fromkeys(y for _, y in hits))


def _block_bytes(a: Access, info: InstrInfo, cache: dict) -> tuple[tuple[str, isl.Map], ...]:
    """Per region of ``a``: its description and ``B[block] -> space[byte]``, the bytes the
    instances of each block touch."""
    key = ("block bytes", info.id, a.kind, a.space)
    got = cache.get(key)
    if got is None:
        got = cache[key] = tuple(
            (n, m.project_out(isl.dim_type.in_, 1, m.dim(isl.dim_type.in_) - 1)
             .set_tuple_name(isl.dim_type.in_, "B")) for n, m in a.parts)
    return got


def _blocks(info: InstrInfo, cache: dict) -> isl.Set:
    """The blocks that run some instance of ``info``."""
    key = ("blocks", info.id)
    got = cache.get(key)
    if got is None:
        dom = info.domain
        got = cache[key] = dom.project_out(isl.dim_type.set, 1, dom.dim(isl.dim_type.set) - 1
                                           ).set_tuple_name("B")
    return got


def _bytes_meet(sa: Access, da: Access) -> bool:
    """Whether the byte sets of two accesses meet: not where the blocks they touch at all are
    apart (``Access.cover``), yes where one touches a block the other fills (``Access.full``;
    both when they touch whole blocks only), else by isl."""
    ca, cb = sa.cover, da.cover
    if ca is not None and cb is not None:
        if not ca & cb:
            return False
        if ca & da.full or sa.full & cb:  # type: ignore[operator]
            return True
    return not sa.byte_set.intersect(da.byte_set).is_empty()


def _meeting_parts(sa: Access, da: Access) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The region descriptions of two accesses whose byte sets meet, part by part."""
    src: list[str] = []
    dst: list[str] = []
    pa, pb = sa.part_blocks, da.part_blocks
    if pa is not None and pb is not None:
        for sn, ma in zip(sa.part_names, pa, strict=True):
            for dn, mb in zip(da.part_names, pb, strict=True):
                if ma & mb:
                    src.append(sn)
                    dst.append(dn)
        return tuple(dict.fromkeys(src)), tuple(dict.fromkeys(dst))
    for (sn, _), sb in zip(sa.parts, sa.part_bytes, strict=True):
        for (dn, _), db in zip(da.parts, da.part_bytes, strict=True):
            if not sb.intersect(db).is_empty():
                src.append(sn)
                dst.append(dn)
    return tuple(dict.fromkeys(src)), tuple(dict.fromkeys(dst))


def fixed_pair(sa: Access, da: Access, s: InstrInfo, d: InstrInfo, cache: dict
               ) -> tuple[Callable[[], isl.Map], tuple,
                          tuple[tuple[str, ...], tuple[str, ...]]] | None:
    """The dependence of two accesses whose every instance touches the same bytes: none if
    the byte sets are disjoint, else every pair in program order (a maker of its relation,
    its levels, its region descriptions). The relation and its levels depend only on the two
    domains and how the statements sit in the loop tree, so statements of one body share
    them: computed once per shape in ``cache`` (``named`` renames the shape's relation), or,
    where both domains are boxes, read off the loops (``_box_levels``) and the relation built
    only if asked for."""
    if not _bytes_meet(sa, da):
        return None
    m, strict = order_shape(s, d)
    boxed = _box_levels(s, d, m, strict, cache)
    if boxed is not None:
        if not boxed:
            return None
        relation: Callable[[], isl.Map] = functools.partial(_ordered, s, d, cache)
        found: tuple = boxed
    else:
        key = ("fixed pair", s.domain_key, d.domain_key, m, strict) \
            if s.domain_key and d.domain_key else ("fixed pair", s.id, d.id)
        got = cache.get(key)
        if got is None:
            rel = program_order(s, d, cache)
            if rel.is_empty():
                got = cache[key] = (None, None)
            else:
                got = cache[key] = (coalesced(rel), levels(s, d, rel, cache) if m
                                    else ((), (), True))
        rel, found = got
        if rel is None:
            return None
        relation = functools.partial(named, rel, s, d)
    if len(sa.part_names) == 1 and len(da.part_names) == 1:
        return relation, found, (sa.tensors, da.tensors)
    return relation, found, _meeting_parts(sa, da)


def _box_levels(s: InstrInfo, d: InstrInfo, m: int, strict: bool, cache: dict
                ) -> tuple | None:
    """``levels`` of every instance pair of ``s`` and ``d`` in program order, read off the
    loops where no enclosing condition of either names a loop variable (each domain is then
    the blocks its conditions allow times the box of its loops; the common loops are the same
    ``For`` nodes): a common loop of two or more trips carries pairs at distance 1, pairs
    share all common iterations unless ``s`` is ``d`` or comes after it in the text, and no
    pair exists when no block runs both. ``()`` for no pair; None when a condition names a
    loop variable (isl decides then). Saves building the order relation for most pairs of a
    kernel (GEMM + softmax 1000^3 with tails: 2 704 pairs)."""
    if _loop_guarded(s) or _loop_guarded(d):
        return None
    key = ("meet blocks", s.core, s.conds, d.conds)
    meet = cache.get(key)
    if meet is None:
        meet = cache[key] = not _blocks(s, cache).intersect(_blocks(d, cache)).is_empty()
    carried = tuple((f.var, 1) for f in s.loops[:m] if f.extent > 1)
    if not meet or (strict and not carried):
        return ()
    return tuple(f.var for f in s.loops[:m]), carried, not strict


def _ordered(s: InstrInfo, d: InstrInfo, cache: dict) -> isl.Map:
    """Every instance pair of ``s`` and ``d`` in program order."""
    return coalesced(program_order(s, d, cache))


def _loop_guarded(info: InstrInfo) -> bool:
    """Whether a condition enclosing ``info`` names one of its loop variables."""
    if not info.conds:
        return False
    return any(not c.lhs.vars().isdisjoint(info.loop_vars) for c in info.conds)


def named(rel: isl.Map, s: InstrInfo, d: InstrInfo) -> isl.Map:
    """A relation shared by statements of one shape, in the names of ``s`` and ``d``."""
    return rel.set_tuple_name(isl.dim_type.in_, s.name).set_tuple_name(isl.dim_type.out, d.name)


def common_depth(s: InstrInfo, d: InstrInfo) -> int:
    """How many enclosing loops ``s`` and ``d`` share."""
    n = 0
    for a, b in zip(s.loop_paths, d.loop_paths, strict=False):
        if a != b:
            break
        n += 1
    return n


def levels(s: InstrInfo, d: InstrInfo, rel: isl.Map, cache: dict
           ) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...], bool]:
    """Common loops, (loop, min distance) per carrying level, and loop independence
    (``cache``: projections of a statement onto its first loops, kept across calls)."""
    m = common_depth(s, d)
    common = tuple(f.var for f in s.loops[:m])
    deltas = rel.apply_domain(_projection(s, m, cache)).apply_range(
        _projection(d, m, cache)).deltas()
    carried: list[tuple[str, int]] = []
    for j in range(1, m + 1):
        part = deltas.intersect(_level_set(m, j))
        if not part.is_empty():
            carried.append((common[j - 1], int(part.dim_min_val(j).to_python())))
    indep = not deltas.intersect(_level_set(m, m + 1)).is_empty()
    return common, tuple(carried), indep


def _projection(info: InstrInfo, m: int, cache: dict) -> isl.Map:
    """``S[block, loops...] -> L[block, first m loops]``."""
    key = ("projection", info.id, m)
    got = cache.get(key)
    if got is None:
        names = [f"v{j}" for j in range(len(info.loops) + 1)]
        got = cache[key] = isl.Map(f"{{ {info.name}[{', '.join(names)}] -> "
                                   f"L[{', '.join(names[:m + 1])}] }}")
    return got


@functools.lru_cache(maxsize=256)
def _level_set(m: int, j: int) -> isl.Set:
    """Distance vectors ``(block, loop 1..m)`` zero before position ``j`` and positive at it
    (``j = m + 1``: all zero, loop independent)."""
    dims = ", ".join(f"d{i}" for i in range(m + 1))
    cons = " and ".join([f"d{i} = 0" for i in range(min(j, m + 1))]
                        + ([f"d{j} > 0"] if j <= m else []))
    return isl.Set(f"{{ L[{dims}] : {cons} }}")
