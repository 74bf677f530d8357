"""Sync and UB report per library kernel, against bishengir 1.2.0 (triton-ascend, 910B4).

Each kernel is one tile (the shapes of the issue's comparison), so counts are "per tile":
set/wait pairs, PipeBarriers and PIPE_ALL executed, UB peak after memory planning against the
sum of all buffers, the time lowering + analysis takes, and how many inserted syncs could be
removed with the trace checker still clean (sensitivity: target 0).
Run: python benchmarks/sync_report.py
"""

from __future__ import annotations

import time

from ascendsched.algo import library as L
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import lower
from ascendsched.lower.sync_stats import sync_stats
from ascendsched.schedule import Schedule
from ascendsched.target import Scope

# bishengir 1.2.0 via triton-ascend on 910B4, per tile (from the issue):
# (set/wait pairs, barriers, PIPE_ALL, UB KB)
BISHENGIR = {
    "vadd": (2, 0, 1, 32), "mul_add_relu": (3, 2, 1, 48), "softmax": (2, 6, 1, 81),
    "rmsnorm": (13, 13, 1, 164), "layernorm": (23, 37, 1, 190),
}


def one_tile(name: str) -> Schedule:
    algo = {"vadd": lambda: L.vadd(8192), "mul_add_relu": lambda: L.fused_mul_add_relu(8192),
            "softmax": lambda: L.softmax(8, 1024), "rmsnorm": lambda: L.rmsnorm(8, 1024),
            "layernorm": lambda: L.layernorm(8, 1024)}[name]()
    s = Schedule(algo)
    out = algo.outputs[0].name
    for st in algo.stages:
        if st.name != out:
            s = s.compute_at(st.name, out, "root")
    return s


def main() -> None:
    print(f"{'kernel':<14}{'set/wait':>9}{'barriers':>9}{'PIPE_ALL':>9}{'UB peak':>10}"
          f"{'all bufs':>10}{'analysis':>10}{'removable':>10}   "
          "bishengir (pairs, barriers, PIPE_ALL, UB)")
    for name, ref in BISHENGIR.items():
        log = PassLog()
        t0 = time.perf_counter()
        k = lower(one_tile(name), log=log)
        dt = time.perf_counter() - t0
        st = sync_stats(k)
        plan = log.results["memory plan"]
        removable = len(sync_minimality(one_tile(name)).removable)
        print(f"{name:<14}{st['sets']:>9}{st['barriers']:>9}{st['pipe_all']:>9}"
              f"{plan.peak(Scope.UB) / 1024:>8.1f}KB{plan.total(Scope.UB) / 1024:>8.1f}KB"
              f"{dt:>9.2f}s{removable:>10}   {ref[0]}, {ref[1]}, {ref[2]}, {ref[3]} KB")


if __name__ == "__main__":
    main()
