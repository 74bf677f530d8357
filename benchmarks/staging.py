"""Rows staged in UB once per row against rows read again per chunked statistic (modelled).

Rows too wide for a tile are cut into pieces under a bound row loop, each row statistic read
in chunks of the piece's width (the default for such rows, ``schedule/default_chunked.py``).
Read from GM, each statistic's chunks and the pieces read the row again; staged with
``cache_read("x", "UB", at=("y", "i_o"), copies=1)`` it is read once. Prints the modelled
time of both per kernel and piece width, and the default schedule's; README quotes it::

    python benchmarks/staging.py
"""

from __future__ import annotations

import argparse
import warnings

from ascendsched.algo import library as L
from ascendsched.errors import CapacityError
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.schedule.chunks import chunk_axis
from ascendsched.schedule.ub_budget import row_statistics
from ascendsched.sim.timing import model_time

CASES = (("rmsnorm", 4096, 32000), ("layernorm", 1024, 32000), ("softmax", 4096, 32000))
WIDTHS = (8000, 6400, 3200)


def pieces(name: str, m: int, n: int, width: int, staged: int) -> Schedule:
    """Single rows over the vector cores, pieces of ``width`` inside, the statistics once
    per row in chunks of ``width``; ``staged``: copies of the row staged in UB (0: none, the
    row then double buffered per chunk and piece as the default has it)."""
    algo = getattr(L, name)(m, n)
    s = (Schedule(algo).split("y", "i", 1).split("y", "j", width).reorder("y", "i_o", "j_o")
         .bind("y", "i_o", min(m, 48)))
    stats = row_statistics(algo)
    for st in algo.stages:
        if st.name == "y":
            continue
        if st.name not in stats:
            s = s.compute_inline(st.name)
            continue
        s = s.compute_at(st.name, "y", "i_o")
        k = chunk_axis(s, st.name)
        if k is not None:
            s = s.split(st.name, k, width)
    s = s.cache_read("x", "UB", at=("y", "i_o"), copies=staged) if staged else s.buffer("x", 2)
    return s.buffer("y", 2)


def modelled_us(sched: Schedule) -> str:
    try:
        return f"{model_time(lower(sched)).time_s * 1e6:8.1f}"
    except CapacityError:
        return "  no fit"


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    warnings.simplefilter("ignore")  # buffering given up under UB pressure: in the figure
    print("modelled us (launch included)       width  row per chunk  row staged")
    for name, m, n in CASES:
        algo = getattr(L, name)(m, n)
        print(f"{name} {m}x{n}: default schedule {modelled_us(schedule_for(algo)).strip()}")
        for w in WIDTHS:
            print(f"{'':36}{w:5}  {modelled_us(pieces(name, m, n, w, 0)):>13}  "
                  f"{modelled_us(pieces(name, m, n, w, 1)):>10}")


if __name__ == "__main__":
    main()
