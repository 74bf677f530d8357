"""Tuned schedules as Python a user can paste: a function that rebuilds the schedule.

The directive lines come from the schedules' own printers (``GemmSchedule.__str__`` and
``schedule/printer.py``), so the code and the schedule cannot disagree.
"""

from __future__ import annotations

from ascendsched.autotune.evaluate import AnySchedule, Evaluation
from ascendsched.schedule.gemm import GemmSchedule


def schedule_code(sched: AnySchedule, algo_code: str = "algo", *, func: str = "schedule",
                  imports: str = "", comment: str = "", with_imports: bool = True) -> str:
    """``def func(): algo = <algo_code>; return <the schedule's calls>`` as source text (the
    local is ``algo_`` when ``algo_code`` calls a function named ``algo``)."""
    cls = "GemmSchedule" if isinstance(sched, GemmSchedule) else "Schedule"
    mod = "ascendsched.schedule.gemm" if cls == "GemmSchedule" else "ascendsched.schedule"
    calls = [ln.strip() for ln in str(sched).splitlines()[1:]]
    head = [f"from {mod} import {cls}"] + ([imports] if imports else [])
    head = head + ["", ""] if with_imports else []
    body = [f"def {func}() -> {cls}:"]
    if comment:
        body += [f"    # {ln}" for ln in comment.splitlines()]
    # the local name must not be the function algo_code calls (``algo = algo()`` would
    # raise UnboundLocalError)
    var = "algo_" if algo_code.split("(", 1)[0].strip() == "algo" else "algo"
    body.append(f"    {var} = {algo_code}")
    if not calls:
        body.append(f"    return {cls}({var})")
    else:
        body.append(f"    return ({cls}({var})")
        body += [f"            {c}" for c in calls[:-1]]
        body.append(f"            {calls[-1]})")
    return "\n".join(head + body) + "\n"


def figures_comment(ev: Evaluation, speedup: float | None = None) -> str:
    """One line of modelled figures for a printed schedule."""
    s = (f"modelled {ev.time_s * 1e6:.2f} us, {ev.of_peak:.1%} of the roofline "
         f"({ev.limit}), critical pipe {ev.critical_pipe}")
    if speedup is not None and speedup == speedup:
        s += f", {speedup:.2f}x the default schedule"
    return s + " (modelled, not measured)"


def library_imports(algo_code: str) -> str:
    """``from ascendsched.algo.library import f`` for an ``algo_code`` of ``f(...)``."""
    name = algo_code.split("(", 1)[0]
    return f"from ascendsched.algo.library import {name}" if name.isidentifier() else ""
