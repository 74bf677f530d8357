"""GEMMs and mixed kernels synchronised through their tail-free template (lower/sync_template.py):
when it applies, what it gives (syncs in every class loop, copies alternating across classes), that the result
is exact (the kernel's own happens-before oracle finds every dependence ordered, the trace
checker no race, IR execution equals numpy), and when it must not apply."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ascendsched.algo import library as L
from ascendsched.algo.evaluate import evaluate
from ascendsched.algo.gemm_spec import gemm_error
from ascendsched.api.numerics import approx_rtol, compare, random_inputs
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.build_gemm import class_runs
from ascendsched.lower.class_mirror import class_mirror, without_mirrors
from ascendsched.lower.cross_core_sync import CrossPlan
from ascendsched.lower.happens_before import unordered_dependences
from ascendsched.lower.ir import Dim, For, If, Kernel, Program, iter_instrs
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import lower
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_ir import Barrier, SetFlag, WaitFlag
from ascendsched.lower.sync_template import leave_workspace_to_cross
from ascendsched.lower.sync_transplant import _canonical, _equal_where, _inside, transplanted
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.target import CoreType, Pipe
from tests.kit.mixed import assert_ladder_passes, assert_own_oracle_orders_all, lowered


def _hand(m: int, n: int, k: int, cores: int, tiles=(128, 256, 128), k0: int = 32,
          swizzle: int = 4, l0c: int = 1) -> GemmSchedule:
    s = (GemmSchedule(L.gemm(m, n, k)).tile(*tiles).split_k(k0).buffer("l1", 2)
         .buffer("l0", 2).buffer("l0c", l0c).bind(cores))
    return s.swizzle(swizzle, "m") if swizzle > 1 else s


def _templated(log: PassLog) -> bool:
    """Whether the sync steps ran on a template and its syncs went into the kernel."""
    return (log.results["sync template"] is not log.results["order vector"]
            and log.results["template syncs"] is not None)


def _exact(k: Kernel) -> None:
    """The kernel's own oracle (not the template's) finds every dependence ordered."""
    assert unordered_dependences(k, analyze_dependences(k), k.target, by_channel=False) == ()


def _runs_right(sched, k: Kernel) -> None:  # noqa: ANN001
    ins = random_inputs(sched.algo, 0)
    res = run_kernel(k, ins, trace=True)
    ok, msg = gemm_error(sched.spec, ins, res.outputs[sched.spec.c])
    assert ok, msg
    rep = check_trace(res.trace, k.target)
    assert rep.ok, str(rep)


def test_tails_in_every_dimension_take_the_templates_syncs_in_every_class() -> None:
    """1000^3 tiled 128x256x128: five class loops (two swizzle strips, M edge, N edge,
    corner) and a peeled K step, all synchronised by one template of whole tiles."""
    sched = _hand(1000, 1000, 1000, cores=2)
    k, log = lowered(sched)
    assert _templated(log)
    tmpl = log.results["sync template"]
    assert len(tmpl.programs[0].body) == 1  # one persistent loop of whole tiles
    loops = [s for s in k.programs[0].body if isinstance(s, For | If)]
    assert len(loops) == 5
    for loop in loops:  # each class synchronises its own tiles
        assert any(isinstance(i, SetFlag) for i, _ in iter_instrs(loop.body))
        assert any(isinstance(i, WaitFlag) for i, _ in iter_instrs(loop.body))
    # the K tail (104 = 3 x 32 + 8) has as many L0 steps as a full step: padded in the template
    assert tmpl.param_map["A"].shape == (1024, 1024)
    _exact(k)


@pytest.mark.parametrize("shape,cores,l0c", [
    ((300, 500, 200), 3, 2),   # M, N and K tails, uneven tiles per core, L0C ping-pong
    ((200, 300, 100), 1, 1),   # one core: each class a loop
    ((130, 270, 70), 5, 2),    # K tail with fewer L0 steps: the template keeps it
])
def test_transplanted_kernels_run_right_and_race_free(shape, cores, l0c) -> None:  # noqa: ANN001
    sched = _hand(*shape, cores=cores, tiles=(64, 128, 64), k0=32, swizzle=2, l0c=l0c)
    k, log = lowered(sched)
    assert _templated(log)
    _exact(k)
    _runs_right(sched, k)


def test_copies_alternate_across_class_loops() -> None:
    """Each core numbers its tiles across the class loops (tile_loops ``ClassRun.run``): with
    two L0C copies every core's consecutive tiles use different copies, as in one loop."""
    sched = _hand(300, 500, 200, cores=3, tiles=(64, 128, 64), swizzle=2, l0c=2)
    k, _ = lowered(sched)
    res = run_kernel(k, random_inputs(sched.algo, 0), trace=True)
    for block in range(3):
        copies = [e for e in res.trace.events
                  if e.core.startswith("AIC") and e.block == block and e.op == "fixpipe"]
        used = [min(lo for space, lo, _ in e.reads if space == "L0C") for e in copies]
        assert len(used) >= 2
        assert all(a != b for a, b in zip(used, used[1:])), used


