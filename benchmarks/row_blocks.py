"""GEMM + row softmax in one mixed kernel against tiles of whole rows and two kernels (modelled).

For each shape prints the modelled time of the default schedule (``schedule/gemm_default.py``:
tiles of whole rows and row blocks ranked together), of the best-ranked tiling of whole rows
(each core's Vector cores take whole tiles' rows), and of two kernels: the GEMM to float32
with its default schedule, then a float32 row softmax with its own (each with its launch).
README quotes it::

    python benchmarks/row_blocks.py
"""

from __future__ import annotations

import argparse
import warnings

from ascendsched.algo import library as L
from ascendsched.algo.algorithm import Algorithm, algorithm
from ascendsched.algo.ops import exp, reduce_max, reduce_sum
from ascendsched.algo.tensor import compute, placeholder, reduce_axis
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.gemm_default import default_gemm_schedules
from ascendsched.schedule.schedule import Scheduled
from ascendsched.sim.timing import model_time

SHAPES = ((4096, 2048, 128), (4096, 1024, 128), (1024, 1024, 128), (1000, 1000, 128),
          (2048, 2048, 64), (4096, 4096, 128), (2048, 5000, 128), (1000, 3000, 1000),
          (4096, 32000, 4096))


def softmax32(m: int, n: int) -> Algorithm:
    """The row softmax of float32 scores into float16, as the mixed kernel's epilogue."""
    s = placeholder("S", (m, n), "float32")
    k1, k2 = reduce_axis(n, "k1"), reduce_axis(n, "k2")
    mx = compute("mx", (m,), lambda i: reduce_max(s[i, k1], k1))
    e = compute("e", (m, n), lambda i, j: exp(s[i, j] - mx[i]))
    sm = compute("sm", (m,), lambda i: reduce_sum(e[i, k2], k2))
    return algorithm("softmax32", compute("P", (m, n), lambda i, j:
                                          (e[i, j] / sm[i]).astype("float16")))


def us(s: Scheduled) -> float:
    return model_time(lower(s)).time_s * 1e6


def whole_rows(m: int, n: int, k: int) -> Scheduled | None:
    """The best-ranked default tiling whose tiles hold whole rows (no row blocks)."""
    for s in default_gemm_schedules(L.gemm_softmax(m, n, k)):
        if not s.plan.row_blocks:
            return s
    return None


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    warnings.simplefilter("ignore")
    print(f"{'M x N x K':>20} {'default':>9} {'whole rows':>11} {'two kernels':>12}"
          "   (modelled us, launches included)")
    for m, n, k in SHAPES:
        one = us(schedule_for(L.gemm_softmax(m, n, k)))
        w = whole_rows(m, n, k)
        rows = f"{us(w):11.1f}" if w is not None else f"{'-':>11}"
        two = us(schedule_for(L.gemm(m, n, k, out_dtype="float32"))) + \
            us(schedule_for(softmax32(m, n)))
        print(f"{f'{m} x {n} x {k}':>20} {one:9.1f} {rows} {two:12.1f}", flush=True)


if __name__ == "__main__":
    main()
