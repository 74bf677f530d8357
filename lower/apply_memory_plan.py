"""Apply a memory plan: fill ``Buffer.offsets`` from a :class:`MemoryPlan`.

Before/after::

    UB x_ub: float16[2048] x2          ->  UB x_ub: float16[2048] x2 at [0, 4096]

Returns the same kernel object when every buffer already has the planned offsets.
"""

from __future__ import annotations

from dataclasses import replace

from ascendsched.errors import InternalCompilerError
from ascendsched.lower.ir import Kernel
from ascendsched.lower.plan_memory import MemoryPlan


def apply_memory_plan(kernel: Kernel, plan: MemoryPlan) -> Kernel:
    """``kernel`` with each buffer's ``offsets`` set to the plan's (one per copy)."""
    if plan.kernel != kernel.name:
        raise InternalCompilerError(f"memory plan of {plan.kernel!r} applied to {kernel.name!r}")
    buffers = []
    changed = False
    for b in kernel.buffers:
        try:
            offs = plan.offsets(b.name)
        except KeyError:
            raise InternalCompilerError(f"memory plan has no placement for {b.name}") from None
        if len(offs) != b.copies:
            raise InternalCompilerError(f"memory plan gives {b.name} {len(offs)} offsets for "
                                        f"{b.copies} copies")
        if b.offsets != offs:
            b = replace(b, offsets=offs)
            changed = True
        buffers.append(b)
    return replace(kernel, buffers=tuple(buffers)) if changed else kernel
