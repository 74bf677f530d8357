"""The timing model of a kernel on the 910B: modelled time, pipe utilisation, roofline.

``model_time(kernel)`` runs every block of the grid on its own core (blocks beyond the core
count queue behind earlier ones) with:

1. GM traffic through the shared L2 (``sim/gm_traffic.py``): per-tensor L2 hit fractions and
   the bytes that reach HBM;
2. per-core DMA rates for the number of cores streaming GM (``sim/costs.py``, the published
   contention tables; in a mixed kernel each core type counts by the GM bytes it moves,
   ``streaming_cores``), and per-op costs from ``target/costs.py``;
3. the event engine (``sim/timing_engine.py``) on one representative block of each group of
   blocks whose control flow is identical (same trip counts and If outcomes), AIC and AIV of a
   block simulated together (cross-core flags);
4. the chip-wide caps: when the kernel's HBM bytes (missed reads + write-backs) or L2 bytes
   (all GM traffic) would need more than their aggregate bandwidth over the simulated time, the
   DMA rates are slowed by that factor and the blocks simulated again; the time is at least
   the capped transfer time;
5. the launch overhead.

``fast=False`` simulates every block and every loop iteration (the reference the fast path is
checked against); ``record=True`` simulates every loop iteration of one block per group and
keeps every pipe activity for the timeline (the group's other blocks share its slices).
The result is a model: ``TimingReport.summary()`` says so and names its parameters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ascendsched.errors import InternalCompilerError
from ascendsched.lower.ir import BLOCK_IDX, SUB_BLOCK_IDX, Kernel, iter_instrs
from ascendsched.sim.costs import PIPES, CostTable, core_rates
from ascendsched.sim.gm_traffic import GmTraffic, gm_traffic
from ascendsched.sim.roofline import Roofline, roofline
from ascendsched.sim.timing_engine import (
    CoreRun,
    CrossCounters,
    Slice,
    block_signature,
    loop_infos,
)
from ascendsched.sim.trace import core_type
from ascendsched.target.costs import COST_SOURCES_910B, CostModel
from ascendsched.target.model import CoreType

PIPE_NAMES = tuple(str(p) for p in PIPES)


@dataclass(frozen=True)
class CoreTiming:
    """One block's core: when it finished and how long each pipe was busy (cycles)."""

    block: int
    core: str
    end: float
    busy: tuple[float, ...]  # per PIPE_NAMES
    instructions: float


