"""Functional execution of kernel IR with numpy, optionally recording the dynamic trace.

``run_kernel(kernel, inputs)`` runs every program of every block (``block_idx`` bound) in
program order. Memory is bytes: GM tensors are byte arrays (bfloat16 as 16-bit patterns); for a
memory-planned kernel (every buffer has ``offsets``) each on-chip scope of each block is ONE byte
array of the scope's capacity and every buffer copy lives at its planned offset, so two live
buffers that overlap produce wrong numbers; unplanned kernels give every buffer copy its own
array. Ops follow the semantics in the docstrings of ``lower/ir.py`` and (cube ops)
``lower/cube_ops.py``; each op is one entry of ``_HANDLERS`` (``sim/machine.py``, which runs the
programs; the DMA and vector ops are in ``sim/vector.py``, the cube ops in ``sim/cube.py``).
The kernel must keep the IR contract: ``run_kernel`` runs ``lower/verify.py`` first (its
``InternalCompilerError`` names the instruction and the rule), and the handlers trust it; what
only execution can tell (a block-broadcast source holding one value, an Mmad reading bytes no
copy loaded, a cross-core deadlock) the handlers check themselves.

Choices where ir.py is silent (each a single place in those modules):
- Output tensors start as 0xFF bytes (NaN for floats), so unwritten outputs show; workspaces
  start zeroed; on-chip memory starts zeroed. DMA pad bytes (between a UB row's last element and
  its 32 B round-up) are left unchanged.
- A block-broadcast source (column stride 0) must hold the same bytes in the lanes it feeds
  (``min(cols, 32 / elem)`` lanes of the block at each row start), else the hardware would read
  different values than the IR means: an ``InternalCompilerError``.
- Compare-mask operands (``vec_cmp`` dst, ``vec_select`` mask) may have any row stride in bytes;
  mask bits beyond ``cols`` in the written bytes are 0.
- float16 math is done in float16, float32 in float32 (numpy rounds per op); ``rsqrt`` and
  ``reciprocal`` carry the target's modelled error (``sim/precision.py``: a deterministic
  relative error within ``target.approx_rel_error``), a ``vec_reduce`` sum is a binary tree
  per row (one repeat), as the hardware sums (same module); bfloat16 results are rounded with
  ``dtypes.store``; integer results wrap, except a Cast's, which saturate.
- Cube (AIC) ops live in ``sim/cube.py``; L1/L0A/L0B/L0C start as 0xFF bytes (poison), UB and
  the rest as zeros.
- Cross-core flags use mode-2 counters with ONE AIV per block (the IR has no sub-block index).
- After its body each program runs ``ir.program_epilogue`` (AIC: a ``barrier ALL``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ascendsched.lower.ir import Kernel
from ascendsched.lower.verify import verify
from ascendsched.sim.machine import _Machine
from ascendsched.sim.trace import Trace

__all__ = ["SimResult", "run_kernel"]


@dataclass(frozen=True)
class SimResult:
    """Every GM output tensor (numpy storage dtype, tensor shape) and the trace if requested."""

    outputs: dict[str, np.ndarray]
    trace: Trace | None = None


def run_kernel(kernel: Kernel, inputs: dict[str, np.ndarray], *, trace: bool = False
               ) -> SimResult:
    """Execute ``kernel`` on ``inputs`` (one array per GM input tensor, by name). The kernel
    is verified first; its HardEvents and event ids are the trace checker's to judge."""
    verify(kernel, events=False)
    m = _Machine(kernel, inputs, trace)
    m.run()
    return SimResult(m.outputs(), Trace(tuple(m.events)) if trace else None)
