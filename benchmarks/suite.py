"""Benchmark suites: library kernels at named shapes, each with its default search space.

``llm``: the shapes of a Llama-class layer (RMSNorm/LayerNorm/softmax and elementwise ops over
4096-16384 rows x 4096-11008 columns, a LayerNorm over GPT-3's 12288 and a softmax over a
Llama-2 vocabulary, 32 000; the layer's GEMMs;
attention-sized batched GEMMs; attention scores with their softmax as one mixed kernel).
``quick``: small shapes of the same kernels, for a report in a few minutes and for tests.
The SwiGLU-like elementwise kernel is the library's ``fused_mul_add_relu`` (a multiply, an add
and an activation per element, three inputs, one output), flattened to one axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched.algo.algorithm import Algorithm
from ascendsched.autotune.space import Space
from ascendsched.autotune.spaces import LIBRARY, library_space
from ascendsched.errors import AscendSchedError
from ascendsched.target import DEFAULT_TARGET, Target


@dataclass(frozen=True)
class Case:
    """One kernel of a suite: a library kernel, its sizes, and a label for the report."""

    kernel: str
    args: tuple[int, ...]
    label: str

    @property
    def cube(self) -> bool:
        return "gemm" in self.kernel

    @property
    def mixed(self) -> bool:
        """A GEMM with a Vector epilogue: one kernel on the Cube and the Vector cores."""
        return self.kernel == "gemm_softmax"

    def algo(self) -> Algorithm:
        return LIBRARY[self.kernel](*self.args)

    def space(self, target: Target = DEFAULT_TARGET) -> Space:
        return library_space(self.kernel, *self.args, target=target)

    @property
    def slug(self) -> str:
        return f"{self.kernel}_{'x'.join(map(str, self.args))}"


LLM = (
    Case("rmsnorm", (4096, 4096), "RMSNorm 4096x4096"),
    Case("rmsnorm", (16384, 4096), "RMSNorm 16384x4096"),
    Case("layernorm", (4096, 4096), "LayerNorm 4096x4096"),
    # rows too wide for one tile (GPT-3's hidden size): pieces of rows over every core
    Case("layernorm", (4096, 12288), "LayerNorm 4096x12288"),
    Case("softmax", (4096, 4096), "softmax 4096x4096"),
    Case("softmax", (8192, 8192), "softmax 8192x8192"),
    # a Llama-2 vocabulary: no tile holds a row, the statistics are read in chunks
    Case("softmax", (4096, 32000), "softmax 4096x32000 (vocabulary)"),
    Case("fused_mul_add_relu", (4096 * 11008,), "SwiGLU-like 4096x11008"),
    Case("vadd", (4096 * 4096,), "residual add 4096x4096"),
    Case("bias_add", (4096, 11008), "bias add 4096x11008"),
    Case("gemm", (4096, 4096, 4096), "GEMM 4096^3 fp16"),
    Case("gemm", (4096, 11008, 4096), "GEMM 4096x11008x4096 (up)"),
    Case("gemm", (4096, 4096, 11008), "GEMM 4096x4096x11008 (down)"),
    Case("batched_gemm", (32, 1024, 1024, 128), "attention QK^T 32x1024x1024x128"),
    Case("batched_gemm", (32, 1024, 128, 1024), "attention PV 32x1024x128x1024"),
    Case("gemm_int8", (4096, 4096, 4096), "GEMM 4096^3 int8"),
    # scores on the Cube, their softmax on the Vector cores, one mixed kernel: rows of 4096
    # keys are wider than a Cube tile, so row blocks (CubePlan.row_blocks)
    Case("gemm_softmax", (4096, 4096, 128), "attention scores + softmax 4096x4096x128"),
)

QUICK = (
    Case("rmsnorm", (64, 1024), "RMSNorm 64x1024"),
    Case("softmax", (64, 1024), "softmax 64x1024"),
    Case("vadd", (65536,), "add 65536"),
    Case("gemm", (512, 512, 512), "GEMM 512^3 fp16"),
)

TINY = (  # for tests: two kernels that lower in a fraction of a second
    Case("vadd", (65536,), "add 65536"),
    Case("gemm", (256, 256, 256), "GEMM 256^3 fp16"),
)

SUITES: dict[str, tuple[Case, ...]] = {"llm": LLM, "quick": QUICK, "tiny": TINY}


def suite(name: str) -> tuple[Case, ...]:
    if name not in SUITES:
        raise AscendSchedError(f"no benchmark suite '{name}'; suites: {', '.join(SUITES)}")
    return SUITES[name]
