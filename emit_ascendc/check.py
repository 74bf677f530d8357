"""Build an emitted project against the CPU runtime with g++ and run it on numpy inputs.

    project = emit_project(kernel, out_dir)
    binary = build_cpu(project)                 # g++ -fsanitize=address,undefined, cached
    run = run_cpu(binary, kernel, {"x": x, "y": y})
    run.outputs["z"], run.trace_jsonl           # same trace format as sim/trace.py
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ascendsched.dtypes import DType, bf16_bits, bfloat16, from_bf16_bits
from ascendsched.emit_ascendc.project import EmittedProject
from ascendsched.errors import (
    AscendSchedError,
    InternalCompilerError,
    KernelTimeoutError,
    ToolchainError,
)
from ascendsched.lower.ir import Kernel

_DEFAULT_CACHE = Path(tempfile.gettempdir()) / "ascendsched_cpu_builds"


@dataclass(frozen=True)
class CpuRun:
    outputs: dict[str, np.ndarray]
    trace_jsonl: str
    stderr: str = ""


class KernelAbort(InternalCompilerError):
    """The emitted kernel broke an AscendC rule at run time (the runtime's message says which)."""

    def __init__(self, message: str, stderr: str, trace_jsonl: str) -> None:
        super().__init__(message)
        self.stderr = stderr
        self.trace_jsonl = trace_jsonl


def build_cpu(project: EmittedProject, *, sanitize: bool = True,
              cache_dir: Path | None = None) -> Path:
    """Compile ``project``'s CPU driver with g++; return the binary.

    Binaries are content-addressed (sources, runtime headers, flags) in ``cache_dir``
    (default: a shared ``ascendsched_cpu_builds`` folder in the system temp dir), so an
    unchanged kernel is compiled once across projects and test sessions.
    """
    return _compile(project.name, project.cpu_main, [project.kernel_cpp, project.tiling_h],
                    project.runtime_dir, project.cpu_defines, [project.out_dir],
                    sanitize=sanitize, cache_dir=cache_dir, source_hint=project.kernel_cpp)


def build_source(name: str, source: Path, *, defines: tuple[str, ...] = (),
                 sanitize: bool = True, cache_dir: Path | None = None) -> Path:
    """Compile one C++17 file against the CPU runtime headers (runtime unit programs).

    ``defines`` are ``-D`` flags (the target macros the runtime needs); cached like
    :func:`build_cpu`.
    """
    from ascendsched.emit_ascendc.project import RUNTIME_DIR

    return _compile(name, Path(source), [], RUNTIME_DIR, tuple(defines), [Path(source).parent],
                    sanitize=sanitize, cache_dir=cache_dir, source_hint=Path(source))


def _compile(name: str, main: Path, extra: list[Path], runtime_dir: Path,
             defines: tuple[str, ...], includes: list[Path], *, sanitize: bool,
             cache_dir: Path | None, source_hint: Path) -> Path:
    gxx = shutil.which("g++")
    if gxx is None:
        raise ToolchainError(
            "g++ was not found on PATH; the CPU check of emitted AscendC needs a C++17 compiler. "
            "Install it with `apt-get install g++` (Debian/Ubuntu) and retry.")
    # -O0: with the sanitizers a kernel builds about 3x faster than at -O1 (3.4 s vs 9.8 s for a
    # GEMM tile); the runtime's one hot loop (Mmad's dot products) is optimized on its own.
    flags = ["-std=c++17", "-O0", "-g", "-pthread", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    if sanitize:
        flags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                  "-fno-omit-frame-pointer"]
    build = Path(cache_dir) if cache_dir is not None else _DEFAULT_CACHE
    build.mkdir(parents=True, exist_ok=True)
    sources = [main, *extra, *sorted(runtime_dir.glob("*.h*"))]
    digest = hashlib.sha256(" ".join(flags + list(defines)).encode())
    for s in sources:
        digest.update(s.read_bytes())
    binary = build / f"{name}_{digest.hexdigest()[:20]}"
    if binary.exists():
        return binary
    partial = build / f"{binary.name}.{os.getpid()}.tmp"
    cmd = [gxx, *flags, *defines, "-I", str(runtime_dir)]
    for inc in includes:
        cmd += ["-I", str(inc)]
    cmd += [str(main), "-o", str(partial)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(
            f"g++ failed to build the CPU check of kernel '{name}'.\n{proc.stderr}\n"
            f"Repro command: {shlex.join(cmd)}\nSource: {source_hint}")
    os.replace(partial, binary)  # atomic: concurrent builders of the same kernel agree
    return binary


def _to_bytes(arr: np.ndarray, dtype: DType) -> bytes:
    if dtype is bfloat16:
        return bf16_bits(np.asarray(arr, dtype=np.float32)).tobytes()
    return np.ascontiguousarray(arr, dtype=dtype.np).tobytes()


def _from_bytes(data: bytes, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    if dtype is bfloat16:
        return from_bf16_bits(np.frombuffer(data, dtype=np.uint16)).reshape(shape)
    return np.frombuffer(data, dtype=dtype.np).reshape(shape).copy()


def run_cpu(binary: Path, kernel: Kernel, inputs: dict[str, np.ndarray], *,
            timeout: float = 300.0) -> CpuRun:
    """Run a binary from :func:`build_cpu` over the whole grid on ``inputs`` (by param name)."""
    with tempfile.TemporaryDirectory(prefix=f"ascendsched_{kernel.name}_") as tmp:
        tmpd = Path(tmp)
        (tmpd / "in").mkdir()
        (tmpd / "out").mkdir()
        for p in kernel.params:
            if p.kind != "input":
                continue
            if p.name not in inputs:
                raise AscendSchedError(f"run_cpu: kernel {kernel.name} needs input {p.name!r}")
            arr = np.asarray(inputs[p.name])
            # a host-converted input is the user's array: the driver converts it (project.py)
            shape, dtype = (p.host.shape, p.host.dtype) if p.host else (p.shape, p.dtype)
            if arr.shape != shape:
                raise AscendSchedError(
                    f"run_cpu: input {p.name!r} has shape {arr.shape}, kernel wants {shape}")
            (tmpd / "in" / f"{p.name}.bin").write_bytes(_to_bytes(arr, dtype))
        trace_path = tmpd / "trace.jsonl"
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
        cmd = [str(binary), str(tmpd / "in"), str(tmpd / "out"), str(trace_path)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise KernelTimeoutError(
                f"the CPU run of kernel '{kernel.name}' did not finish within {timeout:g} s; "
                f"raise the limit (check(..., cpp_timeout=SECONDS) or `ascendsched check "
                f"--timeout SECONDS`) or shrink the problem; a kernel that never finishes "
                f"may be waiting on a flag: see the IR trace race check.\n"
                f"Repro command: {shlex.join(cmd)}") from None
        trace = trace_path.read_text() if trace_path.exists() else ""
        if proc.returncode != 0:
            raise KernelAbort(
                f"kernel '{kernel.name}' aborted in the CPU runtime (exit {proc.returncode}):\n"
                f"{proc.stderr.strip()}\nRepro command: {shlex.join(cmd)}", proc.stderr, trace)
        outputs = {
            p.name: _from_bytes((tmpd / "out" / f"{p.name}.bin").read_bytes(), p.dtype, p.shape)
            for p in kernel.params if p.kind == "output"
        }
        return CpuRun(outputs=outputs, trace_jsonl=trace, stderr=proc.stderr)
