"""``sync_minimality``: each inserted sync removed in turn, to show that it is needed.

A sync channel (a set/wait pair with its prologue sets and epilogue waits, or a barrier) is
dropped from the kernel as ``remove redundant syncs`` leaves it (each sync still carries its
channel), event ids are allocated again, and the trace checker (``sim/checker.py``) replays
the result on random inputs. A channel whose removal leaves no race, flag error or deadlock is
``removable``: the sync passes should not have placed it. The target is none removable.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched.algo.algorithm import Algorithm
from ascendsched.api.numerics import random_inputs
from ascendsched.lower.allocate_event_ids import allocate_event_ids
from ascendsched.lower.ir import Kernel, iter_instrs
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import lower
from ascendsched.lower.remove_redundant_sync import channels_of, drop_channels
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_ir import Sync
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import Schedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel


@dataclass(frozen=True)
class SyncMinimality:
    """Each inserted sync removed in turn: ``needed`` ones make the checker report a race or a
    flag error; ``removable`` lists the others (the target is none)."""

    kernel: str
    needed: int
    removable: tuple[str, ...]

    def __str__(self) -> str:
        return (f"{self.kernel}: {self.needed} syncs, each needed; {len(self.removable)} "
                f"removable" + "".join(f"\n  removable: {r}" for r in self.removable))


def sync_minimality(obj: Schedule | GemmSchedule | Algorithm, seed: int = 0) -> SyncMinimality:
    """Drop each sync channel of the lowered ``obj`` (a set/wait pair with its prologue and
    epilogue, or a barrier) and run the trace checker on the result."""
    sched = schedule_for(obj)
    log = PassLog()
    lower(sched, log=log, stop_after="remove redundant syncs")
    pruned = log.results["remove redundant syncs"].kernel  # each sync still has its channel
    target = pruned.target
    inputs = random_inputs(sched.algo, seed)
    removable: list[str] = []
    chans = channels_of(pruned)
    for ch in chans:
        trial = allocate_event_ids(drop_channels(pruned, frozenset([ch])), target, verify=False)
        rep = check_trace(run_kernel(trial, inputs, trace=True).trace, target)
        if not rep.races and not rep.flag_errors and not rep.deadlocks:
            removable.append(_channel_text(pruned, ch))
    return SyncMinimality(pruned.name, len(chans) - len(removable), tuple(removable))


def _channel_text(k: Kernel, ch: int) -> str:
    for p in k.programs:
        for ins, _ in iter_instrs(p.body):
            if isinstance(ins, Sync) and ins.channel == ch:
                return str(ins)
    return f"channel {ch}"
