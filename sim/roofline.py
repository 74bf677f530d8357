"""The roofline bound of a kernel: its work at the chip's peaks, whatever the schedule.

- Cube: ``2 * m * n * k`` per Mmad instance at the chip's Cube peak (all AIC, one 16 x K0 x 16
  fractal per cycle: 4096 MAC for 16-bit inputs, ``mmad_cycles`` for others).
- Vector: one 256 B repeat per cycle per AIV, on every AIV of the chip.
- Bytes: each GM input read once and each output written once, at the target's HBM bandwidth
  (``Target.gm_bytes_per_s``, the datasheet figure).

The bound is the largest of the three; the report's ratio is modelled time / bound (>= 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched.lower.ir import Kernel


@dataclass(frozen=True)
class Roofline:
    cube_s: float
    vector_s: float
    memory_s: float
    flops: float
    vector_repeats: float
    gm_bytes: int

    @property
    def bound_s(self) -> float:
        return max(self.cube_s, self.vector_s, self.memory_s)

    @property
    def limit(self) -> str:
        best = max((self.cube_s, "Cube peak"), (self.vector_s, "Vector peak"),
                   (self.memory_s, "HBM bandwidth"))
        return best[1]


def roofline(kernel: Kernel, flops: float, repeats: float) -> Roofline:
    """The bound for ``flops`` Mmad FLOPs and ``repeats`` vector repeats of ``kernel``."""
    t = kernel.target
    costs = t.costs
    in_dt = next((p.dtype for p in kernel.params if p.kind == "input"), None)
    frac = costs.mmad_fractal_cycles(in_dt.name) if costs and in_dt and in_dt.name in dict(
        costs.mmad_cycles) else 1.0
    k0 = t.block_bytes // (in_dt.bytes if in_dt else 2)
    macs_per_cycle = t.cube_rows * t.cube_rows * k0 / frac
    cube_peak = t.num_aic * macs_per_cycle * 2 * t.clock_hz
    gm = sum(p.nbytes for p in kernel.params if p.kind in ("input", "output"))
    return Roofline(
        cube_s=flops / cube_peak if flops else 0.0,
        vector_s=repeats / (t.num_aiv * t.clock_hz) if repeats else 0.0,
        memory_s=gm / t.gm_bytes_per_s,
        flops=flops, vector_repeats=repeats, gm_bytes=gm)