@dataclass(frozen=True)
class TimingReport:
    kernel: str
    target: str
    clock_hz: float
    cycles: float  # core time of the slowest core, caps applied, launch excluded
    launch_s: float
    roofline: Roofline
    bound: str  # "pipes" | "HBM bandwidth" | "L2 bandwidth"
    cores: tuple[CoreTiming, ...]
    traffic: GmTraffic
    groups: int
    eval_s: float
    costs: CostModel
    slices: dict[tuple[int, str], list[Slice]] | None = field(default=None, compare=False)

    @property
    def time_s(self) -> float:
        return self.cycles / self.clock_hz + self.launch_s

    @property
    def core_time_s(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def mean_core_time_s(self) -> float:
        """Average over cores of their finishing time (msprof's aicore_time)."""
        return sum(c.end for c in self.cores) / len(self.cores) / self.clock_hz

    @property
    def ratio(self) -> float:
        return self.time_s / self.roofline.bound_s if self.roofline.bound_s else float("inf")

    def critical_core(self) -> CoreTiming:
        return max(self.cores, key=lambda c: c.end)

    def utilisation(self, core: CoreTiming | None = None) -> dict[str, float]:
        c = core or self.critical_core()
        return {n: b / self.cycles for n, b in zip(PIPE_NAMES, c.busy) if b > 0}

    def mean_utilisation(self, core_type: str) -> dict[str, float]:
        cs = [c for c in self.cores if c.core == core_type]
        out: dict[str, float] = {}
        for i, n in enumerate(PIPE_NAMES):
            b = sum(c.busy[i] for c in cs) / max(len(cs), 1)
            if b > 0:
                out[n] = b / self.cycles
        return out

    @property
    def critical_pipe(self) -> str:
        """The busiest pipe of the block that finishes last; in a mixed kernel over all its
        cores, named with its core ("AIC MTE2"): an AIV that finishes last after waiting
        for the Cube most of the time is not what bounds the kernel."""
        last = self.critical_core()
        mine = [c for c in self.cores if c.block == last.block]
        if len({c.core for c in mine}) > 1:
            _, core, name = max(((b, c.core, n) for c in mine
                                 for n, b in zip(PIPE_NAMES, c.busy)), default=(0, "", "S"))
            pipe = f"{core} {name}"
        else:
            u = self.utilisation()
            pipe = max(u, key=u.get) if u else "S"
        if self.bound != "pipes":
            return f"{pipe} ({self.bound})"
        return pipe

    def summary(self) -> str:
        r = self.roofline
        lines = [
            f"kernel {self.kernel} on {self.target} (modelled, not measured)",
            f"  modelled time   {self.time_s * 1e6:12.2f} us  (cores {self.core_time_s * 1e6:.2f}"
            f" us + launch {self.launch_s * 1e6:.2f} us; bound by {self.bound})",
            f"  roofline time   {r.bound_s * 1e6:12.2f} us  ({r.limit}: cube "
            f"{r.cube_s * 1e6:.2f}, vector {r.vector_s * 1e6:.2f}, memory {r.memory_s * 1e6:.2f}"
            " us)",
            f"  modelled / roofline  {self.ratio:.2f}",
            f"  critical pipe   {self.critical_pipe}",
        ]
        for ct in sorted({c.core for c in self.cores}):
            u = self.mean_utilisation(ct)
            lines.append(f"  {ct} pipe utilisation (mean over cores): "
                         + ", ".join(f"{k} {v:.0%}" for k, v in u.items()))
        t = self.traffic
        lines.append(f"  GM traffic: read {t.total_read / 1e6:.1f} MB (L2 hits "
                     f"{1 - t.hbm_read / max(t.total_read, 1):.0%}), written "
                     f"{t.total_write / 1e6:.1f} MB, write-backs {t.writeback / 1e6:.1f} MB")
        lines.append(f"  model evaluated in {self.eval_s * 1e3:.0f} ms ({self.groups} block "
                     f"groups simulated)")
        lines.append("  parameters (target/costs.py, sources in COST_SOURCES_910B): "
                     + parameter_line(self.costs))
        return "\n".join(lines)


def parameter_line(c: CostModel) -> str:
    return (f"launch {c.launch_us:.1f} us, HBM {c.hbm_bytes_per_s / 1e12:.2f} TB/s, L2 "
            f"{c.l2_bytes_per_s / 1e12:.2f} TB/s / {c.l2_bytes >> 20} MiB, per-core GM rates "
            f"x{c.core_rate_scale:.2f} of tilesim, DMA heads GM->UB {c.head_gm_ub:.0f} / UB->GM "
            f"{c.head_ub_gm:.0f} / GM->L1 {c.head_gm_l1:.0f} / L0C->GM {c.head_l0c_gm:.0f} cyc, "
            f"{c.row_cycles:.2f} cyc per strided row, vector head/tail {c.vec_head:.0f}/"
            f"{c.vec_tail:.0f} cyc, bank beat {c.bank_beat:.2f}, Mmad head {c.mmad_head:.0f} "
            f"cyc, scalar issue {c.scalar_issue:.1f} cyc")


def model_time(kernel: Kernel, *, costs: CostModel | None = None, fast: bool = True,
               record: bool = False, l2_bypass: frozenset[str] = frozenset(),
               traffic: GmTraffic | None = None) -> TimingReport:
    """Model ``kernel``'s run on its target (see module docstring).

    ``l2_bypass``: GM inputs read with the L2 disabled (a cache hint the schedule language does
    not have yet; the calibration uses it for the published Add Cases 5-6). ``traffic``: a
    precomputed ``gm_traffic`` of this kernel (it depends on no fitted parameter).
    """
    t0 = time.perf_counter()
    costs = costs or kernel.target.costs
    if costs is None:
        raise InternalCompilerError(f"target {kernel.target.name} has no cost model")
    tgt = kernel.target
    traffic = traffic or gm_traffic(kernel, costs.l2_bytes, bypass=l2_bypass)
    progs = [p for p in kernel.programs if p.body]
    if not progs:
        raise InternalCompilerError(f"kernel {kernel.name} has no program to time")
    ncores = {p.core: tgt.cores(p.core) for p in progs}
    active = streaming_cores(kernel, progs, ncores, traffic)
    loops = {p.core: loop_infos(kernel, p.body) for p in progs}
    groups = _groups(kernel, progs, fast)  # a timeline keeps the groups, drops extrapolation
    clock_per_byte = tgt.clock_hz
    hbm_cycles = (traffic.hbm_read + traffic.writeback * costs.writeback_cost) / (
        costs.hbm_bytes_per_s / clock_per_byte)
    l2_cycles = (traffic.total_read + traffic.total_write) / (costs.l2_bytes_per_s / tgt.clock_hz)
    slow_h = slow_l2 = 1.0
    for _ in range(2):
        rates = core_rates(costs, tgt, active, traffic.hit, slow_h, slow_l2)
        table = CostTable(kernel, costs, rates)
        cores, slices = _simulate(kernel, progs, table, loops, groups, fast and not record,
                                  record)
        pipes_cycles = _makespan(cores, ncores)
        if max(hbm_cycles, l2_cycles) <= pipes_cycles * 1.001 or slow_h * slow_l2 > 1.0:
            break
        slow_h = max(1.0, hbm_cycles / pipes_cycles)
        slow_l2 = max(1.0, l2_cycles / pipes_cycles)
    cycles = max(pipes_cycles, hbm_cycles, l2_cycles)
    bound = "pipes"
    if cycles > pipes_cycles * 1.001:
        bound = "HBM bandwidth" if hbm_cycles >= l2_cycles else "L2 bandwidth"
    elif slow_h * slow_l2 > 1.0:
        bound = "HBM bandwidth" if slow_h >= slow_l2 else "L2 bandwidth"
    flops = sum(c.instructions[1] for c in cores)
    reps = sum(c.instructions[2] for c in cores)
    cts = tuple(CoreTiming(c.block, c.core, c.end, c.busy, c.instructions[0]) for c in cores)
    return TimingReport(kernel.name, tgt.name, tgt.clock_hz, cycles, costs.launch_us * 1e-6,
                        roofline(kernel, flops, reps), bound, cts, traffic, len(groups),
                        time.perf_counter() - t0, costs, slices)


def streaming_cores(kernel: Kernel, progs: list, ncores: dict, traffic: GmTraffic) -> int:
    """How many cores stream GM at once, for the per-core DMA rates (``sim/costs.py``'s
    contention tables, measured with every active core streaming): the cores of one type,
    ``min(block_dim, cores)``; in a mixed kernel each core type counts in proportion to the
    GM bytes it moves per block against the type that moves most (gemm_gelu 4096^3: the AIVs
    read the workspace and write D, a tenth of what the AIC's A and B tiles take, so they add
    about a tenth of their count, not a core each; the chip-wide HBM and L2 caps bound the
    sum either way)."""
    if len(progs) == 1:
        return min(kernel.block_dim, ncores[progs[0].core])
    moved = {}
    for p in progs:
        reads, writes = set(), set()
        for ins, _ in iter_instrs(p.body):
            reads |= {r.tensor for r in ins.reads if r.tensor in kernel.param_map}
            writes |= {r.tensor for r in ins.writes if r.tensor in kernel.param_map}
        moved[p.core] = (sum(traffic.read_bytes.get(t, 0) for t in reads)
                         + sum(traffic.write_bytes.get(t, 0) for t in writes))
    most = max(moved.values())
    if most == 0:
        return sum(min(kernel.block_dim, n) for n in ncores.values())
    return max(1, round(sum(min(kernel.block_dim, ncores[c]) * b / most
                            for c, b in moved.items())))


@dataclass(frozen=True)
class _Core:
    block: int
    core: str
    end: float
    busy: tuple[float, ...]
    instructions: tuple[float, float, float]


def _groups(kernel: Kernel, progs: list, grouping: bool) -> list[list[int]]:
    if not grouping:
        return [[b] for b in range(kernel.block_dim)]
    by: dict[tuple, list[int]] = {}
    for b in range(kernel.block_dim):
        sig = tuple(block_signature(p.body, b) for p in progs)
        key = ("unique", b) if any(s is None for s in sig) else sig
        by.setdefault(key, []).append(b)
    return list(by.values())


def _simulate(kernel: Kernel, progs: list, table: CostTable, loops: dict, groups: list,
              fast: bool, record: bool) -> tuple[list[_Core], dict | None]:
    out: list[_Core] = []
    slices: dict | None = {} if record else None
    for members in groups:
        runs = _run_block(kernel, progs, table, loops, members[0], fast, record)
        for b in members:
            for r in runs:
                out.append(_Core(b, r.name, r.end(), tuple(r.busy), tuple(r.counts)))
                if slices is not None and r.rec is not None:
                    slices[(b, r.name)] = r.rec
    return out, slices


def _run_block(kernel: Kernel, progs: list, table: CostTable, loops: dict, block: int,
               fast: bool, record: bool) -> list[CoreRun]:
    # the AIV program of a 1:2 kernel runs on both Vector cores of the block, each its half
    cross = CrossCounters(tuple(n for _, n in kernel.streams(CoreType.AIV)))
    runs = [CoreRun(p.body, table, {BLOCK_IDX: block, SUB_BLOCK_IDX: sub}, loops[p.core], cross,
                    fast=fast, record=record, name=name)
            for p in progs for sub, name in kernel.streams(p.core)]
    gens = {r.name: r.run() for r in runs}

    def state() -> tuple:  # a core that consumed a flag and set another moves its clock
        return (cross.pending(),) + tuple(r.t for r in runs)

    while gens:
        before = state()
        progressed = False
        for name in list(gens):
            try:
                next(gens[name])
            except StopIteration:
                del gens[name]
                progressed = True
        if gens and not progressed and state() == before:
            raise InternalCompilerError(f"kernel {kernel.name} block {block}: cross-core waits "
                                        f"that no set releases ({', '.join(gens)})")
    return runs


def _makespan(cores: list[_Core], ncores: dict[CoreType, int]) -> float:
    """Blocks run on block % cores of their type (the two AIVs of a 1:2 block on 2 * block and
    2 * block + 1); a core runs its blocks one after another."""
    per: dict[tuple[str, int], float] = {}
    for c in cores:
        kind = core_type(c.core)
        n = ncores[kind]
        sub, subs = (int(c.core[3:]), 2) if c.core[3:] else (0, 1)
        key = (str(kind), (c.block * subs + sub) % n)
        per[key] = per.get(key, 0.0) + c.end
    return max(per.values())


__all__ = ["COST_SOURCES_910B", "CoreTiming", "TimingReport", "model_time", "parameter_line"]