def test_small_edge_mmads_get_the_barrier_the_hardware_does_not_give() -> None:
    """N = 520 in 128-wide tiles leaves an 8-wide edge: its Mmads (8 x 1 fractals) are not
    ordered by the hardware, the template's (8 x 8) are: a PIPE_M barrier before each."""
    sched = _hand(500, 520, 300, cores=7, tiles=(128, 128, 128), k0=64, swizzle=2)
    k, log = lowered(sched)
    assert _templated(log)
    body = k.programs[0].body
    for loop in (s for s in body if isinstance(s, For | If)):
        instrs = [i for i, _ in iter_instrs(loop.body)]
        mmads = [n for n, i in enumerate(instrs) if i.op == "mmad"]
        small = int(instrs[mmads[0]].attr("n")) < 16
        barred = [isinstance(instrs[n - 1], Barrier) and instrs[n - 1].pipe == Pipe.M
                  for n in mmads]
        assert all(barred) if small else not any(barred)
    _exact(k)
    _runs_right(sched, k)


def test_default_schedules_with_tails_use_the_template() -> None:
    for algo in (L.gemm(1000, 1000, 1000), L.gemm_int8(1000, 1000, 1000),
                 L.gemm_epilogue(777, 500, 300, bias=True, relu=True)):
        k, log = lowered(schedule_for(algo))
        assert _templated(log), algo.name
        _exact(k)


def test_no_template_without_tails() -> None:
    for sched in (_hand(1024, 1024, 1024, cores=8),  # whole tiles: the kernel is its template
                  schedule_for(L.gemm_gelu(512, 512, 512))):  # a mixed kernel of whole tiles
        _, log = lowered(sched)
        assert log.results["sync template"] is log.results["order vector"]


MIXED = [
    schedule_for(L.gemm_gelu(1000, 1000, 1000)),  # five classes on 24 cores, K tail
    (GemmSchedule(L.gemm_bias_gelu(300, 200, 330)).epilogue_on("vector", after="D")
     .tile(64, 128, 64).split_k(32).buffer("l1", 2).buffer("l0", 2).buffer("l0c", 2).bind(3)
     .swizzle(2, "m").buffer("workspace", 3)),  # bias on the Cube, uneven tiles per core
    (GemmSchedule(L.gemm_row_scale(130, 270, 70)).tile(64, 128, 64).split_k(32).bind(2)
     .epilogue_on("vector", vector_cores=1)),  # 1:1, one trip per class
    # row blocks (CubePlan.row_blocks): the template's block is a loop of whole tiles, the
    # kernel's a loop and a peeled N-tail tile
    GemmSchedule(L.gemm_softmax(100, 130, 90)).tile(32, 48, 32).bind(2),
    (GemmSchedule(L.gemm_softmax(150, 600, 70)).tile(32, 256, 32).buffer("l1", 2)
     .buffer("l0c", 2).bind(2)),
    # the M edge row block on core 3 alone: its copies count from an expression in block_idx
    # that is the template's on that core only (_Match.same_copy)
    M_EDGE_ON_ONE_CORE := (GemmSchedule(L.gemm_softmax(60, 520, 90)).tile(16, 256, 32)
                           .split_k(16).buffer("l1", 2).buffer("l0", 2).buffer("l0c", 2)
                           .bind(4)),
]


@pytest.mark.parametrize("sched", MIXED, ids=["gelu_default", "bias_gelu_3_cores",
                                               "row_scale_1_to_1", "softmax_row_blocks",
                                               "softmax_row_blocks_buffered",
                                               "softmax_m_edge_on_one_core"])
