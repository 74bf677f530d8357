"""Synchronise a GEMM through its tail-free template: one analysis for every tile class.

``build_gemm`` gives each class of equal tiles (interior strips, the last strip, M edge, N
edge, corner) its own persistent loop and peels the K tail, so with tails in M, N and K a
kernel has five copies of the tile body and two of the K step; the sync passes' cost grows
with the square of the statements (GEMM 1000^3 tiled 128x256x128 on 2 cores: 70 statements,
about 1 s), while every copy is the interior tile's body with smaller extents. The *template*
is the same GEMM padded to whole tiles: one class of full tiles numbered and spread over the
cores as the kernel's tiles are, and its K tail a whole K step when that step has as many L0
steps as a full one (else the kernel's K structure). The sync steps run on the template; its
syncs go into every class loop and peeled step of the kernel at the same places::

    template:  set P; for t: [if tile exists:] body(t) with syncs; wait P
    kernel:    set P; for t0: body0(run0) with syncs; for t1: body1(run1) ...; wait P

Why that is exact (an embedding of the kernel's run into the template's). Each core runs its
tiles in the template's order (tile ``T`` on core ``T % cores``, classes numbered one after
the other), so the k-th tile a core runs is the template's trip k, and the kernel's buffer
copies follow the same running number (``tile_loops.ClassRun.run``). Every kernel
statement instance maps to the template instances at the same place of the same trip (a
peeled step to its loop's last trip; a loop of loads with no sync inside to the template's
loop as a whole): same pipe, same buffer copy, and on-chip bytes that are a subset of theirs
(checked here, on the footprints the analysis uses, ``cube_ops.cube_footprints``; an Mmad
that reads its C tile maps to one that does). The kernel's syncs are the template's at the
same places, so between two mapped instances it runs the same flag and barrier events in the
same order: every happens-before chain of the template exists in the kernel, every set meets
the wait it meets there, ids and budgets are the template's. A conflict between two kernel
instances is a conflict of their images, which the template orders. Two additions: GM is left
out because a plain GEMM's AIC neither reads what it writes nor writes one element twice, and
an edge tile's Mmads too small for the hardware to order (the template's big ones are) get a
``PipeBarrier<PIPE_M>`` each (``sync_transplant._barriered``). Where any of this does not
hold (buffers that differ, a statement without an image that holds it, a sync the kernel's
shape cannot copy), the kernel is synchronised by itself, as before.

A mixed kernel (``build_mixed``: a Vector epilogue) has the same AIC program but for the
Fixpipe, which writes a workspace slot instead of the output, and an AIV program beside it.
Its template is a *hybrid*: the AIC program of the padded plan (``build_mixed_cube``) and the
kernel's own AIV program (its ids kept; intra-core syncs are per core, so the AIV is
synchronised exactly as it would be alone). The cross-core channels are planned on the kernel
itself (they need the shared loop skeleton the template does not have, ``cross_core_sync``),
and they go into the kernel last as before. The AIC's one GM dependence kind is a Fixpipe
writing a workspace slot it wrote ``copies`` tiles earlier; in the kernel the channels order
it (``leave_to_cross``), so the template leaves its own out, after checking that every such
dependence of the kernel is ordered so (``leave_workspace_to_cross``; else it keeps them and
the template over-synchronises, never under). The transplant then copies the AIC's syncs as
for a GEMM and takes the AIV program with its syncs as it is (``apply_template_syncs``).
Where later tile classes' AIV bodies mirror the first class's (the same epilogue with fewer
rows: ``class_mirror.py``, which says why copying is exact), the hybrid keeps the first class
alone and the mirrors take its syncs; where a core runs several of those bodies in turn, the
first class's alone in a loop of as many trips as all class loops have.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ascendsched.algo.gemm_spec import GemmSpec
from ascendsched.algo.gemm_vector_epilogue import VectorEpilogue
from ascendsched.lower.build_gemm import build_gemm, class_runs
from ascendsched.lower.build_mixed import build_mixed_cube
from ascendsched.lower.class_mirror import class_mirror, mirrored_syncs, without_mirrors
from ascendsched.lower.cross_core_sync import CrossPlan, leave_to_cross
from ascendsched.lower.ir import Instr, Kernel, Program, Stmt, StmtMutator, copied, iter_instrs
from ascendsched.lower.polyhedral import Dependences, analyze_dependences
from ascendsched.lower.sync_ir import Sync
from ascendsched.lower.sync_transplant import transplanted
from ascendsched.schedule.cube_plan import CubePlan
from ascendsched.schedule.gemm_records import GemmTiling, Swizzle, TileClass
from ascendsched.schedule.schedule import Scheduled
from ascendsched.target import CoreType, Target


def sync_template(sched: Scheduled, kernel: Kernel, target: Target) -> Kernel:
    """The kernel the sync steps analyse: ``kernel``'s tail-free template, with ``kernel``'s
    planned buffers, where every statement of ``kernel``'s AIC program has its image there
    (module docstring; a mixed kernel's template keeps its AIV program but the classes that
    mirror the first); else ``kernel`` itself."""
    plan = sched.cube
    tp = _template_plan(plan) if plan is not None else None
    if tp is None or not _gm_free(kernel):
        return kernel
    assert plan is not None
    mixed = plan.vector_epilogue is not None
    # what the builders read of a plan
    tmpl = build_mixed_cube(tp, target) if mixed else build_gemm(tp, target)  # type: ignore[arg-type]
    mine = tuple(b for b in kernel.buffers if b.name in tmpl.buffer_map)
    if tmpl.buffers != tuple(replace(b, offsets=None) for b in mine):
        return kernel
    # the kernel's bytes: where its plan reuses space, the template orders that reuse too
    if mixed:  # the template's AIC beside the kernel's AIV, whose ids stay (module docstring)
        inputs = tuple(p for p in tmpl.params if p.kind == "input")
        names = {p.name for p in inputs}
        # the AIC's ids start above the kernel's, which the cross-core plan names
        tmpl = Kernel(
            kernel.name, inputs + tuple(p for p in kernel.params if p.name not in names),
            kernel.buffers, kernel.block_dim, (), target, tmpl.notes, kernel.next_id,
            kernel.sub_blocks).with_programs(
            (Program(CoreType.AIC, copied(tmpl.programs[0].body)), _aiv_to_analyse(kernel)))
    else:
        tmpl = replace(tmpl, buffers=kernel.buffers)
    if transplanted(kernel, tmpl, class_runs(plan, target, every_loop=mixed)) is None:
        return kernel
    return tmpl


def apply_template_syncs(kernel: Kernel, template: Kernel, synced: Kernel,
                         sched: Scheduled) -> Kernel | None:
    """``kernel`` with the syncs of ``synced`` (``template`` after the sync steps) at the
    same places (a mixed kernel's AIV program: ``synced``'s, syncs and all, each mirror class
    with the first class's, ``class_mirror.mirrored_syncs``); ``synced`` itself when the
    template is the kernel. None: a sync sits where the kernel's shape cannot copy it (inside
    a loop the kernel runs shorter or as one instruction): synchronise the kernel by
    itself."""
    if template is kernel:
        return synced
    plan = sched.cube
    assert plan is not None
    mixed = plan.vector_epilogue is not None
    if mixed:
        aiv = synced.program(CoreType.AIV)
        assert aiv is not None
        body = aiv.body
        mirror = class_mirror(kernel)
        if mirror is not None:  # the mirror classes take the first class's syncs
            own = kernel.program(CoreType.AIV)
            assert own is not None
            got = mirrored_syncs(own.body, body, mirror)
            if got is None:
                return None
            body = got
        kernel = kernel.replace_body(CoreType.AIV, _fresh_syncs(body))
    return transplanted(kernel, synced, class_runs(plan, kernel.target, every_loop=mixed))


def leave_workspace_to_cross(deps: Dependences, cross: CrossPlan, kernel: Kernel
                             ) -> Dependences:
    """The dependences of a mixed kernel's template (``deps``), its AIV's left to the
    cross-core channels as ``kernel``'s are (``leave_to_cross``), and its AIC's on GM left out
    when the channels order every GM dependence of ``kernel``'s AIC (module docstring)."""
    deps = leave_to_cross(deps, cross, kernel)
    gm = {d for d in deps if d.core == CoreType.AIC and d.space in kernel.param_map}
    if not gm:
        return deps
    aic = kernel.with_programs((kernel.program(CoreType.AIC),))  # type: ignore[arg-type]
    own = analyze_dependences(aic, spaces=frozenset(kernel.param_map))
    if len(leave_to_cross(own, cross, kernel)):
        return deps  # a GM dependence the channels leave: the template's own stay too
    return replace(deps, deps=tuple(d for d in deps if d not in gm))


