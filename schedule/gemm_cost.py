"""An analytical estimate of a GEMM schedule's time, to rank the default candidates.

It prices one output tile on the busiest Cube core from the target's cost parameters
(``target/costs.py``, the same ones the timing model in ``sim/`` reads) and the tiling's
shape, without lowering:

* MTE2 (GM -> L1, ND -> NZ): per L1 K step the row requests of A and B (``row_cycles`` each)
  and their bytes at the per-core rate for the number of active cores, mixing the L2-hit and
  HBM rates by the estimated L2 hit fraction (operands re-read by other tiles hit when A and B
  fit in L2), plus the copy heads;
* MTE1 (L1 -> L0A/L0B): bytes at the L0A/L0B rates plus a head per LoadData call;
* M: one cycle per 16 x C0 x 16 fractal (the dtype's rate), plus the Mmad head when M waits;
* FIX: the tile's rows and bytes at the L0C -> GM rate, plus its head;
* S: the scalar issue of every instruction and loop iteration of the step.

Single-buffered levels serialise the pipes they sit between (L1: MTE2 with MTE1, L0: MTE1 with
M, L0C: M with the tile's Fixpipe); double-buffered ones let them overlap, so a tile costs its
slowest pipe or chain. A double-buffered L1 step's copies are issued only when the MTE1 and M
queues have room for the rest of the previous step (``queue_depth``): with more queue entries
per L1 step than that, the copies start only when that fraction of the step's L0 work is left,
and the step lasts the work before them plus the copies ("MTE2 issue"). The core runs ``ceil(tiles / cores)`` tiles plus one pipeline fill; the
chip-wide HBM and L2 bandwidth bound the total from below. It is an estimate for ranking:
``benchmarks/model_report.py --gemm-ranking`` compares its order with the timing model's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ascendsched.schedule.cube_plan import CubePlan
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.target.costs import GIB

CALL_SYNCS = 4  # set/wait instructions the scalar issues per L0 step (two flag pairs)


@dataclass(frozen=True)
class GemmEstimate:
    """Estimated cycles of the busiest core and what bounds them."""

    cycles: float
    tile_cycles: float
    waves: int
    bound: str  # the pipe or chain that sets the tile time, or "HBM" / "L2"
    per_tile: tuple[tuple[str, float], ...]  # pipe or chain -> cycles per tile

    def seconds(self, clock_hz: float) -> float:
        return self.cycles / clock_hz


def estimate_gemm(s: GemmSchedule | CubePlan) -> GemmEstimate:
    """The estimated time of ``s`` (a schedule or its resolved plan) on its target (see the
    module docstring)."""
    tgt, t, sp = s.target, s.tiling, s.spec
    c = tgt.costs
    if c is None:
        raise ValueError(f"target {tgt.name} has no cost model")
    g = s.geometry
    eb, ob = sp.in_dtype.bytes, sp.out_dtype.bytes
    c0 = g.c0(eb)
    active = t.cores
    to_bpc = GIB / tgt.clock_hz * c.core_rate_scale
    share = c.read_share(active)
    hit = _l2_hit(s, c.l2_bytes)
    l2_rate = c.gm_l1_l2_1core * share * to_bpc
    hbm_rate = c.gm_l1_hbm_1core * share * to_bpc
    rate = 1.0 / (hit / l2_rate + (1.0 - hit) / hbm_rate)
    # ---- one L1 K step (full tk) and one L0 step (full k0)
    rows_a = t.tk if sp.trans_a else t.tm
    rows_b = t.tn if sp.trans_b else t.tk
    step_bytes = (t.tm + t.tn) * t.tk * eb
    mte2_step = max((rows_a + rows_b) * c.row_cycles, step_bytes / rate) + c.head_gm_l1
    calls_a = min(t.tm // g.rows, max(1, t.k0 // c0))
    calls_b = min(max(1, t.tn // g.rows), max(1, t.k0 // c0))
    mte1 = ((t.tm * t.k0 * eb) / c.l1_l0a_rate + (t.k0 * t.tn * eb) / c.l1_l0b_rate
            + (calls_a + calls_b) * c.head_l1_l0)
    mma = (math.ceil(t.tm / g.rows) * math.ceil(t.k0 / c0) * math.ceil(t.tn / g.rows)
           * c.mmad_fractal_cycles(sp.in_dtype.name))
    s_step = (c.scalar_issue * (calls_a + calls_b + 1 + CALL_SYNCS)
              + c.loop_overhead * (calls_a + calls_b + 1))
    # ---- per tile
    l0_steps = math.ceil(sp.k / t.k0)
    l1_steps = math.ceil(sp.k / t.tk)
    m_waits = t.l0_copies == 1 or mte1 >= mma or mte2_step * l1_steps >= mma * l0_steps
    mmad = l0_steps * (mma + (c.mmad_head if m_waits else 0.0))
    fix_rate = c.l0c_gm_rate * c.write_share(active) * c.core_rate_scale
    fix = c.head_l0c_gm + max(t.tm * c.row_cycles, t.tm * t.tn * ob / fix_rate)
    per = {
        "MTE2": l1_steps * mte2_step,
        "MTE1": l0_steps * mte1,
        "M": mmad,
        "FIX": fix,
        "S": l0_steps * s_step + l1_steps * c.scalar_issue * 8,
    }
    if t.l1_copies == 1:
        per["MTE2+MTE1"] = l1_steps * mte2_step + l0_steps * mte1
    else:
        # the next L1 step's copies follow this step's L0 work in program order: the scalar
        # issues them only once the MTE1 and M queues (queue_depth deep) have room for the
        # rest of this step, so they start that much later than double buffering allows
        per_l1 = max(1, t.tk // t.k0)
        r = tgt.cube_rows
        ordered = 0 < tgt.mmad_ordered_fractals <= (t.tm // r) * (t.tn // r)
        entries = per_l1 * max(calls_a + calls_b + 2, 3 if ordered else 4)
        lead = min(1.0, c.queue_depth / entries)
        if lead < 1.0:
            # they start once all but ``lead`` of the step's L0 work has run, and the next
            # step's L0 work waits for them: a step lasts the copies plus the part of the
            # work before them (dividing the copies by ``lead`` stretched the work too and
            # ranked int8 4096^3's 512-deep L1 K tiles 4.7% slow; the model has them 4% fast)
            work = max(per["MTE1"], per["M"]) / l1_steps
            per["MTE2 issue"] = l1_steps * (mte2_step + (1.0 - lead) * work)
    if t.l0_copies == 1:
        per["MTE1+M"] = l0_steps * mte1 + mmad
    if t.l0c_copies == 1:
        per["M+FIX"] = mmad + fix
    bound = max(per, key=per.get)
    tile = per[bound]
    # a core's tiles: with row blocks (CubePlan.row_blocks) its blocks times their tiles
    waves = t.iters * t.nt if s.row_blocks else -(-t.tiles // t.cores)
    fill = mte2_step + mte1 + fix
    cycles = waves * tile + fill
    # ---- chip-wide caps
    total_read = t.tiles * (t.tm + t.tn) * sp.k * eb
    hbm = total_read * (1.0 - hit) + sp.batch * sp.m * sp.n * ob
    hbm_cycles = hbm / (c.hbm_bytes_per_s / tgt.clock_hz)
    l2_cycles = (total_read + sp.batch * sp.m * sp.n * ob) / (c.l2_bytes_per_s / tgt.clock_hz)
    if max(hbm_cycles, l2_cycles) > cycles:
        bound = "HBM" if hbm_cycles >= l2_cycles else "L2"
        cycles = max(hbm_cycles, l2_cycles)
    return GemmEstimate(cycles + c.launch_us * 1e-6 * tgt.clock_hz, tile, waves, bound,
                        tuple(sorted(per.items())))


def _l2_hit(s: GemmSchedule | CubePlan, l2_bytes: int) -> float:
    """Fraction of GM -> L1 reads served by L2: every re-read of A and B when both fit in
    L2, else the re-reads that stay within one wave's working set (its A and B panels)."""
    t, sp = s.tiling, s.spec
    eb = sp.in_dtype.bytes
    total = t.tiles * (t.tm + t.tn) * sp.k * eb
    unique = (sp.batch * sp.m + (sp.batch if sp.b_batched else 1) * sp.n) * sp.k * eb
    if total <= 0:
        return 0.0
    if unique <= l2_bytes:
        return max(0.0, 1.0 - unique / total)
    w = t.swizzle.width
    wave_panels = (min(w, t.mt) * t.tm + min(-(-t.cores // max(w, 1)), t.nt) * t.tn) * sp.k * eb
    reuse = max(0.0, 1.0 - unique / total)
    return reuse * min(1.0, l2_bytes / max(wave_panels, 1.0)) * min(1.0, l2_bytes / unique)


def estimate_row_blocks(plan: CubePlan) -> float:
    """Estimated cycles of a GEMM whose Vector epilogue reduces along rows, over row blocks
    (``CubePlan.row_blocks``) or tiles of whole rows (a block of one tile), to rank their
    tilings together: a two-stage pipeline over each core's ``B`` blocks, the Cube computing
    block ``i + 1`` while the Vector cores finish block ``i``, so ``max(Cube total, B * v) +
    min(c, v)``, with ``c`` a block's share of the Cube estimate above and ``v`` a block's
    epilogue traffic (the workspace read back, the output written) at the core's share of
    the HBM bandwidth: the steps between are cheap next to it for a softmax, and the fill
    (the first block's Cube time and the last block's Vector time, unhidden) is what a few
    large blocks pay. Not the Vector work of a heavier epilogue: an estimate for ranking, as
    ``estimate_gemm`` is (it prices small L0 K steps low, which ``gemm_default._ranked``
    offsets: GEMM + softmax 1000 x 3000 x 1000 took 64 x 256 x 128 tiles in K steps of 16,
    90.7 us modelled, now the same tiles in steps of 64, 77.2 us)."""
    tgt, t, sp = plan.target, plan.tiling, plan.spec
    c = tgt.costs
    assert c is not None
    est = estimate_gemm(plan)
    launch = c.launch_us * 1e-6 * tgt.clock_hz
    cube = est.cycles - launch
    blocks = t.iters
    per_block = cube / blocks
    epi = plan.vector_epilogue
    assert epi is not None
    out_b = epi.algo.outputs[0].dtype.bytes
    traffic = t.tm * sp.n * (sp.acc_dtype.bytes + out_b)
    vec = traffic / (c.hbm_bytes_per_s / t.cores / tgt.clock_hz)
    return max(cube, blocks * vec) + min(per_block, vec) + launch

