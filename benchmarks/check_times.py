"""Compile-and-check time per kernel: `ascendsched check` on each library kernel's default
schedule and the GEMM example, with a cold g++ cache (a fresh temp dir), split into lowering,
IR execution + race check, the g++ build (with -fsanitize=address,undefined) and the C++ run
+ trace comparison. Run: python benchmarks/check_times.py
"""

from __future__ import annotations

import os
import tempfile

os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="ascendsched_bench_")  # cold build cache
tempfile.tempdir = None

import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from ascendsched.algo import library as L  # noqa: E402
from ascendsched.api.check import check  # noqa: E402
from ascendsched.lower.pipeline import lower  # noqa: E402
from ascendsched.lower.schedule_for import schedule_for  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from examples import gemm as gemm_example  # noqa: E402

KERNELS = {
    "vadd 8192": lambda: L.vadd(8192),
    "relu(a*b+c) 8192": lambda: L.fused_mul_add_relu(8192),
    "bias_add 64x1024": lambda: L.bias_add(64, 1024),
    "softmax 64x1024": lambda: L.softmax(64, 1024),
    "rmsnorm 64x1024": lambda: L.rmsnorm(64, 1024),
    "layernorm 64x1024": lambda: L.layernorm(64, 1024),
    "gemm 500x520x300": gemm_example.schedule,
}


def main() -> None:
    print(f"{'kernel':<20}{'lower':>8}{'IR+check':>10}{'g++':>8}{'C++ run':>9}{'total':>8}  verdict")
    for name, make in KERNELS.items():
        sched = schedule_for(make())
        t0 = time.perf_counter()
        k = lower(sched)
        t1 = time.perf_counter()
        check(sched, kernel=k, cpp=False)
        t2 = time.perf_counter()
        full = check(sched, kernel=k)
        t3 = time.perf_counter()
        build = next((v for v in full if v.check.startswith("g++")), None)
        gxx = float(re.search(r"in ([\d.]+) s", build.detail).group(1)) if build else 0.0
        cpp_rest = (t3 - t2) - (t2 - t1) - gxx
        ok = all(v.ok for v in full)
        print(f"{name:<20}{t1 - t0:>7.2f}s{t2 - t1:>9.2f}s{gxx:>7.1f}s{cpp_rest:>8.2f}s"
              f"{t3 - t0:>7.1f}s  {'all PASS' if ok else 'FAIL'} ({len(full)} checks)")


if __name__ == "__main__":
    main()
