"""The Cube directives of the general ``Schedule``: their records and the checks made when
they are given (what can be told from the algorithm and the records so far). Whether the whole
loop structure is one the Cube builder builds is ``cube_resolve.py``'s question, asked when
the schedule is lowered (the directives may come in any order).

    s = (Schedule(gemm(1024, 1024, 1024))
         .tile("C", ("i", "j"), (128, 256))     # output tiles of 128 x 256
         .split("C", "k", 256)                  # k_o: the L1 K step
         .split("C", "k_i", 64)                 # k_i_o: the L0 K step
         .tensorize("C", "k_i_i", "mmad")       # the contraction under k_i_i is one Mmad
         .cache_read("A", "L1", at=("C", "k_o"), copies=2)
         .cache_read("B", "L1", at=("C", "k_o"), copies=2)
         .cache_read("A", "L0A", at=("C", "k_i_o"), copies=2)
         .cache_read("B", "L0B", at=("C", "k_i_o"), copies=2)
         .fuse("C", "i_o", "j_o").bind("C", "i_o_j_o", 24)
         .swizzle("C", "i_o_j_o", 4, "i"))      # strips of 4 tiles along i

``place(stage, unit)`` puts a stage on the ``"cube"`` (contractions only), the ``"vector"``
cores or the ``"fixpipe"`` (a cast, a ReLU, a per-column bias or scale on the Cube's way
out). For the tensorized stage it places the steps its body applies after the sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ascendsched.algo.expr import Reduce, ReduceVar
from ascendsched.algo.gemm_epilogue import is_matmul_stage, reduces, walk
from ascendsched.errors import ScheduleError, UnsupportedError
from ascendsched.schedule.cube_plan import cube_split, matched

if TYPE_CHECKING:
    from ascendsched.schedule.schedule import Schedule, Split
    from ascendsched.target import Target


@dataclass(frozen=True)
class Tensorize:
    """The contraction of ``stage`` under ``loop`` (its innermost reduce loop) runs as one
    ``intrinsic`` (``"mmad"``: L0C += L0A x L0B)."""

    stage: str
    loop: str
    intrinsic: str


@dataclass(frozen=True)
class Place:
    """``stage`` runs on ``unit``; ``rows``/``vector_cores``: a Vector epilogue's rows per step
    and Vector cores per tile (``GemmSchedule.epilogue_on``)."""

    stage: str
    unit: str
    rows: int | None = None
    vector_cores: int = 2


@dataclass(frozen=True)
class CacheRead:
    """Input ``tensor`` staged in ``scope`` with ``copies``, loaded once per iteration of
    ``at_loop`` of ``at_stage`` (None: where the scope's level puts it)."""

    tensor: str
    scope: str
    at_stage: str | None = None
    at_loop: str | None = None
    copies: int = 1


@dataclass(frozen=True)
class CacheWrite:
    """``stage``'s result staged in ``scope`` (``"L0C"``, or ``"workspace"``: the GM slots
    between the Cube and a Vector epilogue) with ``copies``."""

    stage: str
    scope: str
    copies: int = 1


@dataclass(frozen=True)
class TileSwizzle:
    """The order of the tiles of ``loop`` (the stage's tile loop): strips of ``width`` tiles
    along output axis ``axis`` (CATLASS ``GemmIdentityBlockSwizzle``)."""

    stage: str
    loop: str
    width: int
    axis: str


CubeDirective = Tensorize | Place | CacheRead | CacheWrite | TileSwizzle
CUBE_RECORDS = (Tensorize, Place, CacheRead, CacheWrite, TileSwizzle)
INTRINSICS = ("mmad",)
UNITS = ("cube", "vector", "fixpipe")
CUBE_SCOPES = ("L1", "L0A", "L0B", "L0C", "workspace")


def reduce_var_of(s: Schedule, stage: str) -> ReduceVar | None:
    """The one reduce axis of ``stage``'s one reduction (None: none, or several)."""
    t = s.algo.tensor(stage)
    assert t.op is not None
    sums = [e for e in walk(t.op.body) if isinstance(e, Reduce)]
    return sums[0].axes[0] if len(sums) == 1 and len(sums[0].axes) == 1 else None


def reduce_axis_of(s: Schedule, stage: str) -> str | None:
    """The name of :func:`reduce_var_of`."""
    kv = reduce_var_of(s, stage)
    return kv.name if kv is not None else None


def splits_of(s: Schedule, stage: str) -> list[Split]:
    from ascendsched.schedule.schedule import Split

    return [d for d in s.directives if isinstance(d, Split) and d.stage == stage]


def derived_loops(s: Schedule, stage: str, axis: str) -> list[str]:
    """``axis`` and every loop its splits made, in the order they were made."""
    out = [axis]
    for d in splits_of(s, stage):
        if d.axis in out:
            out += [d.outer, d.inner]
    return out


def make_tensorize(s: Schedule, stage: str, loop: str, intrinsic: str) -> Tensorize:
    call = f"tensorize('{stage}', '{loop}', {intrinsic!r})"
    t = s._stage(stage, "tensorize")
    if intrinsic not in INTRINSICS:
        raise ScheduleError(f"{call}: the intrinsic is one of {', '.join(map(repr, INTRINSICS))}")
    if any(isinstance(d, Tensorize) for d in s.directives):
        raise ScheduleError(f"{call}: a stage is already tensorized; the Cube builder runs one "
                            f"contraction per kernel: give tensorize() once")
    k = reduce_axis_of(s, stage)
    if not is_matmul_stage(t) or k is None:
        raise ScheduleError(
            f"{call}: stage '{stage}' is not a contraction (a sum over one reduce axis of a "
            f"product of two input matrices), so Mmad cannot compute it; leave it to the "
            f"Vector cores (remove tensorize), or tensorize the stage holding the sum")
    k_loops = derived_loops(s, stage, k)
    if loop not in k_loops:
        raise ScheduleError(
            f"{call}: loop '{loop}' of '{stage}' is not a contraction loop (not over its reduce "
            f"axis '{k}'); Mmad runs the contraction under a loop over '{k}': tensorize "
            f"'{k_loops[-1]}' (the loops over '{k}' so far: {', '.join(k_loops)})")
    try:
        cube_split(s.algo, None)
    except UnsupportedError as e:
        raise UnsupportedError(f"{call}: the Cube cannot run this contraction: {e}") from None
    return Tensorize(stage, loop, intrinsic)


def check_vector_step(call: str, unit: str, rows: int | None, vector_cores: int,
                      target: Target) -> None:
    """The ``rows`` and ``vector_cores`` of an epilogue placement (``place`` and its sugar
    ``GemmSchedule.epilogue_on``; ``call``: the call up to its unit, for the message)."""
    if rows is not None and (unit != "vector" or not isinstance(rows, int)
                             or isinstance(rows, bool) or rows < 1):
        raise ScheduleError(f"{call}, rows={rows!r}): rows is a positive int and only for "
                            f"the 'vector' unit")
    if vector_cores not in (1, 2) or isinstance(vector_cores, bool) or (
            vector_cores != 2 and unit != "vector"):
        raise ScheduleError(f"{call}, vector_cores={vector_cores!r}): a block of "
                            f"{target.name} has {target.aiv_per_aic} Vector cores per Cube "
                            f"core and mixed kernels pair them 1:2 or 1:1; use "
                            f"vector_cores=2 (each half of a tile's rows) or 1, and only for "
                            f"the 'vector' unit")


def make_place(s: Schedule, stage: str, unit: str, rows: int | None, vector_cores: int
               ) -> Place:
    call = f"place('{stage}', {unit!r})"
    t = s._stage(stage, "place")
    if unit not in UNITS:
        raise ScheduleError(f"{call}: the unit is one of {', '.join(map(repr, UNITS))}")
    check_vector_step(f"place('{stage}', {unit!r}", unit, rows, vector_cores, s.target)
    assert t.op is not None
    contraction = is_matmul_stage(t) and reduce_axis_of(s, stage) is not None
    if unit == "cube" and not contraction:
        raise UnsupportedError(
            f"{call}: the Cube runs only contractions (a sum of products of two input "
            f"matrices, through tensorize); stage '{stage}' is not one: place it on 'vector'"
            + (" or 'fixpipe' (a cast, ReLU or per-column bias/scale after a contraction)"
               if not reduces(t) else ""))
    if unit == "fixpipe":
        if reduces(t) and not contraction:
            raise UnsupportedError(
                f"{call}: stage '{stage}' is a reduction; the Fixpipe applies only "
                f"elementwise steps (a cast, ReLU, a per-column bias or scale) to the Cube's "
                f"result on its way out: place it on 'vector'")
        try:  # the Cube core applies the steps up to this stage on its way out
            if t is s.algo.outputs[0]:
                matched(s.algo)
            else:
                cube_split(s.algo, "vector", stage)
        except UnsupportedError as e:
            raise UnsupportedError(
                f"{call}: the Cube core cannot apply the steps up to '{stage}' on its way out "
                f"(a bias through the Mmad bias table, a cast, ReLU or per-column scale on the "
                f"Fixpipe): {e}. Place '{stage}' and the steps after it on 'vector'") from None
    return Place(stage, unit, rows, vector_cores)


def make_cache_read(s: Schedule, tensor: str, scope: str, at: tuple[str, str] | None,
                    copies: int) -> CacheRead:
    call = f"cache_read('{tensor}', {scope!r})"
    t = s.algo.tensor(tensor)
    if not t.is_placeholder:
        raise ScheduleError(f"{call}: '{tensor}' is a stage, not an input; stage a stage's "
                            f"result with cache_write('{tensor}', ...)")
    if scope not in ("L1", "L0A", "L0B"):
        raise ScheduleError(f"{call}: an input is staged in 'UB' (Vector path), 'L1', 'L0A' or "
                            f"'L0B' (a tensorized stage's operands)")
    _check_copies(call, copies)
    if at is None:
        return CacheRead(tensor, scope, None, None, copies)
    if not (isinstance(at, tuple) and len(at) == 2):
        raise ScheduleError(f"{call}: at=(stage, loop), e.g. at=('C', 'k_o'); got {at!r}")
    st, loop = at
    s._stage(st, "cache_read")
    names = _all_loops(s, st)
    if loop not in names:
        raise ScheduleError(f"{call}: at=({st!r}, {loop!r}): '{st}' has no loop '{loop}'; its "
                            f"loops: {', '.join(names)}")
    return CacheRead(tensor, scope, st, loop, copies)


def make_cache_write(s: Schedule, stage: str, scope: str, copies: int) -> CacheWrite:
    call = f"cache_write('{stage}', {scope!r})"
    s._stage(stage, "cache_write")
    if scope not in ("L0C", "workspace"):
        raise ScheduleError(f"{call}: a stage's result is staged in 'UB' (Vector path), 'L0C' "
                            f"(a tensorized stage's accumulator) or 'workspace' (its GM slots "
                            f"for a Vector epilogue)")
    if scope == "workspace":
        check_workspace_copies(f"{call}: copies={copies!r}", copies, s.target)
    else:
        _check_copies(call, copies)
    return CacheWrite(stage, scope, copies)


def make_swizzle(s: Schedule, stage: str, loop: str, width: int, axis: str) -> TileSwizzle:
    call = f"swizzle('{stage}', '{loop}', {width!r}, {axis!r})"
    t = s._stage(stage, "swizzle")
    loops = s.loop_names(stage)
    if loop not in loops:
        raise ScheduleError(f"{call}: '{loop}' is not a tile loop of '{stage}'; its tile loops: "
                            f"{', '.join(loops) or '(none: split an axis first)'}")
    axes = s._axes(t)
    if axis not in axes:
        raise ScheduleError(f"{call}: '{axis}' is not an axis of '{stage}'; its axes: "
                            f"{', '.join(axes)}")
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise ScheduleError(f"{call}: the strip width must be an int >= 1")
    return TileSwizzle(stage, loop, width, axis)


def check_vector_schedule(s: Schedule) -> None:
    """A schedule without a tensorized stage uses no Cube directive and splits output axes
    once each, and a reduce axis once (chunks of the reduction, ``schedule/chunks.py``)."""
    from ascendsched.schedule.chunks import chunk_axis

    for d in s.directives:
        if isinstance(d, CUBE_RECORDS):
            raise ScheduleError(
                f"{d!r} is a Cube directive but no stage of '{s.algo.name}' is tensorized; "
                f"add tensorize(<contraction stage>, <its innermost reduce loop>, 'mmad') or "
                f"remove it")
    for st in s.algo.stages:
        axes = s._axes(st)
        k = chunk_axis(s, st.name)
        for d in splits_of(s, st.name):
            if d.axis in axes or d.axis == k:
                continue
            call = f"split('{d.stage}', '{d.axis}', {d.factor})"
            if d.axis == reduce_axis_of(s, st.name):
                raise ScheduleError(
                    f"{call}: '{d.stage}' is a contraction, whose reduce axis splits into the "
                    f"Cube's K steps: add tensorize('{d.stage}', <innermost reduce loop>, "
                    f"'mmad'), or split only its output axes ({', '.join(axes)})")
            chunks = f", and its reduce axis '{k}' once (chunks)" if k else ""
            raise ScheduleError(
                f"{call}: the Vector path splits output axes ({', '.join(axes)}) once "
                f"each{chunks}; split loops are split again only in a tensorized stage "
                f"(tensorize('{d.stage}', <innermost reduce loop>, 'mmad'))")


def _all_loops(s: Schedule, stage: str) -> list[str]:
    t = s.algo.tensor(stage)
    names = list(s._axes(t))
    k = reduce_axis_of(s, stage)
    names += [k] if k is not None else []
    names += [n for d in splits_of(s, stage) for n in (d.outer, d.inner)]
    return names + [n for n, _ in s.loop_nest(stage).loops if n not in names]


def check_workspace_copies(head: str, copies: int, target: Target) -> None:
    """Workspace slots: the slot-free cross-core flag starts with one set per slot, and a flag
    counts at most ``cross_flag_max_pending`` pending sets. ``head`` starts the message (the
    call as the user spelled it)."""
    cap = target.cross_flag_max_pending
    if not isinstance(copies, int) or isinstance(copies, bool) or not 1 <= copies <= cap:
        raise ScheduleError(
            f"{head}: the slot-free cross-core flag starts with one set per slot and "
            f"{target.name} counts at most {cap} pending sets per flag; use 1 <= copies <= {cap}")


def _check_copies(call: str, copies: int) -> None:
    if isinstance(copies, bool) or copies not in (1, 2):
        raise ScheduleError(f"{call}: copies={copies!r}: 1 (single) or 2 (double buffering)")