def _aiv_to_analyse(kernel: Kernel) -> Program:
    """A mixed kernel's AIV program as its template has it: without the tile classes that
    mirror the first (``class_mirror.py``; their syncs are the first class's)."""
    aiv = kernel.program(CoreType.AIV)
    assert aiv is not None
    mirror = class_mirror(kernel)
    return aiv if mirror is None else Program(CoreType.AIV, without_mirrors(aiv.body, mirror))


def _fresh_syncs(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """``body`` with its syncs unnumbered (they take fresh ids in the kernel they go into);
    its other instructions keep theirs."""

    class _Fresh(StmtMutator):
        def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
            return copied((s,)) if isinstance(s, Sync) else (s,)

    return _Fresh().visit_body(body)


# --------------------------------------------------------------------------- the template
@dataclass(frozen=True)
class _TemplatePlan:
    """What the Cube builders read of a Cube plan, for the template."""

    spec: GemmSpec
    tiling: GemmTiling
    tile_classes: tuple[TileClass, ...]
    target: Target
    source: str
    vector_epilogue: VectorEpilogue | None  # build_mixed_cube: the workspace's name
    slots: int  # build_mixed_cube: the workspace's copies
    row_blocks: bool = False  # build_mixed_cube: the tiles of a row block (a loop)

    def copies(self, level: str) -> int:
        assert level == "workspace"
        return self.slots

    def __str__(self) -> str:
        return self.source


def _template_plan(plan: CubePlan) -> _TemplatePlan | None:
    """The plan of ``plan``'s GEMM padded to whole M and N tiles, one class without swizzle
    (the tile order only moves GM offsets), K padded to a whole last step when that step has
    as many L0 steps as a full one and follows a loop of them. None: nothing to merge."""
    t, sp = plan.tiling, plan.spec
    classes = plan.tile_classes
    k_tail = sp.k % t.tk
    # padding K pays where the kernel has a loop of L1 K steps for the tail to join; with one
    # full step, a two-trip loop's carried flags would replace straight-line ones
    pad_k = bool(k_tail) and -(-k_tail // t.k0) == t.kk and sp.k // t.tk >= 2
    blocks = plan.row_blocks  # the tiles of a row block: a loop, the N tail's peeled
    if len(classes) < 2 and not pad_k and not (blocks and sp.n % t.tn):
        return None
    spec = replace(sp, m=t.mt * t.tm, n=t.nt * t.tn, k=t.kt * t.tk if pad_k else sp.k)
    tiling = replace(t, spec=spec, swizzle=Swizzle(1, "m"))
    one = TileClass("template", t.mt, 1, 0, 0, 1, "m", t.tm, t.nt * t.tn) if blocks else \
        TileClass("template", t.mt, t.nt, 0, 0, 1, "m", t.tm, t.tn)
    epi = plan.vector_epilogue
    return _TemplatePlan(spec, tiling, (one,), plan.target,
                         f"sync template: {spec} in whole {t.tm} x {t.tn} x {t.tk} tiles, one "
                         "class" + (" of row blocks" if blocks else ""), epi,
                         plan.copies("workspace") if epi is not None else 1, blocks)


def _gm_free(kernel: Kernel) -> bool:
    """Whether ``kernel``'s AIC program never reads a GM tensor it writes (and no other
    program runs but a mixed kernel's AIV)."""
    aic = kernel.program(CoreType.AIC)
    if aic is None or any(p.core not in (CoreType.AIC, CoreType.AIV) for p in kernel.programs):
        return False
    written, read = set(), set()
    for ins, _ in iter_instrs(aic.body):
        written |= {r.tensor for r in ins.writes if r.tensor in kernel.param_map}
        read |= {r.tensor for r in ins.reads if r.tensor in kernel.param_map}
    return not written & read
