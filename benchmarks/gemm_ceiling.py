"""Why tuned GEMMs stop short of the Cube peak: CATLASS-like and tuned tilings, modelled.

For GEMM 4096^3 (fp16 and int8) prints, per tiling: modelled time, share of the Cube peak,
the mean busy time of the MTE2 (GM -> L1) and M (Mmad) pipes, and the L2 -> L1 bytes per
cycle one core needs to keep M busy against the rate the model gives it with every core
reading. The tilings: the default, the tuned best, CATLASS' basic matmul
(``autotune/spaces.py`` ``CATLASS_GEMM_TILES``) and L0C-filling alternatives. Every figure
is modelled (sim/timing.py), not measured.

Run: python benchmarks/gemm_ceiling.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ascendsched.algo import library as L
from ascendsched.algo.algorithm import Algorithm
from ascendsched.autotune.evaluate import evaluate_schedule
from ascendsched.autotune.spaces import CATLASS_GEMM_TILES, CATLASS_SWIZZLE
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.gemm_default import default_gemm_schedules
from ascendsched.target import DEFAULT_TARGET, Target
from ascendsched.target.costs import GIB


def ping_pong(algo: Algorithm, tm: int, tn: int, tk: int, k0: int,
              swizzle: tuple[int, str] = (4, "m"), target: Target = DEFAULT_TARGET
              ) -> GemmSchedule:
    """L1 and L0A/L0B double buffered, one L0C tile, every Cube core."""
    return (GemmSchedule(algo, target=target).tile(tm, tn, tk).split_k(k0)
            .buffer("l1", 2).buffer("l0", 2).bind(target.num_aic).swizzle(*swizzle))


def core_l1_rate(target: Target = DEFAULT_TARGET) -> float:
    """L2 -> L1 bytes per cycle of one core while every Cube core reads (target/costs.py)."""
    c = target.costs
    assert c is not None
    share = c.read_share(target.num_aic)
    return c.gm_l1_l2_1core * share * c.core_rate_scale * GIB / target.clock_hz


def needed_rate(s: GemmSchedule) -> float:
    """L1 bytes per Mmad cycle of the tiling: what keeps M busy (one fractal per cycle)."""
    t, g = s.tiling, s.geometry
    eb = s.spec.in_dtype.bytes
    fractals = (t.tm // g.rows) * (t.tn // g.rows) * (t.tk // g.c0(eb))
    return (t.tm + t.tn) * t.tk * eb / fractals


def cases() -> list[tuple[str, Callable[[], GemmSchedule]]]:
    f16, i8 = L.gemm(4096, 4096, 4096), L.gemm_int8(4096, 4096, 4096)
    out: list[tuple[str, Callable[[], GemmSchedule]]] = []
    for name, algo in (("fp16", f16), ("int8", i8)):
        out.append((f"{name} default", lambda a=algo: next(default_gemm_schedules(a))))
        for tm, tn, tk, k0 in CATLASS_GEMM_TILES:
            out.append((f"{name} CATLASS {tm}x{tn}x{tk}/{k0} swizzle{CATLASS_SWIZZLE}",
                        lambda a=algo, p=(tm, tn, tk, k0): ping_pong(a, *p, CATLASS_SWIZZLE)))
    for p in ((128, 256, 128, 64), (160, 192, 128, 32), (176, 176, 128, 32)):
        out.append(("fp16 {}x{}x{}/{}".format(*p), lambda p=p: ping_pong(f16, *p)))
    out.append(("int8 128x256x512/128", lambda: ping_pong(i8, 128, 256, 512, 128)))
    return out


def main() -> int:
    rate = core_l1_rate()
    print(f"L2 -> L1 per core with {DEFAULT_TARGET.num_aic} cores reading: {rate:.1f} B/cyc "
          f"({rate * DEFAULT_TARGET.clock_hz * DEFAULT_TARGET.num_aic / 1e12:.2f} TB/s in all)")
    print("| schedule | modelled us | % Cube peak | MTE2 / M busy us | needs B/cyc |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, make in cases():
        s = make()
        e = evaluate_schedule(s)
        if not e.ok:
            print(f"| {name} | {e.error} | | | |")
            continue
        u = dict(e.utilisation)
        us = e.time_s * 1e6
        print(f"| {name} | {us:.1f} | {100 * e.of_cube_peak:.1f}% | "
              f"{u['AIC MTE2'] * us:.0f} / {u['AIC M'] * us:.0f} | {needed_rate(s):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