def test_mixed_kernels_with_tails_take_their_aic_templates_syncs(sched) -> None:  # noqa: ANN001
    """A mixed kernel's template is its AIC's template beside its own AIV program (but the
    tile classes that mirror the first, ``class_mirror``): the AIC's syncs go into every class
    loop, the AIV keeps the syncs its own analysis placed, the cross-core channels are the
    kernel's; the kernel's own oracle finds every intra-core dependence ordered but those the
    channels order, and the IR rungs of the ladder pass."""
    k, log = lowered(sched)
    assert _templated(log)
    kern, tmpl = log.results["order vector"], log.results["sync template"]
    assert len(tmpl.program(CoreType.AIC).body) == 1  # one persistent loop of whole tiles
    own, mirror = kern.program(CoreType.AIV), class_mirror(kern)
    if mirror is not None:
        own = Program(CoreType.AIV, without_mirrors(own.body, mirror))
    assert tmpl.program(CoreType.AIV) == own  # ids and all
    loops = [s for s in log.results["template syncs"].program(CoreType.AIC).body
             if isinstance(s, For)]
    assert len(loops) == len(sched.cube.tile_classes) >= 2
    for loop in loops:
        assert any(isinstance(i, WaitFlag) for i, _ in iter_instrs(loop.body))
    assert_own_oracle_orders_all(log)
    assert_ladder_passes(sched, k, reduce=False)


def test_the_templates_workspace_dependences_go_only_where_the_channels_order_them() -> None:
    """The template's AIC writes a workspace slot again ``copies`` tiles later (a FIX -> FIX
    WAW on GM): left to the kernel's cross-core channels, kept without them."""
    _, log = lowered(MIXED[0])
    kern, tmpl = log.results["order vector"], log.results["sync template"]
    cross = log.results["cross-core plan"]
    deps = analyze_dependences(tmpl)
    gm = [d for d in deps if d.core == CoreType.AIC and d.space == "C_ws"]
    assert gm and all(d.kind.value == "WAW" for d in gm)
    left = leave_workspace_to_cross(deps, cross, kern)
    assert not [d for d in left if d.core == CoreType.AIC and d.space == "C_ws"]
    kept = leave_workspace_to_cross(deps, CrossPlan(kern.name), kern)
    assert len([d for d in kept if d.core == CoreType.AIC and d.space == "C_ws"]) == len(gm)


def test_a_statement_touching_bytes_its_image_does_not_is_refused() -> None:
    """Widen one kernel load beyond the template's: the transplant must not take it."""
    sched = _hand(1000, 1000, 1000, cores=2)
    log = PassLog()
    lower(sched, log=log)
    kern, synced = log.results["order vector"], log.results["allocate event ids"]
    runs = class_runs(sched.cube, kern.target)
    assert transplanted(kern, synced, runs) is not None

    class Shift:
        done = False

    def shifted(body):  # noqa: ANN001, ANN202 -- the first A load, 16 rows lower in L1
        out = []
        for s in body:
            if isinstance(s, For | If):
                s = replace(s, body=shifted(s.body))
            elif s.op == "load_l0a" and not Shift.done:
                Shift.done = True
                r = s.reads[0]
                s = replace(s, reads=(replace(r, offset=r.offset + 256),))
            out.append(s)
        return tuple(out)

    bad = replace(kern, programs=(Program(kern.programs[0].core,
                                          shifted(kern.programs[0].body)),))
    assert Shift.done
    assert transplanted(bad, synced, runs) is None


def test_boxes_inside_boxes() -> None:
    full = (Dim(16, 2048), Dim(128, 16), Dim(16, 1))  # an L0C tile of 128 rows
    edge = (Dim(16, 1792), Dim(104, 16), Dim(16, 1))  # the M edge's, packed at 112 rows
    assert _inside(edge, full, (0,), (0,))
    assert not _inside(full, edge, (0,), (0,))
    # two loads of a loop together (offsets 0 and 4096) hold one load of twice the size
    half, whole = (Dim(16, 256),), (Dim(32, 256),)
    assert _inside(whole, half, (0,), (0, 4096))
    assert not _inside(whole, half, (0,), (0, 8192))


def test_copies_compare_in_a_canonical_form() -> None:
    """The template's L1 copy ``(kt + t) mod 2`` at the peeled K step (kt = 10) of a class
    whose running tile number is ``t0 + 429 - floor((block_idx + 3) / 7)`` equals the kernel's
    ``(t0 + 429 - floor(...)) mod 2``, written differently."""
    t, kt = Affine.of("t"), Affine.of("kt")
    run = Affine.of("t0") + 429 - (Affine.of("block_idx") + 3).floordiv(7)
    template = (kt + t).modulo(2).substitute("t", run).substitute("kt", Affine(10))
    kernel = (run * 11 + 10).modulo(2)  # the builder's running L1 counter, 11 steps a tile
    assert template != kernel and _canonical(template) == _canonical(kernel)
    assert _canonical((Affine.of("t0") + 1).modulo(2)) != _canonical(Affine.mod("t0", 2))


