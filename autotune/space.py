"""Search spaces over schedule directives, and the legality check that prunes them.

A :class:`Space` is an algorithm, named parameters with their choices, and a function from a
point (one choice per parameter) to a schedule. A point is *legal* when building its schedule
raises no ScheduleError (the primitives' own checks: fractal granules, alignment, API ranges,
core counts) and ``lower(..., stop_after="apply memory plan")`` accepts it (the loop-nest
builder, the IR verifier, lifetimes and the memory planner's capacity rule). So pruning applies exactly the rules lowering applies, with no
second copy of any limit, and skips the expensive passes (dependences, sync insertion) that an
evaluation runs. Points whose schedules are equivalent (same schedule text, or for a GEMM the
same resolved tiling) are *duplicates*: only the first is legal, the others are counted apart.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ascendsched.algo.algorithm import Algorithm
from ascendsched.errors import AscendSchedError, CapacityError, ScheduleError
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import Schedule
from ascendsched.target import DEFAULT_TARGET, Target

AnySchedule = Schedule | GemmSchedule
Point = tuple[Any, ...]  # one choice per parameter, in the space's parameter order
Mapper = Callable[[Callable[[Any], Any], list[Any]], Iterable[Any]]  # map(fn, items), in order

RULES = ("schedule", "capacity", "unsupported", "duplicate")


@dataclass(frozen=True)
class Param:
    """One tuning knob: its choices, and whether they are ordered (tile sizes, core counts:
    a sampler may treat the index as an integer) or only nominal (a direction, a placement)."""

    name: str
    choices: tuple[Any, ...]
    ordinal: bool = True

    def __post_init__(self) -> None:
        if not self.choices:
            raise ScheduleError(f"search parameter '{self.name}' has no choices")
        if len(set(map(repr, self.choices))) != len(self.choices):
            raise ScheduleError(f"search parameter '{self.name}' repeats a choice: "
                                f"{self.choices}")

    def label(self, value: Any) -> str:
        return repr(value)


@dataclass(frozen=True)
class Checked:
    """The legality verdict of one point: its schedule when legal, else the rule it broke."""

    point: Point
    schedule: AnySchedule | None
    rule: str | None  # None (legal) or one of RULES
    message: str = ""
    same_as: Point | None = None  # a duplicate's equivalent legal point

    @property
    def legal(self) -> bool:
        return self.rule is None


@dataclass(frozen=True)
class PruneReport:
    """Counts of a full enumeration: legal points and pruned ones by rule (with an example)."""

    total: int
    legal: tuple[Checked, ...]
    pruned: Mapping[str, int]
    examples: Mapping[str, str]
    seconds: float

    def summary(self) -> str:
        parts = ", ".join(f"{n} {r}" for r, n in self.pruned.items() if n)
        return (f"{self.total} points: {len(self.legal)} legal, "
                f"{self.total - len(self.legal)} pruned before lowering"
                + (f" ({parts})" if parts else "") + f", checked in {self.seconds:.1f} s")


@dataclass(frozen=True, eq=False)
class Space:
    """A named search space of schedules of ``algo``.

    ``build(algo, choices)`` turns a point (as a name -> value mapping) into a schedule with the
    schedule primitives; it may raise ScheduleError, which prunes the point. ``algo_code`` is
    the Python expression that rebuilds ``algo`` in printed schedules (``autotune/codegen.py``).
    ``seeds`` are points a guided search evaluates first (known-good configurations: a published
    kernel's tiling, the default generator's best estimates); it skips those whose values are
    not choices (after ``restrict``) and prunes illegal ones like any other point.
    """

    name: str
    algo: Algorithm
    params: tuple[Param, ...]
    build: Callable[[Algorithm, Mapping[str, Any]], AnySchedule]
    target: Target = DEFAULT_TARGET
    algo_code: str = "algo"
    seeds: tuple[Point, ...] = ()
    _memo: dict[Point, Checked] = field(default_factory=dict, repr=False, compare=False)
    _seen: dict[str, Point] = field(default_factory=dict, repr=False, compare=False)

    @property
    def size(self) -> int:
        return math.prod(len(p.choices) for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise ScheduleError(f"space '{self.name}' has no parameter '{name}'; its parameters: "
                            + ", ".join(p.name for p in self.params))

    def points(self) -> Iterator[Point]:
        """Every point, in lexicographic order of the parameters' choices."""
        return itertools.product(*(p.choices for p in self.params))

    def as_dict(self, point: Point) -> dict[str, Any]:
        return {p.name: v for p, v in zip(self.params, point)}

    def restrict(self, name: str, values: tuple[Any, ...]) -> Space:
        """The same space with parameter ``name`` limited to ``values`` (each a choice)."""
        p = self.param(name)
        labels = {repr(c): c for c in p.choices} | {str(c): c for c in p.choices}
        keep = []
        for v in values:
            c = labels.get(repr(v), labels.get(str(v)))
            if c is None:
                raise ScheduleError(f"space '{self.name}': {name}={v!r} is not a choice; "
                                    f"choices: {', '.join(map(str, p.choices))}")
            keep.append(c)
        params = tuple(replace(q, choices=tuple(keep)) if q.name == name else q
                       for q in self.params)
        return replace(self, params=params, _memo={}, _seen={})

    def seed_points(self) -> list[Point]:
        """The seeds whose every value is a choice of its parameter, without repeats."""
        out: list[Point] = []
        for pt in self.seeds:
            ok = len(pt) == len(self.params) and all(
                any(repr(v) == repr(c) for c in p.choices) for p, v in zip(self.params, pt))
            if ok and pt not in out:
                out.append(tuple(pt))
        return out

    def schedule(self, point: Point) -> AnySchedule:
        """The schedule of ``point`` (ScheduleError when a primitive rejects it)."""
        return self.build(self.algo, self.as_dict(point))

    def check(self, point: Point) -> Checked:
        """Legality of ``point`` by the schedule's and the planner's rules (memoised; points
        equivalent to an earlier one are duplicates and are not planned again)."""
        point = tuple(point)
        got = self._memo.get(point)
        if got is None:
            built = self._build(point)
            if isinstance(built, Checked):
                got = built
            else:
                key = equivalence_key(built)
                first = self._seen.get(key)
                verdict = (None, "") if first is not None else plan_check(built)
                got = self._record(point, built, *verdict)
            self._memo[point] = got
        return got

    def prune(self, mapper: Mapper | None = None) -> PruneReport:
        """Check every point; the legal ones in enumeration order, the others counted.

        Schedules are built here (cheap); the planner runs once per distinct schedule, through
        ``mapper`` (``autotune/executor.py``: worker processes) when given."""
        t0 = time.perf_counter()
        todo: dict[str, AnySchedule] = {}
        built: dict[Point, Checked | AnySchedule] = {}
        for pt in self.points():
            if pt in self._memo:
                continue
            b = self._build(pt)
            built[pt] = b
            if not isinstance(b, Checked):
                key = equivalence_key(b)
                if key not in self._seen and key not in todo:
                    todo[key] = b
        verdicts = dict(zip(todo, (mapper or map)(plan_check, list(todo.values()))))
        for pt, b in built.items():
            if isinstance(b, Checked):
                self._memo[pt] = b
            else:
                key = equivalence_key(b)
                rule, msg = verdicts[key] if key in verdicts else (None, "")
                self._memo[pt] = self._record(pt, b, rule, msg)
        legal: list[Checked] = []
        pruned = dict.fromkeys(RULES, 0)
        examples: dict[str, str] = {}
        total = 0
        for pt in self.points():
            total += 1
            c = self._memo[pt]
            if c.legal:
                legal.append(c)
            else:
                assert c.rule is not None
                pruned[c.rule] += 1
                examples.setdefault(c.rule, f"{self.as_dict(pt)}: {c.message.splitlines()[0]}")
        return PruneReport(total, tuple(legal), pruned, examples, time.perf_counter() - t0)

    def _build(self, point: Point) -> Checked | AnySchedule:
        try:
            sched = self.schedule(point)
        except CapacityError as e:
            return Checked(point, None, "capacity", str(e))
        except ScheduleError as e:
            return Checked(point, None, "schedule", str(e))
        if sched.target is not self.target:
            sched = replace(sched, target=self.target)
        return sched

    def _record(self, point: Point, sched: AnySchedule, rule: str | None, msg: str) -> Checked:
        """The verdict of ``point`` from its planner verdict; the first point of an equivalence
        class owns the verdict, later ones are duplicates (or share its illegality)."""
        key = equivalence_key(sched)
        first = self._seen.setdefault(key, point)
        if first != point:
            owner = self._memo.get(first)
            if owner is not None and not owner.legal:
                return Checked(point, None, owner.rule, owner.message)
            return Checked(point, sched, "duplicate", f"same schedule as {self.as_dict(first)}",
                           first)
        return Checked(point, sched if rule is None else None, rule, msg)


