"""Online normaliser: a row sum of ``exp(... - max)`` reduced in the row max's chunk loop.

A softmax whose rows UB cannot hold reads them in chunks (``schedule/chunks.py``), once per
statistic: the max over every chunk, then the sum of ``exp(x - max)`` over every chunk, then
the output. ``online("s", "mx")`` reduces both statistics in one pass over the chunks, the
running sum rescaled whenever the running max grows (Milakov & Gimelshein, "Online normalizer
calculation for softmax", 2018; the running max of FlashAttention)::

    mx = -inf; s = 0
    for each chunk c of the row:
        top = max(mx, max(c))
        s = s * exp(mx - top)            # the sum so far, against the new max
        mx = top
        s = s + sum(exp(c - mx))

so a row is read twice instead of three times. What it computes is the algorithm's
``sum_k exp(x_k - max_k x_k)``: after the last chunk ``mx`` is the row's max, and each term
was scaled from the max of its time to it (up to float rounding; every exponent stays <= 0,
so nothing overflows). Legal when ``max_stage`` is one max-reduction and ``stage`` one
sum-reduction whose body, with the row-wide stages inlined, is ``exp(A - max_stage[row])``
(``A`` not reading ``max_stage``), both read in chunks of one width and computed at one loop
(``lower/chunked_reduce.py`` builds the loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ascendsched.algo.algorithm import Algorithm, loads
from ascendsched.algo.check import inlined
from ascendsched.algo.expr import Binary, Expr, Load, Reduce, Unary
from ascendsched.algo.gemm_epilogue import reduces
from ascendsched.algo.tensor import Tensor
from ascendsched.errors import ScheduleError
from ascendsched.schedule.chunks import chunk_split

if TYPE_CHECKING:
    from ascendsched.schedule.schedule import Schedule


@dataclass(frozen=True)
class Online:
    """``stage``'s sum reduced in ``max_stage``'s chunk loop, rescaled (module docstring)."""

    stage: str
    max_stage: str


def online_form(body: Expr, mx: Tensor, st: Tensor) -> str | None:
    """Why ``body`` (stage ``st``'s, its row-wide producers inlined) is not a sum of
    ``exp(A - mx[row])`` an online loop can rescale, or None when it is."""
    red = body
    if not isinstance(red, Reduce) or red.op != "sum" or len(red.axes) != 1:
        return f"'{st.name}' is not one sum-reduction of one axis"
    e = red.body
    if not (isinstance(e, Unary) and e.op == "exp" and isinstance(e.x, Binary)
            and e.x.op == "sub" and isinstance(e.x.b, Load) and e.x.b.tensor is mx):
        return (f"the sum of '{st.name}' is not of exp(... - {mx.name}[...]), the one form a "
                f"new max rescales by a factor (exp(old - new))")
    row = tuple(st.op.axes)  # type: ignore[union-attr]
    if tuple(e.x.b.indices) != row:
        return f"'{st.name}' reads {mx.name} at other subscripts than its own row's"
    if any(ld.tensor is mx for ld in loads(e.x.a)):
        return f"the sum of '{st.name}' reads {mx.name} beside the one subtraction"
    return None


def _row_wide(algo: Algorithm) -> set[str]:
    """The stages a chunked statistic reads inlined: every stage that does not reduce."""
    return {t.name for t in algo.stages if not reduces(t)}


def online_pairs(algo: Algorithm) -> list[tuple[str, str]]:
    """(sum stage, max stage) of every pair ``online`` may join in ``algo`` (its row-wide
    stages inlined, as a chunked schedule has them)."""
    out = []
    names = _row_wide(algo)
    maxes = [t for t in algo.stages if _is_max(t)]
    for st in algo.stages:
        if not reduces(st) or st in maxes:
            continue
        body = inlined(st.op.body, names)  # type: ignore[union-attr]
        for mx in maxes:
            if (tuple(mx.shape) == tuple(st.shape) and online_form(body, mx, st) is None
                    and _extent(body) == _extent(mx.op.body)):  # type: ignore[union-attr]
                out.append((st.name, mx.name))
    return out


def join_online(s: Schedule) -> Schedule:
    """``s`` with every ``online_pairs`` pair it reads in chunks of one width at one loop
    joined (``joinable``): the default schedule's and the tuner's choice."""
    for st, mx in online_pairs(s.algo):
        if joinable(s, st, mx):
            s = s.online(st, mx)
    return s


def _is_max(t: Tensor) -> bool:
    """Whether stage ``t`` is one max-reduction of one axis, its whole body."""
    red = t.op.body  # type: ignore[union-attr]
    return isinstance(red, Reduce) and red.op == "max" and len(red.axes) == 1


def _extent(red: Expr) -> int:
    """The extent of the reduce axis of a one-axis reduction."""
    assert isinstance(red, Reduce)
    return int(red.axes[0].extent)


def online_record(s: Schedule, stage: str, max_stage: str) -> Online:
    """The record of ``s.online(stage, max_stage)``, checked (module docstring's rules)."""
    call = f"online('{stage}', '{max_stage}')"
    st, mx = s._stage(stage, "online"), s._stage(max_stage, "online")
    if any(isinstance(d, Online) and {d.stage, d.max_stage} & {stage, max_stage}
           for d in s.directives):
        raise ScheduleError(f"{call}: '{stage}' or '{max_stage}' is in an online pair already")
    if not _is_max(mx):
        raise ScheduleError(
            f"{call}: '{max_stage}' must be one max-reduction (its whole body), the running "
            f"max the sum is rescaled by; it is {mx.op.body}")  # type: ignore[union-attr]
    if tuple(mx.shape) != tuple(st.shape):
        raise ScheduleError(f"{call}: '{stage}' {list(st.shape)} and '{max_stage}' "
                            f"{list(mx.shape)} are not statistics of the same rows")
    body = inlined(st.op.body, _row_wide(s.algo))  # type: ignore[union-attr]
    why = online_form(body, mx, st)
    if why is not None:
        raise ScheduleError(f"{call}: {why}")
    splits = {n: chunk_split(s, n) for n in (stage, max_stage)}
    for n, d in splits.items():
        if d is None:
            raise ScheduleError(
                f"{call}: '{n}' is not read in chunks; split the reduce axis of both stages "
                f"by one factor first, e.g. split('{n}', <reduce axis>, 8000) (a row that UB "
                f"holds whole needs no online pass: it is read once already)")
    a, b = splits[stage], splits[max_stage]
    assert a is not None and b is not None
    ext = [_extent(body), _extent(mx.op.body)]  # type: ignore[union-attr]
    if a.factor != b.factor or ext[0] != ext[1]:
        raise ScheduleError(
            f"{call}: the chunks differ ('{stage}' {a.factor} of {ext[0]}, '{max_stage}' "
            f"{b.factor} of {ext[1]}); one loop reads both: split them by one factor")
    if not _at_one_loop(s, stage, max_stage):
        raise ScheduleError(
            f"{call}: both statistics must be computed at one tile loop (compute_at each "
            f"at the same consumer and loop) before they can share a chunk loop")
    return Online(stage, max_stage)


def joinable(s: Schedule, stage: str, max_stage: str) -> bool:
    """Whether ``s`` reads both statistics of an ``online_pairs`` pair in chunks of one
    width at one loop (what ``online`` asks of the schedule)."""
    a, b = chunk_split(s, stage), chunk_split(s, max_stage)
    return a is not None and b is not None and a.factor == b.factor and \
        _at_one_loop(s, stage, max_stage)


def _at_one_loop(s: Schedule, a: str, b: str) -> bool:
    from ascendsched.schedule.schedule import ComputeAt

    pa, pb = s.placement(a), s.placement(b)
    return isinstance(pa, ComputeAt) and isinstance(pb, ComputeAt) and (
        pa.consumer, pa.loop) == (pb.consumer, pb.loop)


def online_of(s: Schedule) -> dict[str, str]:
    """Sum stage -> max stage of every ``online`` record of ``s``."""
    return {d.stage: d.max_stage for d in s.directives if isinstance(d, Online)}
