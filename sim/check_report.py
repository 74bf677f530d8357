"""What a trace check reports: races, deadlocks, flag and budget errors, and the report of them.

``sim/checker.py`` finds them; each record names the instructions involved (``EventRef``) and
prints as one line of the report.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched.sim.trace import TraceEvent

__all__ = ["BudgetError", "CheckReport", "Deadlock", "EventRef", "FlagError", "Race"]


@dataclass(frozen=True)
class EventRef:
    """An instruction instance, as a report names it."""

    block: int
    core: str
    seq: int
    op: str
    pipe: str
    label: str = ""

    @staticmethod
    def of(e: TraceEvent) -> EventRef:
        return EventRef(e.block, e.core, e.seq, e.op, e.pipe, e.label)

    def __str__(self) -> str:
        lab = f": {self.label}" if self.label else ""
        return f"{self.op} #{self.seq} [{self.pipe}] (block {self.block} {self.core}{lab})"


@dataclass(frozen=True)
class Race:
    kind: str  # RAW | WAR | WAW (first -> second)
    space: str
    lo: int  # overlapping bytes lie within [lo, hi)
    hi: int
    nbytes: int
    first: EventRef
    second: EventRef

    def __str__(self) -> str:
        return (f"{self.kind} race on {self.space} bytes [{self.lo}, {self.hi}) "
                f"({self.nbytes} B overlap): {self.first} and {self.second} are not ordered")


@dataclass(frozen=True)
class Deadlock:
    event: EventRef
    reason: str

    def __str__(self) -> str:
        return f"deadlock: {self.event} never proceeds: {self.reason}"


@dataclass(frozen=True)
class FlagError:
    kind: str  # double set | unconsumed set | wait without set | illegal event | wrong pipe
    event: EventRef
    message: str
    other: EventRef | None = None

    def __str__(self) -> str:
        other = f" (see {self.other})" if self.other else ""
        return f"flag error ({self.kind}): {self.event}: {self.message}{other}"


@dataclass(frozen=True)
class BudgetError:
    event: EventRef
    message: str

    def __str__(self) -> str:
        return f"budget error: {self.event}: {self.message}"


@dataclass(frozen=True)
class CheckReport:
    races: tuple[Race, ...] = ()
    deadlocks: tuple[Deadlock, ...] = ()
    flag_errors: tuple[FlagError, ...] = ()
    budget_errors: tuple[BudgetError, ...] = ()
    races_truncated: bool = False  # race search stopped at max_races

    @property
    def ok(self) -> bool:
        return not (self.races or self.deadlocks or self.flag_errors or self.budget_errors)

    def summary(self) -> str:
        more = "+" if self.races_truncated else ""
        return (f"{len(self.races)}{more} races, {len(self.deadlocks)} deadlocks, "
                f"{len(self.flag_errors)} flag errors, {len(self.budget_errors)} budget errors")

    def __str__(self) -> str:
        lines = [self.summary()]
        for group in (self.races, self.deadlocks, self.flag_errors, self.budget_errors):
            lines.extend(f"  {x}" for x in group)
        return "\n".join(lines)
