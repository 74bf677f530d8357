"""``sync_minimality``: each inserted sync removed in turn, to show that it is needed.

A sync channel (a set/wait pair with its prologue sets and epilogue waits, or a barrier) is
dropped from the kernel as ``remove redundant syncs`` leaves it (each sync still carries its
channel), event ids are allocated again, and the trace checker (``sim/checker.py``) replays
the result on random inputs. A channel whose removal leaves no race, flag error or deadlock is
``removable``: the sync passes should not have placed it. The target is none removable.

A mixed kernel's cross-core channels (``lower/cross_core_sync.py``) are in every trial kernel,
and each is dropped in turn too (all sets and waits of its flag); a trial the simulator cannot
finish (a cross-core deadlock) needs the channel.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched.algo.algorithm import Algorithm
from ascendsched.api.numerics import random_inputs
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.allocate_event_ids import allocate_event_ids
from ascendsched.lower.cross_core_sync import CrossPlan, insert_cross_sync
from ascendsched.lower.ir import Kernel, iter_instrs
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import PLANNED, lower
from ascendsched.lower.remove_redundant_sync import channels_of, drop_channels
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_ir import Sync
from ascendsched.lower.sync_template import apply_template_syncs
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
    epilogue, or a barrier) and run the trace checker on the result. When the sync steps ran
    on a GEMM's template (``lower/sync_template.py``), a channel is dropped from the template
    and the kernel that ships, with the template's syncs in every tile class, is checked."""
    sched = schedule_for(obj)
    log = PassLog()
    lower(sched, log=log)
    pruned = log.results["remove redundant syncs"].kernel  # each sync still has its channel
    kernel, tmpl = log.results[PLANNED], log.results["sync template"]
    if log.results["template syncs"] is None:  # the kernel was synchronised alone after all
        tmpl = kernel
    target = pruned.target
    inputs = random_inputs(sched.algo, seed)
    cross = log.results["cross-core plan"]

    def shipped(synced: Kernel, plan: CrossPlan = cross) -> Kernel:
        got = apply_template_syncs(kernel, tmpl, synced, sched)
        assert got is not None  # dropping a channel leaves every other sync's place
        return insert_cross_sync(got, plan)

    removable: list[str] = []
    chans = channels_of(pruned)
    for ch in chans:
        trial = allocate_event_ids(drop_channels(pruned, frozenset([ch])), target, verify=False)
        if _clean(shipped(trial), inputs):
            removable.append(_channel_text(pruned, ch))
    synced = allocate_event_ids(pruned, target, verify=False)
    for c in cross.channels:
        if _clean(shipped(synced, cross.without(c.flag)), inputs):
            removable.append(str(c))
    total = len(chans) + len(cross.channels)
    return SyncMinimality(pruned.name, total - len(removable), tuple(removable))


def _clean(k: Kernel, inputs: dict) -> bool:
    """The checker finds no race, flag error or deadlock in ``k``'s trace (a cross-core
    deadlock stops the simulator itself)."""
    try:
        trace = run_kernel(k, inputs, trace=True).trace
    except InternalCompilerError as e:
        if "deadlock" in str(e):
            return False
        raise
    rep = check_trace(trace, k.target)
    return not rep.races and not rep.flag_errors and not rep.deadlocks


def _channel_text(k: Kernel, ch: int) -> str:
    for p in k.programs:
        for ins, _ in iter_instrs(p.body):
            if isinstance(ins, Sync) and ins.channel == ch:
                return str(ins)
    return f"channel {ch}"
