"""Sync counts of a kernel for benchmark reports and the autotuner: sets, waits and barriers,
executed (by block 0) and in the program text.

    for k in 0..4: wait; load; set; wait; add; set; barrier V
    ->  {"sets": 8, "waits": 8, "barriers": 4, "pipe_all": 0,
         "static": {"sets": 2, "waits": 2, "barriers": 1, "pipe_all": 0},
         "per_iteration": {"k": {"sets": 2, "waits": 2, "barriers": 1, "pipe_all": 0}}}
"""

from __future__ import annotations

from ascendsched.lower.ir import For, If, Instr, Kernel, Stmt
from ascendsched.lower.sync_ir import Barrier, SetFlag, WaitFlag
from ascendsched.target.model import Pipe


def sync_stats(kernel: Kernel) -> dict[str, object]:
    """Sync counts for benchmark reports.

    ``sets``/``waits``/``barriers``/``pipe_all``: executed by one block (block 0) in total;
    ``static``: instructions in the program text; ``per_iteration``: for each loop variable,
    the syncs directly in its body (executed once per iteration).
    """
    static = {"sets": 0, "waits": 0, "barriers": 0, "pipe_all": 0}
    dynamic = dict(static)
    per_iter: dict[str, dict[str, int]] = {}

    def kind(s: Instr) -> str | None:
        if isinstance(s, SetFlag):
            return "sets"
        if isinstance(s, WaitFlag):
            return "waits"
        if isinstance(s, Barrier):
            return "pipe_all" if s.pipe == Pipe.ALL else "barriers"
        return None

    def walk(body: tuple[Stmt, ...], env: dict[str, int], loop: str | None, times: int) -> None:
        for s in body:
            if isinstance(s, Instr):
                k = kind(s)
                if k:
                    dynamic[k] += times
            elif isinstance(s, For):
                if _has_if(s.body):
                    for i in range(s.extent):
                        walk(s.body, {**env, s.var: i}, s.var, times)
                elif s.extent:
                    walk(s.body, {**env, s.var: 0}, s.var, times * s.extent)
            elif s.evaluate(env):
                walk(s.body, env, loop, times)

    def walk_static(body: tuple[Stmt, ...], loop: str | None) -> None:
        for s in body:
            if isinstance(s, Instr):
                k = kind(s)
                if k:
                    static[k] += 1
                    if loop is not None:
                        d = per_iter.setdefault(loop, {"sets": 0, "waits": 0, "barriers": 0,
                                                       "pipe_all": 0})
                        d[k] += 1
            else:
                walk_static(s.body, s.var if isinstance(s, For) else loop)

    for p in kernel.programs:
        walk(p.body, {"block_idx": 0}, None, 1)
        walk_static(p.body, None)
    return {**dynamic, "static": static, "per_iteration": per_iter}


def _has_if(body: tuple[Stmt, ...]) -> bool:
    return any(isinstance(s, If) or (isinstance(s, For) and _has_if(s.body)) for s in body)