def plan_check(sched: AnySchedule) -> tuple[str | None, str]:
    """(None, "") when lowering up to the memory plan accepts ``sched``, else (rule, message):
    the loop-nest/GEMM builder, the IR verifier, lifetimes and the planner's capacity rule
    (``lower(..., stop_after="apply memory plan")``), so the limits live only where lowering keeps them."""
    from ascendsched.lower.pipeline import lower

    try:
        with warnings.catch_warnings():  # e.g. buffering not honoured: legal, evaluation tells
            warnings.simplefilter("ignore")
            lower(sched, sched.target, stop_after="apply memory plan")
    except CapacityError as e:
        return "capacity", str(e)
    except ScheduleError as e:
        return "schedule", str(e)
    except AscendSchedError as e:  # UnsupportedError and the like
        return "unsupported", str(e)
    return None, ""


def equivalence_key(sched: AnySchedule) -> str:
    """Schedules with the same key lower to the same kernel: a GEMM's resolved tiling (tiles
    clamped to the problem, cores to the tile count; with a Vector epilogue its Vector cores per
    block, workspace slots and the last stage the Cube core keeps), else the schedule's text."""
    cube = sched.cube  # either spelling of a Cube schedule resolves to its plan
    if cube is not None:
        t = cube.tiling
        split = cube.split
        epi = ((cube.epilogue_vector_cores, cube.copies("workspace"), split.after)
               if split is not None else ())
        return repr((t.tm, t.tn, t.tk, t.k0, t.cores, t.l1_copies, t.l0_copies, t.l0c_copies,
                     t.swizzle) + epi)
    return str(sched)
