"""The schedules whose emitted projects are stored as golden files: every library kernel's
default schedule at a small size and at an LLM size (persistent loop, tails), a hand schedule
per vector kernel family, and the examples."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from ascendsched.algo import library as L
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.schedule.gemm import GemmSchedule

ROOT = Path(__file__).resolve().parents[2]


def _example(name: str) -> Callable[[], Schedule | GemmSchedule]:
    def make() -> Schedule | GemmSchedule:
        spec = importlib.util.spec_from_file_location(f"example_{name}",
                                                      ROOT / "examples" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        return mod.schedule()
    return make


def _rows(algo, rows: int, cores: int) -> Schedule:  # noqa: ANN001
    """Row tiles fused under the output's tile loop, bound to cores, double-buffered I/O."""
    out = algo.outputs[0].name
    s = Schedule(algo).split(out, "i", rows).bind(out, "i_o", cores)
    for st in algo.stages:
        if st is not algo.outputs[0]:
            s = s.compute_at(st.name, out, "i_o")
    for t in algo.inputs:
        if len(t.shape) == 2:
            s = s.buffer(t.name, 2)
    return s.buffer(out, 2)


CASES: dict[str, Callable[[], Schedule | GemmSchedule]] = {
    "vadd-default-8192": lambda: schedule_for(L.vadd(8192)),
    "vadd-default-1000000": lambda: schedule_for(L.vadd(1_000_000)),
    "mul_add_relu-default-4194304": lambda: schedule_for(L.fused_mul_add_relu(4_194_304)),
    "bias_add-default-1000x1000": lambda: schedule_for(L.bias_add(1000, 1000)),
    "softmax-default-8x1024": lambda: schedule_for(L.softmax(8, 1024)),
    "softmax-default-4096x4096": lambda: schedule_for(L.softmax(4096, 4096)),
    "softmax-rows-100x1000": lambda: _rows(L.softmax(100, 1000), 4, 7),
    "rmsnorm-default-1000x4096": lambda: schedule_for(L.rmsnorm(1000, 4096)),
    "rmsnorm-rows-100x1000": lambda: _rows(L.rmsnorm(100, 1000), 4, 3),
    "layernorm-default-8x1024": lambda: schedule_for(L.layernorm(8, 1024)),
    "layernorm-default-4096x4096": lambda: schedule_for(L.layernorm(4096, 4096)),
    "layernorm-rows-100x1000": lambda: _rows(L.layernorm(100, 1000), 4, 5),
    "gemm-default-256x256x256": lambda: schedule_for(L.gemm(256, 256, 256)),
    "gemm-default-1000x1000x1000": lambda: schedule_for(L.gemm(1000, 1000, 1000)),
    "gemm-default-4096x4096x4096": lambda: schedule_for(L.gemm(4096, 4096, 4096)),
    "gemm-hand-500x520x300": lambda: (
        GemmSchedule(L.gemm(500, 520, 300)).tile(128, 128, 128).split_k(64).buffer("l1", 2)
        .buffer("l0", 2).buffer("l0c", 2).bind(7).swizzle(2, "m")),
    "batched_gemm-default-8x512x512x128": lambda: schedule_for(L.batched_gemm(8, 512, 512, 128)),
    "gemm_int8-default-1000x1000x1000": lambda: schedule_for(L.gemm_int8(1000, 1000, 1000)),
    "example-softmax": _example("softmax"),
    "example-gemm": _example("gemm"),
}