def test_copies_compare_where_the_class_runs() -> None:
    """The M edge row block runs on core 3 alone, so its running tile number
    ``1 - floor((block_idx + 1) / 4)`` is 0 wherever it runs: its L1 copy
    ``(kt + nj + run) mod 2`` is the template's ``(kt + nj) mod 2`` there, not on every core.
    Its guard settles it (isl); without the guard, or on a guard admitting cores where the
    expressions differ, they do not compare equal. Each M edge copy is the template's."""
    kt_nj = Affine.of("kt") + Affine.of("nj")
    run = Affine(1) - (Affine.of("block_idx") + 1).floordiv(4)
    kernel, template = _canonical((kt_nj + run).modulo(2)), _canonical(kt_nj.modulo(2))
    on_core_3 = (Cond(Affine.of("block_idx") - (Affine.of("block_idx") + 1).floordiv(4) * 4
                      + 1, "<=", 0),)
    assert kernel != template
    assert _equal_where(kernel, template, ("t1", 1), on_core_3, 4)
    assert not _equal_where(kernel, template, ("t1", 1), (), 4)
    assert not _equal_where(kernel, template, ("t1", 1),
                            (Cond(Affine.of("block_idx"), ">=", 2),), 4)
    _, log = lowered(M_EDGE_ON_ONE_CORE)
    assert _templated(log)


def test_a_mixed_template_is_minimal_where_the_m_edge_runs_on_one_core() -> None:
    """Every sync the template placed and the kernel's cross-core channels are needed."""
    got = sync_minimality(M_EDGE_ON_ONE_CORE)
    assert got.needed > 0 and not got.removable, str(got)


def test_oracle_sees_a_dropped_template_sync() -> None:
    """Mutation: drop one transplanted wait from a class loop: the kernel's oracle reports
    an unordered dependence (the exactness checks above can fail)."""
    sched = _hand(1000, 1000, 1000, cores=2)
    k, _ = lowered(sched)
    body = k.programs[0].body
    target = next(n for n, s in enumerate(body) if isinstance(s, For))

    def drop_first_wait(stmts):  # noqa: ANN001, ANN202
        out, dropped = [], False
        for s in stmts:
            if not dropped and isinstance(s, WaitFlag):
                dropped = True
                continue
            if not dropped and isinstance(s, For | If):
                inner, dropped = drop_first_wait(s.body)
                s = replace(s, body=inner)
            out.append(s)
        return tuple(out), dropped

    new, dropped = drop_first_wait((body[target],))
    assert dropped
    bad = replace(k, programs=(Program(k.programs[0].core,
                                       body[:target] + new + body[target + 1:]),))
    assert unordered_dependences(bad, analyze_dependences(bad), bad.target, by_channel=False)


def test_running_tile_number_counts_a_cores_tiles_across_classes() -> None:
    sched = _hand(1000, 1000, 1000, cores=3)
    runs = class_runs(sched.cube, sched.target)
    order = sched.cube.tile_order()
    for core in range(3):
        seen = []
        for r in runs:
            for trip in range(r.iters):
                env = {"block_idx": core, **({r.var: trip} if r.var else {})}
                if r.first.evaluate(env) + 3 * trip < r.count:
                    seen.append(r.run.evaluate(env))
        assert seen == list(range(len(seen)))
        assert len(seen) == len(order[core::3])


def _explained(tmp_path, capsys, algo: str) -> str:  # noqa: ANN001
    """What ``ascendsched explain`` prints for ``algo(300, 200, 330)`` tiled 128^3, K steps
    of 64, on 2 cores (a user's file)."""
    from ascendsched.api.cli import main
    f = tmp_path / "user_gemm.py"
    f.write_text(f"from ascendsched.algo.library import {algo}\n"
                 "from ascendsched.schedule.gemm import GemmSchedule\n\n\n"
                 "def schedule():\n"
                 f"    return GemmSchedule({algo}(300, 200, 330)).tile(128, 128, 128)"
                 ".split_k(64).bind(2)\n")
    assert main(["explain", f"{f}:schedule"]) == 0
    return capsys.readouterr().out


def test_explain_says_the_dependences_are_the_templates(tmp_path, capsys) -> None:  # noqa: ANN001
    out = _explained(tmp_path, capsys, "gemm")
    assert "dependences (of the sync template: gemm gemm: (384 x 384) x (384 x 256)" in out
    assert "kernel's tile classes and peeled K step take its syncs" in out


