"""Compile time and memory over a size sweep: every library kernel, algorithm to emitted text.

Each case runs in a fresh worker process (so its peak RSS is its own): the default (or hand)
schedule, then ``compile_kernel`` into a temp dir with a PassLog (CPU time per step, emission
included). Reported: CPU seconds (import excluded: the parent imports every compiler module
before it forks the workers; this machine sets PYTHONDONTWRITEBYTECODE, so a lazy import inside
``lower`` would otherwise charge a source compile to the kernel), the best of ``--repeat`` fresh
processes, peak RSS, statements (IR instructions), syncs, and the per-step CPU split in the
groups of ``PASSES`` (vector kernels include rows of a 32 000-word vocabulary, which no tile
holds: their statistics are read in chunks, and a column sum, whose rows are combined
pairwise); then, per kernel and schedule, the growth from
the smallest to the largest size, and a last line on the goals (every case under 0.5 s and 300 MB, every family within 2x
from its fastest to its slowest size) naming what misses them. Run::

    python benchmarks/compile_scaling.py [--quick] [--only NAME] [--jobs N] [--repeat R] [--csv FILE]
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import random
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

GEMM_SIZES = [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
              (8192, 8192, 8192), (4096, 11008, 4096)]
# tails in M (any sequence length), in every dimension, and a thin M: more tile classes
TAIL_GEMM_SIZES = [(17, 4096, 4096), (1000, 4096, 4096), (4000, 4096, 4096), (1000, 1000, 1000)]
# a hand tiling with tails on few Cube cores: each tile class is a persistent loop of several
# iterations (on 24 cores most classes are one tile per core, no loop), the costliest structure
FEW_CORES = (2, 8)
BATCHED_SIZES = [(8, 512, 512, 128), (32, 1024, 1024, 128), (64, 2048, 2048, 128)]  # attention
# GEMMs with an epilogue, default schedules: mixed Cube + Vector kernels (GELU, a row scale, a
# row softmax, bias on the Cube then GELU, a residual add, a batched row scale) and the
# Fixpipe's own (gemm_epilogue: its default stages); every other library kernel is above
SQUARE = [(512, 512, 512), (1024, 1024, 1024), (4096, 4096, 4096)]
MIXED = {"gemm_gelu": SQUARE, "gemm_row_scale": SQUARE,
         "gemm_softmax": [(512, 512, 128), (1024, 1024, 128), (4096, 1024, 128)],
         "gemm_bias_gelu": SQUARE, "gemm_residual": SQUARE, "gemm_epilogue": SQUARE,
         "batched_gemm_row_scale": BATCHED_SIZES}
MIXED_TAILS = {"gemm_gelu": (1000, 1000, 1000), "gemm_row_scale": (1000, 1000, 1000),
               "gemm_softmax": (1000, 1000, 128), "gemm_bias_gelu": (1000, 1000, 1000),
               "gemm_residual": (1000, 1000, 1000)}
# a row softmax over rows wider than a Cube tile (attention over 4096 and 8192 keys, an LM
# head's 32 000 logits): row blocks (CubePlan.row_blocks), the widest rows read in chunks
ROW_BLOCKS = [(2048, 4096, 128), (4096, 8192, 128), (4096, 32000, 4096)]
VECTOR_KERNELS = ("vadd", "mul_add_relu", "bias_add", "softmax", "rmsnorm", "layernorm",
                  "column_sum")
ROWS = (64, 1024, 16384)
COLS = (256, 4096, 16384)
VOCAB = 32000  # a Llama-2 vocabulary
GOAL_CPU_S, GOAL_RSS_MB, GROWTH = 0.5, 300, 2.0  # per case, and slowest / fastest per family
# column -> the pipeline steps (lower/pipeline.py STEPS, then "emit") it adds up
PASSES = {"build": ("build",), "verify": ("verify built", "verify final"),
          "deps": ("dependences",), "sync": ("sync template", "place syncs",
                                             "remove redundant syncs", "allocate event ids",
                                             "template syncs"), "emit": ("emit",)}


@dataclass(frozen=True)
class Case:
    kernel: str
    shape: tuple[int, ...]
    schedule: str  # "default" or a hand schedule's name

    @property
    def label(self) -> str:
        return f"{self.kernel} {'x'.join(map(str, self.shape))} [{self.schedule}]"


def cases(quick: bool) -> list[Case]:
    out: list[Case] = []
    sizes = GEMM_SIZES[1::2] if quick else GEMM_SIZES
    for m, n, k in sizes:
        out.append(Case("gemm", (m, n, k), "default"))
        out.append(Case("gemm", (m, n, k), "128x256x256 k64 db 16 cores"))
        out.append(Case("gemm", (m, n, k), "128x128x256 k128 db 20 cores swizzle 4"))
    tails = TAIL_GEMM_SIZES[::2] if quick else TAIL_GEMM_SIZES
    out += [Case("gemm", shape, "default, tails") for shape in tails]
    out += [Case("gemm", shape, f"128x256x128 k32 db {cores} cores swizzle 4, tails")
            for cores in FEW_CORES for shape in tails]
    for m, n, k in sizes:
        out.append(Case("gemm_int8", (m, n, k), "default"))
    # int8 GEMM dequantised per column on the Fixpipe (an LLM projection; ~0.2 s to compile)
    out.append(Case("gemm_dequant", (4096, 11008, 4096), "default"))
    for shape in BATCHED_SIZES[::2] if quick else BATCHED_SIZES:
        out.append(Case("batched_gemm", shape, "default"))
    for name, shapes in MIXED.items():
        out += [Case(name, shape, "default") for shape in (shapes[::2] if quick else shapes)]
        if name in MIXED_TAILS:  # edge tiles in M and N: a mixed kernel's slowest structure
            out.append(Case(name, MIXED_TAILS[name], "default, tails"))
    out += [Case("gemm_softmax", shape, "default, row blocks")
            for shape in (ROW_BLOCKS[::2] if quick else ROW_BLOCKS)]
    rows = ROWS[::2] if quick else ROWS
    cols = COLS[::2] if quick else COLS
    for name in VECTOR_KERNELS:
        for r in rows:
            for c in cols:
                shape = (r * c,) if name in ("vadd", "mul_add_relu") else (r, c)
                out.append(Case(name, shape, "default"))
        if name in ("softmax", "rmsnorm", "layernorm"):
            for r in rows:
                out.append(Case(name, (r, 4096), "8K-element row tiles 40 cores db"))
            for r in rows:  # rows no tile holds: statistics in chunks (schedule/chunks.py)
                out.append(Case(name, (r, VOCAB), "default, vocabulary rows"))
    return out


RANDOM = "default, random shape"  # the schedule label of --random's cases


def random_cases(n: int, seed: int) -> list[Case]:
    """``n`` library kernels at shapes drawn log-uniformly (seeded): rows up to 23 000 and
    columns up to 46 000 for the vector kernels, M, N, K from 8 to 8192 for the GEMMs, a
    batch up to 64 for the batched one."""
    rng = random.Random(seed)
    kernels = ("gemm", "gemm_int8", "batched_gemm", *MIXED, *VECTOR_KERNELS)

    def size(lo: float, hi: float) -> int:
        return int(round(2 ** rng.uniform(lo, hi)))

    out = []
    for _ in range(n):
        k = rng.choice(kernels)
        if k in ("vadd", "mul_add_relu"):
            shape: tuple[int, ...] = (size(4, 27),)
        elif k in VECTOR_KERNELS:
            shape = (size(0, 14.5), size(3, 15.5))
        elif k.startswith("batched"):
            shape = (size(0, 6), size(4, 12), size(4, 12), size(4, 12))
        else:
            shape = (size(3, 13), size(3, 13), size(3, 13))
        out.append(Case(k, shape, RANDOM))
    return out


def schedule_of(case: Case):  # noqa: ANN201 -- Schedule | GemmSchedule
    from ascendsched.algo import library as L
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule import Schedule
    from ascendsched.schedule.gemm import GemmSchedule

    if case.kernel == "gemm_int8":
        return schedule_for(L.gemm_int8(*case.shape))
    if case.kernel == "gemm_dequant":
        return schedule_for(L.gemm_dequant(*case.shape))
    if case.kernel == "batched_gemm":
        return schedule_for(L.batched_gemm(*case.shape))
    if case.kernel in MIXED:
        return schedule_for(getattr(L, case.kernel)(*case.shape))
    if case.kernel == "gemm":
        algo = L.gemm(*case.shape)
        if case.schedule.startswith("default"):
            return schedule_for(algo)
        if case.schedule.startswith("128x256x128"):
            cores = int(case.schedule.split()[3])  # "128x256x128 k32 db <cores> cores ..."
            return (GemmSchedule(algo).tile(128, 256, 128).split_k(32).buffer("l1", 2)
                    .buffer("l0", 2).bind(cores).swizzle(4, "m"))
        if case.schedule.startswith("128x256x256"):
            return (GemmSchedule(algo).tile(128, 256, 256).split_k(64).buffer("l1", 2)
                    .buffer("l0", 2).bind(16))
        return (GemmSchedule(algo).tile(128, 128, 256).split_k(128).buffer("l1", 2)
                .buffer("l0", 2).buffer("l0c", 2).bind(20).swizzle(4, "m"))
    make = {"vadd": L.vadd, "mul_add_relu": L.fused_mul_add_relu, "bias_add": L.bias_add,
            "softmax": L.softmax, "rmsnorm": L.rmsnorm, "layernorm": L.layernorm,
            "column_sum": L.column_sum}[case.kernel]
    algo = make(*case.shape)
    if case.schedule.startswith("default"):
        return schedule_for(algo)
    rows = max(1, 8 * 1024 // case.shape[1])  # 8 rows of 1024 columns (temporaries fit UB)
    s = Schedule(algo).split(algo.outputs[0].name, "i", rows)
    cores = min(40, -(-case.shape[0] // rows))
    if cores > 1:
        s = s.bind(algo.outputs[0].name, "i_o", cores)
    for st in algo.stages:
        if st is not algo.outputs[0]:
            s = s.compute_at(st.name, algo.outputs[0].name, "i_o")
    for t in algo.inputs:
        if len(t.shape) == 2:
            s = s.buffer(t.name, 2)
    return s.buffer(algo.outputs[0].name, 2)


def run(case: Case) -> dict[str, object]:
    """Compile one case in this (fresh) process; its measurements."""
    from ascendsched.api.compile import compile_kernel
    from ascendsched.lower.ir import iter_instrs
    from ascendsched.lower.pass_log import PassLog
    from ascendsched.lower.pipeline import STEPS, SYNC_STEPS
    from ascendsched.lower.sync_ir import Sync

    assert set(PASSES["sync"]) == set(SYNC_STEPS) and {
        n for ns in PASSES.values() for n in ns} <= set(STEPS) | {"emit"}
    t0 = time.process_time()
    try:
        sched = schedule_of(case)
        t1 = time.process_time()
        log = PassLog()
        with tempfile.TemporaryDirectory() as d:
            k, _ = compile_kernel(sched, Path(d), log=log)
        t2 = time.process_time()
    except Exception as e:  # noqa: BLE001 -- a failing case is a result of the sweep
        return {"case": case.label, "error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
    instrs = [i for p in k.programs for i, _ in iter_instrs(p.body)]
    cpu = log.cpu()
    return {
        "case": case.label, "kernel": case.kernel, "schedule": case.schedule,
        "cpu": t2 - t0, "schedule_s": t1 - t0, "lower_s": sum(cpu.get(n, 0.0) for n in STEPS),
        **{f"{col}_s": sum(cpu.get(n, 0.0) for n in steps) for col, steps in PASSES.items()},
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "statements": sum(1 for i in instrs if not isinstance(i, Sync)),
        "syncs": sum(1 for i in instrs if isinstance(i, Sync)), "blocks": k.block_dim,
    }


def preload() -> None:
    """Import every compiler module (the layers ``compile_kernel`` may reach lazily),
    so a worker forked afterwards measures compiling, not importing."""
    import importlib
    import pkgutil

    import ascendsched

    for pkg in ("algo", "schedule", "target", "lower", "emit_ascendc", "sim", "api"):
        mod = importlib.import_module(f"ascendsched.{pkg}")
        for info in pkgutil.walk_packages(mod.__path__, f"ascendsched.{pkg}."):
            importlib.import_module(info.name)
    del ascendsched


def best(rows: list[dict[str, object]]) -> dict[str, object]:
    """The repeat with the least CPU time (an error wins: it is a result)."""
    errors = [r for r in rows if "error" in r]
    return errors[0] if errors else min(rows, key=lambda r: r["cpu"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every other size only")
    ap.add_argument("--only", help="cases whose label contains this text")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (timings are CPU "
                    "time per process; more jobs share the machine's memory bandwidth)")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per case; the least "
                    "CPU time is reported (the machine's noise only ever adds time)")
    ap.add_argument("--csv", type=Path, help="write every row to this CSV file")
    ap.add_argument("--random", type=int, default=0, metavar="N",
                    help="also N library kernels at randomly drawn shapes")
    ap.add_argument("--seed", type=int, default=0, help="the seed of --random's shapes")
    args = ap.parse_args()
    todo = [c for c in cases(args.quick) + random_cases(args.random, args.seed)
            if not args.only or args.only in c.label]
    if not todo:
        ap.error(f"--only {args.only!r}: no case's label contains it (labels look like "
                 f"'{cases(True)[0].label}')")
    preload()
    ctx = mp.get_context("fork")
    rows: list[dict[str, object]] = []
    head = (f"{'case':<64}{'CPU s':>7}{'RSS MB':>8}{'stmts':>7}{'syncs':>7}"
            + "".join(f"{col:>7}" for col in PASSES))
    print(head)
    with ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
        runs = pool.imap(run, [c for c in todo for _ in range(args.repeat)])
        for _ in todo:
            row = best([next(runs) for _ in range(args.repeat)])
            rows.append(row)
            if "error" in row:
                print(f"{row['case']:<64} ERROR {row['error']}")
                continue
            print(f"{row['case']:<64}{row['cpu']:>7.3f}{row['rss_mb']:>8.0f}"
                  f"{row['statements']:>7}{row['syncs']:>7}"
                  + "".join(f"{row[col + '_s']:>7.3f}" for col in PASSES), flush=True)
    ok = [r for r in rows if "error" not in r]
    if not ok:
        print(f"\n0 of {len(rows)} cases compiled")
        sys.exit(1)
    print(f"\n{len(ok)} of {len(rows)} cases compiled; slowest {max(r['cpu'] for r in ok):.3f} s "
          f"CPU, largest peak RSS {max(r['rss_mb'] for r in ok):.0f} MB")
    print("growth, smallest to largest size (CPU s):")
    fam: dict[tuple, list[dict]] = {}
    for r in ok:
        if r["schedule"] == RANDOM:
            continue
        fam.setdefault((r["kernel"], r["schedule"]), []).append(r)
    steep: list[str] = []  # families whose slowest size takes over GROWTH x the fastest
    for (kern, sched), rs in fam.items():
        lo, hi = rs[0]["cpu"], rs[-1]["cpu"]
        worst = max(r["cpu"] for r in rs)
        if worst > GROWTH * min(r["cpu"] for r in rs):
            steep.append(f"{kern} [{sched}]")
        # sizes whose kernels have the same structure (statements and syncs): what the
        # problem size alone costs, apart from new tile classes, tails or a persistent loop
        shapes: dict[tuple, list[float]] = {}
        for r in rs:
            shapes.setdefault((r["statements"], r["syncs"]), []).append(r["cpu"])
        same = max(max(v) / max(min(v), 1e-9) for v in shapes.values())
        print(f"  {kern:<24}{sched:<42}{lo:>7.3f} -> {hi:>7.3f}  (max {worst:.3f}, "
              f"x{worst / max(min(r['cpu'] for r in rs), 1e-9):.2f} max/min; "
              f"{len(shapes)} structures, x{same:.2f} within one)")
    # the goals of the scalable-compile issue, as this run measured them
    sweep = [r for r in rows if not r["case"].endswith(f"[{RANDOM}]")]
    slow = [r["case"] for r in sweep if "error" not in r
            and (r["cpu"] > GOAL_CPU_S or r["rss_mb"] > GOAL_RSS_MB)]
    done = sum(1 for r in sweep if "error" not in r)
    print(f"\ngoals: {done - len(slow)} of {len(sweep)} cases under {GOAL_CPU_S} s CPU and "
          f"{GOAL_RSS_MB} MB{' (over: ' + '; '.join(slow) + ')' if slow else ''}; "
          f"{len(fam) - len(steep)} of {len(fam)} families within x{GROWTH} from fastest to "
          f"slowest size{' (over: ' + '; '.join(steep) + ')' if steep else ''}")
    drawn = [r for r in rows if r["case"].endswith(f"[{RANDOM}]")]
    if drawn:
        cpu = sorted(r["cpu"] for r in drawn if "error" not in r)
        over = [r for r in drawn if "error" in r or r["cpu"] > GOAL_CPU_S
                or r["rss_mb"] > GOAL_RSS_MB]
        print(f"random shapes (seed {args.seed}): {len(drawn) - len(over)} of {len(drawn)} "
              f"under {GOAL_CPU_S} s CPU and {GOAL_RSS_MB} MB; median {cpu[len(cpu) // 2]:.3f} s, "
              f"slowest {cpu[-1]:.3f} s" + "".join(
                  f"\n  over: {r['case']} "
                  + (r["error"] if "error" in r else f"{r['cpu']:.3f} s") for r in over))
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
