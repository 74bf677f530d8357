"""Timing-model parameters of an AI core: the cost record the ``sim/`` timing model reads.

Every field is a physical quantity with its source in ``COST_SOURCES_910B`` (keys = field
names; the fitted ones also name the fit). Labels follow shared/calibration/SOURCES.md: SPEC, HW (board measurement), HW-fit,
SIM, GUESS, derived, and **fit** for values fitted by ``benchmarks/calibration/fit.py`` to the
calibration set of SOURCES.md section 5 (the fitted numbers are recorded in
``FITTED_910B`` with the fit's residuals; the literature starting values stay in
``LITERATURE_910B``).

Units: cycles of the core clock (``Target.clock_hz``), bytes per cycle (``B/cyc``) for per-core
DMA rates, bytes per second for chip-wide caps (HBM, L2), GiB/s in the published per-core
contention tables (converted with the target clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

GIB = 2**30


@dataclass(frozen=True)
class CostModel:
    """Per-op costs and shared-bandwidth parameters of one target (see module docstring)."""

    # ---- scalar unit and launch
    launch_us: float  # kernel launch + completion overhead, paid once per kernel
    scalar_issue: float  # scalar cycles to issue one IR instruction into its pipe queue
    loop_overhead: float  # scalar cycles per loop iteration (increment, compare, branch)
    queue_depth: int  # instruction queue depth per pipe; the scalar stalls when one is full
    # ---- synchronisation
    set_flag: float  # cycles from a SetFlag's pipe draining to the flag firing
    wait_flag: float  # cycles a WaitFlag occupies its pipe after the flag fired
    barrier: float  # cycles of a PipeBarrier after its pipe drained
    cross_flag: float  # cross-core (FFTS) flag latency, AIC <-> AIV
    # ---- DMA: time = head + max(rows * row_cycles, bytes / rate)
    head_gm_ub: float  # GM -> UB (MTE2 on AIV)
    head_ub_gm: float  # UB -> GM (MTE3)
    head_gm_l1: float  # GM -> L1 with ND -> NZ (MTE2 on AIC)
    head_l0c_gm: float  # L0C -> GM (Fixpipe)
    head_l1_l0: float  # L1 -> L0A / L0B (LoadData), per instruction
    row_cycles: float  # per GM row of a strided / ND->NZ copy (one burst request per row)
    l1_l0a_rate: float  # B/cyc
    l1_l0b_rate: float  # B/cyc
    l0c_gm_rate: float  # B/cyc, single core
    # per-core GM rates (GiB/s) vs number of active cores, as (cores, GiB/s) points
    gm_ub_core: tuple[tuple[int, float], ...]
    ub_gm_core: tuple[tuple[int, float], ...]
    gm_l1_hbm_1core: float  # GiB/s, one core, HBM -> L1
    gm_l1_l2_1core: float  # GiB/s, one core, L2 hit -> L1
    gm_ub_l2_1core: float  # GiB/s, one core, L2 hit -> UB
    core_rate_scale: float  # multiplies every per-core GM rate above (fitted)
    # ---- chip-wide shared memory
    hbm_bytes_per_s: float  # aggregate HBM bandwidth reached by kernels (reads + write-backs)
    l2_bytes_per_s: float  # aggregate L2 bandwidth (all GM traffic passes through L2)
    l2_bytes: int  # L2 capacity
    writeback_cost: float  # HBM cost of a dirty-line write-back relative to a read byte
    # ---- Cube
    mmad_head: float  # paid when the M pipe's stream of Mmads was interrupted
    mmad_cycles: tuple[tuple[str, float], ...]  # input dtype -> cycles per 16 x K0 x 16 fractal
    # ---- Vector: time = head (stream interrupted) + slope * repeats * ..., tail at syncs
    vec_head: float
    vec_tail: float
    vec_slopes: tuple[tuple[str, float], ...]  # "fn" or "fn:dtype" -> cycles per repeat
    ub_bank_groups: int  # UB bank groups; a repeat reading k blocks of one group takes k beats
    bank_beat: float  # cycles per extra beat of a bank-group conflict
    notes: tuple[str, ...] = field(default=())

    def slope(self, fn: str, dtype: str) -> float:
        """Cycles per repeat of vector fn on dtype (``fn:dtype`` entry, else ``fn``, else 1)."""
        table = dict(self.vec_slopes)
        return table.get(f"{fn}:{dtype}", table.get(fn, 1.0))

    def mmad_fractal_cycles(self, dtype: str) -> float:
        return dict(self.mmad_cycles)[dtype]

    def read_share(self, active: int) -> float:
        """A core's GM read rate with ``active`` cores streaming, relative to one core alone
        (the shape of ``gm_ub_core``, which the model applies to every GM read path)."""
        return interp_cores(self.gm_ub_core, active) / self.gm_ub_core[0][1]

    def write_share(self, active: int) -> float:
        """The same for GM writes (the shape of ``ub_gm_core``)."""
        return interp_cores(self.ub_gm_core, active) / self.ub_gm_core[0][1]

    def with_values(self, **values: float) -> CostModel:
        """A copy with some scalar parameters replaced (the fit's entry point)."""
        known = {f.name for f in fields(self)}
        bad = sorted(set(values) - known)
        if bad:
            raise KeyError(f"unknown cost parameters {bad}")
        return replace(self, **values)


def interp_cores(table: tuple[tuple[int, float], ...], n: int) -> float:
    """A per-core rate table at ``n`` active cores: linear between points; beyond the last
    point the last aggregate is shared."""
    if n <= table[0][0]:
        return table[0][1]
    for (n0, v0), (n1, v1) in zip(table, table[1:]):
        if n <= n1:
            return v0 + (v1 - v0) * (n - n0) / (n1 - n0)
    return table[-1][1] * table[-1][0] / n


# GM -> UB and UB -> GM per-core bandwidth (GiB/s) against active cores, tilesim
# bandwidth_910B1.csv via Triton-Ascend configs/ascend_910b.json (SOURCES.md section 4, HW).
_GM_UB = ((1, 100.9), (2, 64.5), (4, 77.9), (8, 68.9), (12, 68.1), (16, 73.3), (20, 68.8),
          (24, 65.1), (28, 59.0), (32, 53.3), (40, 41.6), (48, 33.7))
_UB_GM = ((1, 188.5), (2, 210.5), (4, 130.3), (8, 115.0), (12, 106.0), (16, 100.4), (20, 88.9),
          (24, 76.7), (28, 66.4), (32, 55.9), (40, 42.6), (48, 34.3))

_SLOPES = (
    # cycles per 256 B repeat, bank conflicts excluded (they add beats, see ub_bank_groups).
    ("add", 1.0), ("sub", 1.0), ("mul", 1.0), ("max", 1.0), ("min", 1.0),
    ("div", 4.0), ("div:float16", 8.0), ("exp", 2.0), ("ln", 2.0), ("sqrt", 2.0), ("rsqrt", 1.0),
    ("reciprocal", 4.0), ("abs", 1.0), ("relu", 1.0), ("copy", 1.0),
    ("adds", 1.0), ("muls", 1.0), ("maxs", 1.0), ("mins", 1.0), ("dup", 1.0),
    ("cast", 1.0), ("brcb", 1.0), ("cmp", 2.0), ("select", 2.0),
    ("fused_mul_add", 1.0), ("mul_add_dst", 2.0),
    ("sum:float32", 3.0), ("sum:float16", 7.0), ("max_reduce", 7.0), ("min_reduce", 7.0),
    ("block_sum:float32", 1.0), ("block_max:float32", 1.0), ("block_min:float32", 1.0),
    ("block_sum:float16", 7.0), ("block_max:float16", 7.0), ("block_min:float16", 7.0),
)

LITERATURE_910B = CostModel(
    launch_us=5.0, scalar_issue=3.0, loop_overhead=9.0, queue_depth=32,
    set_flag=1.0, wait_flag=1.0, barrier=1.0, cross_flag=200.0,
    head_gm_ub=210.0, head_ub_gm=150.0, head_gm_l1=40.0, head_l0c_gm=80.0, head_l1_l0=2.0,
    row_cycles=3.5, l1_l0a_rate=256.0, l1_l0b_rate=128.0, l0c_gm_rate=118.0,
    gm_ub_core=_GM_UB, ub_gm_core=_UB_GM, gm_l1_hbm_1core=135.0, gm_l1_l2_1core=221.0,
    gm_ub_l2_1core=137.0, core_rate_scale=1.0,
    hbm_bytes_per_s=1.52e12, l2_bytes_per_s=3.7e12, l2_bytes=192 * 2**20, writeback_cost=1.0,
    mmad_head=6.0, mmad_cycles=(("float16", 1.0), ("bfloat16", 1.0), ("int8", 1.0),
                                ("float32", 2.0)),
    vec_head=14.0, vec_tail=14.0, vec_slopes=_SLOPES, ub_bank_groups=16, bank_beat=1.0,
)

COST_SOURCES_910B: dict[str, str] = {
    "launch_us": "ASC add_high_performance README: Task Duration - aiv_time = 2.5-9.4 us (HW); "
                 "CATLASS' 20 us full-core head is a different measurement (SOURCES.md 6.9)",
    "scalar_issue": "VT scalar_peak.cce 3.08 cyc per scalar ALU op (HW, third party); an IR "
                    "instruction's issue is taken as one such op",
    "loop_overhead": "three scalar ops (increment, compare, branch) at 3.08 cyc (VT, HW third "
                     "party)",
    "queue_depth": "MTE1 and MMAD queues 32 deep (ASC-HWC2201, SPEC); other pipes assumed equal",
    "set_flag": "1 cyc placeholder (PTO cce_costmodel_sync.hpp, KPP sync_instruction.py; GUESS)",
    "wait_flag": "1 cyc placeholder (PTO, KPP; GUESS)",
    "barrier": "1 cyc plus draining its pipe (PTO cce_costmodel_sync.hpp:27-33; model)",
    "cross_flag": "no public measurement (SOURCES.md 7); GUESS",
    "head_gm_ub": "KPP GM_TO_UB_910b1 ~235 cyc at 1 KB; PTO Hill fit ~214 cyc (HW, HW-fit)",
    "head_ub_gm": "KPP UB->GM fixed ~150 cyc at <= 2 KB (HW)",
    "head_gm_l1": "derived from ASC matmul Cases 0-1 (per K step MTE2 514 / 1380 cyc for 16 / "
                  "48 KB in 128 / 384 rows of 128 B: ~40 cyc per copy); KPP's isolated-copy "
                  "affine fit gives ~206",
    "head_l0c_gm": "KPP L0C_TO_GM_910b1 ~80 cyc for <= 8 KB (HW)",
    "head_l1_l0": "KPP L1_TO_L0A/L0B affine fits t = 2.0 + B/rate (HW, <= 1% error)",
    "row_cycles": "derived from ASC matmul Cases 0-1 and 3-4 (ND->NZ rows of 128 B move at "
                  "~3.5 cyc per row; 256 B rows are bandwidth bound); KPP GM_TO_L1_TRANS dips",
    "l1_l0a_rate": "256 B/cyc (PTO arch_config L1_TO_L0A=441 GiB/s, KPP, SPEC + HW)",
    "l1_l0b_rate": "128 B/cyc (PTO L1_TO_L0B=220.5 GiB/s, KPP; MTE1/M = 0.82 check, HW)",
    "l0c_gm_rate": "KPP L0C_TO_GM_910b1 ~118 B/cyc above 8 KB (HW)",
    "gm_ub_core": "tilesim bandwidth_910B1.csv hbm:ub per_core_gbps (SOURCES.md 4, HW)",
    "ub_gm_core": "tilesim bandwidth_910B1.csv ub:hbm per_core_gbps (SOURCES.md 4, HW)",
    "gm_l1_hbm_1core": "tilesim hbm:l1 135 GiB/s (PTO arch_config, TA; HW); contention curve "
                       "taken from gm_ub_core's shape (no per-count table published; derived)",
    "gm_l1_l2_1core": "tilesim l2:l1 221 GiB/s (TA; HW), same contention curve (derived)",
    "gm_ub_l2_1core": "tilesim l2:ub 137 GiB/s (TA; HW), same contention curve (derived)",
    "core_rate_scale": "1 (the tables as published)",
    "hbm_bytes_per_s": "ASC add sample: 268 MB read in 176.0 us with L2 bypass = 1.52 TB/s (HW)",
    "l2_bytes_per_s": "G8/G12: >= 3.67 / 3.41 TB/s L2 -> L1 with ND->NZ on 24 / 20 AIC (HW); "
                      "ASC quotes 5 TB/s peak (SPEC)",
    "l2_bytes": "192 MiB (910B1-B3, SPEC)",
    "writeback_cost": "HBM cost of an evicted dirty line relative to a read byte; the ASC add "
                      "Cases 3-4 (402.7 MB through HBM at ~1.52 TB/s although an LRU L2 would "
                      "keep a third of z) need > 1 (read/write turnaround, HW-fit)",
    "mmad_head": "PTO formula 6 cyc, paid when the cube queue ran empty (GUESS); KPP 910B1 +2",
    "mmad_cycles": "1 cyc per 16x16x16 fp16/bf16 and 16x32x16 int8 fractal, 2 for fp32 "
                   "(PTO formula_backend_compute.hpp, TA cube_model; HW-consistent to 2%)",
    "vec_head": "PTO vadd head 10 / tail 14, measured 2.11*rep + 24 (910B3 HW-fit)",
    "vec_tail": "PTO tails 13-25 cyc paid at the next flag or barrier (model)",
    "vec_slopes": "SOURCES.md 2.5: 1 cyc/repeat for simple ops without bank conflicts (ASC add "
                  "Case 6: 1.18 incl. head), div fp32 4 / fp16 8 (tilesim, PTO-M), exp/ln/sqrt 2 (PTO TEXP/TSQRT half "
                  "64x64 measured imply 2 for fp16 too; KPP says 4), vcadd fp32 3 / fp16 7, "
                  "vcmax 7 (KPP), cmp/select 2, vcgadd/vcgmax/vcgmin (BlockReduce) fp32 1 / fp16 7 "
                  "(KPP 910B1 table; PTO slope 1, tilesim 1: SOURCES.md 2.5); FusedMulAdd 1 "
                  "(64 float / 128 half per cycle) and MulAddDst 2 (32 / 64 per cycle), "
                  "asc-devkit docs/zh/api/附录/Vector指令理论性能汇总.md table 8 (SPEC); "
                  "FusedMulAdd.md: with dst, src0, src1 at three addresses one beat cannot "
                  "read all three, half the rate (its dst is a source: the bank-group beats "
                  "charge that, 24 blocks in 16 groups = 2 beats)",
    "ub_bank_groups": "UB = 16 bank groups x 3 banks x 128 rows x 32 B; a 256 B source offset "
                      "removes the conflict (ASC add Case 6, SPEC + HW), so group = block % 16",
    "bank_beat": "ASC add Cases 4-6: 2.18 vs 1.18 cyc/repeat with and without the conflict (HW)",
}

# Fitted by benchmarks/calibration/fit.py (bounded log least squares over the 38 expressible
# entries of SOURCES.md section 5: median |error| 4.0%, 36 within 15%). A value at the edge of
# its evidence range is marked "at bound": the data pull beyond what the sources support.
FITTED_910B = LITERATURE_910B.with_values(
    launch_us=9.4,  # at bound (ASC add: Task - aiv_time <= 9.4 us)
    head_gm_ub=207.5,
    head_ub_gm=250.0,  # at bound (KPP ~150)
    head_gm_l1=20.0,  # at bound (derived ~40)
    row_cycles=3.726,
    core_rate_scale=0.985,
    hbm_bytes_per_s=1.489e12,
    l2_bytes_per_s=3.7e12,  # no gradient: the L2 cap does not bind on the calibration set
    writeback_cost=1.434,
    mmad_head=25.0,  # at bound (TA 20, PyPTO 21)
    vec_head=13.43,
    vec_tail=13.43,
    bank_beat=1.09,
    notes=("fitted by benchmarks/calibration/fit.py to SOURCES.md section 5",),
)

for _name in ("launch_us", "head_gm_ub", "head_ub_gm", "head_gm_l1", "row_cycles",
              "core_rate_scale", "hbm_bytes_per_s", "l2_bytes_per_s", "writeback_cost",
              "mmad_head", "vec_head", "vec_tail", "bank_beat"):
    COST_SOURCES_910B[_name] += "; fit: benchmarks/calibration/fit.py (FITTED_910B)"

DEFAULT_COSTS_910B = FITTED_910B