def test_explain_says_which_program_of_a_mixed_kernel_is_the_templates(tmp_path, capsys
                                                                       ) -> None:  # noqa: ANN001
    out = _explained(tmp_path, capsys, "gemm_gelu")
    assert "dependences (the AIC program of the sync template: gemm gemm_gelu: (384 x 384)" in out
    assert "the AIV program the kernel's own" in out


def test_a_mixed_template_never_reuses_the_kernels_instruction_ids() -> None:
    """The hybrid keeps the AIV's ids and numbers its own AIC from the kernel's next id, since
    the cross-core plan (made on the kernel) names the kernel's instructions by id: also when
    the AIV program it keeps has none of the kernel's largest ids (no AIV instruction at all,
    or tile classes left out as mirrors of the first, ``class_mirror.py``)."""
    from ascendsched.lower.sync_template import sync_template

    sched = MIXED[0]
    k = lower(sched, stop_after="apply memory plan")
    tmpl = sync_template(sched, k, k.target)
    assert tmpl is not k
    ids = [i.id for i, _ in iter_instrs(tmpl.program(CoreType.AIC).body)]
    assert min(ids) >= k.next_id
    bare = k.replace_body(CoreType.AIV, ())
    tmpl = sync_template(sched, bare, k.target)
    assert tmpl is not bare
    assert min(i.id for i, _ in iter_instrs(tmpl.program(CoreType.AIC).body)) >= bare.next_id


@pytest.mark.parametrize("bias", [False, True])
def test_the_k_tail_steps_mmads_only_accumulate(bias: bool) -> None:
    """The K tail step's L0 loop (104 = 3 x 32 + 8 after seven L1 steps) runs after the L1 K
    steps, so it is never a tile's first K step: its Mmads accumulate with no test of it (no
    ``if kk + 28 == 0`` guard with the bias table, no ``cmatrixInitVal = kk + 28 == 0``
    without); the template, which pads K into its L1 loop and tests there, still maps onto
    the kernel, and the kernel computes the right values with no race."""
    algo = L.gemm_epilogue(1000, 1000, 1000, bias=True) if bias else L.gemm(1000, 1000, 1000)
    sched = (GemmSchedule(algo).tile(128, 256, 128).split_k(32).buffer("l1", 2)
             .buffer("l0", 2).bind(2))
    k, log = lowered(sched)
    assert _templated(log)
    tests = [x for s in k.programs[0].body for x in _first_step_tests(s, ())]
    assert tests and all("kt" in c.lhs.vars() for c, _ in tests), [str(c) for c, _ in tests]
    assert all(loops[-2:] == ("kt", "kk") for _, loops in tests)  # inside the L1 K loop only
    _exact(k)
    ins = random_inputs(algo, 0)
    res = run_kernel(k, ins, trace=True)
    want = evaluate(algo, ins)[algo.outputs[0].name]
    ok, msg = compare(res.outputs[algo.outputs[0].name], want, algo.outputs[0].dtype.name,
                      approx_rtol(algo, algo.outputs[0].name))
    assert ok, msg
    assert check_trace(res.trace, k.target).ok


def _first_step_tests(s, loops: tuple[str, ...]):  # noqa: ANN001, ANN202
    """(condition, enclosing loop variables) of every "first K step" test: an Mmad's
    condition-valued ``cmatrixInitVal`` and every guard of an Mmad."""
    if isinstance(s, For):
        for x in s.body:
            yield from _first_step_tests(x, loops + (s.var,))
    elif isinstance(s, If):
        if any(i.op in ("mmad", "mmad_bias") for i, _ in iter_instrs(s.body)):
            yield from ((c, loops) for c in s.conds if "kk" in c.lhs.vars() or c.lhs.is_const)
        for x in s.body:
            yield from _first_step_tests(x, loops)
    elif s.op == "mmad" and isinstance(s.attr("cmatrixInitVal"), Cond):
        yield s.attr("cmatrixInitVal"), loops


def test_a_condition_over_non_negative_variables_is_settled_when_it_can_be() -> None:
    kk = Affine.of("kk")
    assert Cond(kk + 28, "==", 0).decided() is False
    assert Cond(kk + 28, ">=", 1).decided() is True
    assert Cond(kk, "==", 0).decided() is None  # true on the first trip only
    assert Cond(kk * -1 + 3, ">=", 1).decided() is None  # a negative coefficient: unbounded
    assert Cond(Affine.mod("kk", 2) + 2, "<", 4).decided() is True  # kk % 2 in 0..1
    assert Cond(Affine(3), "==", 3).decided() is True
