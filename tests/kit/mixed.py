"""Checks shared by the tests of mixed kernels synchronised through a template or mirrors
(``tests/lower/test_sync_template.py``, ``tests/lower/test_class_mirror.py``)."""

from __future__ import annotations

from ascendsched.api.check import check
from ascendsched.lower.cross_core_sync import leave_to_cross
from ascendsched.lower.happens_before import unordered_dependences
from ascendsched.lower.ir import Kernel
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import lower
from ascendsched.lower.polyhedral import analyze_dependences


def lowered(sched) -> tuple[Kernel, PassLog]:  # noqa: ANN001
    """The lowered kernel and the log of its steps."""
    log = PassLog()
    return lower(sched, log=log), log


def assert_own_oracle_orders_all(log: PassLog) -> None:
    """The kernel's own oracle, on its own dependences (less those the cross-core channels
    order), finds nothing unordered in the kernel the template's syncs went into."""
    synced, cross = log.results["template syncs"], log.results["cross-core plan"]
    deps = leave_to_cross(analyze_dependences(synced), cross, synced)
    assert unordered_dependences(synced, deps, synced.target, by_channel=False) == ()


def assert_ladder_passes(sched, k: Kernel, *, reduce: bool) -> None:  # noqa: ANN001
    """Every rung of ``check`` but g++ passes on ``k``."""
    verdicts = check(sched, cpp=False, kernel=k, reduce=reduce)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
