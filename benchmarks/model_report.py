"""Modelled time of every library kernel at user sizes, with its default schedule.

Prints per kernel: modelled time, roofline time, their ratio, the share of the target peak it
reaches (Cube peak for GEMMs, the HBM roofline for vector kernels), the critical pipe, the
model's evaluation time and the lowering time; a default that misses its target (GEMM 4096^3:
85% of Cube peak; vector kernels: 80% of the HBM roofline) says which pipe limits it.
``--full`` also runs the full event simulation (every block, every iteration) and prints how
far the fast path is from it. Figures are modelled (sim/timing.py), not measured.

Run: python benchmarks/model_report.py [--full] [--only NAME]
"""

from __future__ import annotations

import argparse
import sys
import time

from ascendsched.algo import library as L
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.sim.timing import PIPE_NAMES, model_time, parameter_line
from ascendsched.target import DEFAULT_TARGET

V8, V4 = (8192, 8192), (4096, 4096)
CASES = [
    ("vadd", "8192x8192", lambda: L.vadd(8192 * 8192)),
    ("vadd", "4096x4096", lambda: L.vadd(4096 * 4096)),
    ("mul_add_relu", "8192x8192", lambda: L.fused_mul_add_relu(8192 * 8192)),
    ("mul_add_relu", "4096x4096", lambda: L.fused_mul_add_relu(4096 * 4096)),
    ("bias_add", "8192x8192", lambda: L.bias_add(*V8)),
    ("bias_add", "4096x4096", lambda: L.bias_add(*V4)),
    ("softmax", "8192x8192", lambda: L.softmax(*V8)),
    ("softmax", "4096x4096", lambda: L.softmax(*V4)),
    ("rmsnorm", "8192x8192", lambda: L.rmsnorm(*V8)),
    ("rmsnorm", "4096x4096", lambda: L.rmsnorm(*V4)),
    ("layernorm", "8192x8192", lambda: L.layernorm(*V8)),
    ("layernorm", "4096x4096", lambda: L.layernorm(*V4)),
    ("gemm", "1024^3", lambda: L.gemm(1024, 1024, 1024)),
    ("gemm", "4096^3", lambda: L.gemm(4096, 4096, 4096)),
    ("gemm", "8192^3", lambda: L.gemm(8192, 8192, 8192)),
    ("gemm", "4096x11008x4096", lambda: L.gemm(4096, 11008, 4096)),
    ("gemm_int8", "4096^3", lambda: L.gemm_int8(4096, 4096, 4096)),
    ("batched_gemm", "16x1024^3", lambda: L.batched_gemm(16, 1024, 1024, 1024)),
]
GEMM_TARGET, VECTOR_TARGET = 0.85, 0.80


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="compare with the full simulation")
    ap.add_argument("--only", help="only kernels whose name contains this")
    args = ap.parse_args()
    print(f"# Modelled library kernels on {DEFAULT_TARGET.name} (a model, not measurements)\n")
    print("parameters: " + parameter_line(DEFAULT_TARGET.costs) + "\n")
    head = ("| kernel | size | modelled us | roofline us | ratio | of peak | critical pipe | "
            "eval ms | lower s |" + (" full sim diff |" if args.full else ""))
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    notes = []
    for name, size, make in CASES:
        if args.only and args.only not in name:
            continue
        t0 = time.perf_counter()
        kernel = lower(schedule_for(make()))
        lower_s = time.perf_counter() - t0
        r = model_time(kernel)
        cube = r.roofline.flops > 0
        peak = (r.roofline.cube_s if cube else r.roofline.memory_s) / r.time_s
        row = (f"| {name} | {size} | {r.time_s * 1e6:.1f} | {r.roofline.bound_s * 1e6:.1f} | "
               f"{r.ratio:.2f} | {peak:.0%} {'Cube' if cube else 'HBM'} | {r.critical_pipe} | "
               f"{r.eval_s * 1e3:.0f} | {lower_s:.1f} |")
        if args.full:
            full = model_time(kernel, fast=False)
            row += f" {r.cycles / full.cycles - 1:+.2%} ({full.eval_s:.1f} s) |"
        print(row, flush=True)
        target = GEMM_TARGET if cube else VECTOR_TARGET
        if (not cube or size == "4096^3" and name == "gemm") and peak < target:
            u = r.utilisation()
            what = "Cube peak" if cube else "HBM roofline"
            notes.append(f"- {name} {size}: {peak:.0%} of the {what} (target {target:.0%}); "
                         f"limited by {r.critical_pipe} "
                         f"({', '.join(f'{k} {v:.0%}' for k, v in u.items())} busy on the "
                         f"critical core; bound by {r.bound}){_why(r)}")
    if notes:
        print("\nDefaults that miss their target:")
        print("\n".join(notes))
    return 0


def _why(r) -> str:
    """The physical floor behind a miss: the L2 -> L1 traffic of a GEMM at the chip's L2
    rate, or a vector kernel's V work per core against its DMA time."""
    c = DEFAULT_TARGET.costs
    if r.roofline.flops > 0:
        gm = r.traffic.total_read + r.traffic.total_write
        l2_s = gm / c.l2_bytes_per_s
        return (f"; its GM -> L1 reads and writes ({gm / 1e9:.2f} GB) pass L2 at "
                f"{c.l2_bytes_per_s / 1e12:.1f} TB/s: {l2_s * 1e6:.0f} us alone vs "
                f"{r.roofline.cube_s * 1e6:.0f} us of Cube work")
    core = r.critical_core()
    busy = dict(zip(PIPE_NAMES, core.busy))
    return (f"; the busiest core's V work is {busy['V'] / r.clock_hz * 1e6:.1f} us vs "
            f"{busy['MTE2'] / r.clock_hz * 1e6:.1f} us of loads")


if __name__ == "__main__":
    sys.exit(main())
