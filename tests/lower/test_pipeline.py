"""The lowering pipeline (lower/pipeline.py) and its log: the steps in order, ``stop_after``,
dumps, the sync steps sharing one oracle, emission as a logged step, the verifier in the list."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ascendsched.algo import library as L
from ascendsched.api.cli import main
from ascendsched.api.compile import compile_kernel
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.insert_sync import Placed
from ascendsched.lower.ir import iter_instrs, view
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import STEPS, lower
from ascendsched.lower.plan_memory import MemoryPlan
from ascendsched.lower.remove_redundant_sync import Pruned
from ascendsched.lower.sync_ir import Sync
from ascendsched.schedule import Schedule
from ascendsched.schedule.gemm import GemmSchedule
from tests.kit.ir import vadd_kernel

VADD = Schedule(L.vadd(4096)).split("z", "i", 1024).buffer("x", 2).buffer("y", 2)
GEMM = GemmSchedule(L.gemm(64, 64, 128)).tile(32, 32, 64).split_k(32).buffer("l1", 2)


def _syncs(k) -> list:  # noqa: ANN001
    return [i for p in k.programs for i, _ in iter_instrs(p.body) if isinstance(i, Sync)]


@pytest.mark.parametrize("sched", [VADD, GEMM], ids=["vector", "cube"])
def test_every_step_is_logged_in_order(sched) -> None:  # noqa: ANN001
    log = PassLog()
    k = lower(sched, log=log)
    assert [n for n, _, _ in log.steps] == list(STEPS) == [
        "build", "verify built", "lifetimes", "memory plan", "apply memory plan",
        "hoist invariants", "order vector", "sync template", "dependences", "cross-core plan",
        "place syncs", "remove redundant syncs", "allocate event ids", "template syncs",
        "cross-core syncs", "verify final"]
    assert log.results["verify final"] is k is log.results["allocate event ids"]
    assert not log.results["cross-core plan"].channels  # one core: no cross-core flags
    assert log.text("verify built") == log.text("verify final") == "(unchanged)"
    assert log.text("hoist invariants") == "(unchanged)"  # no loop-invariant instruction
    assert log.text("order vector") == "(unchanged)"  # no run of three Vector instructions
    # whole tiles: the kernel is its own template
    assert log.text("sync template") == log.text("template syncs") == "(unchanged)"
    assert all(c >= 0 for c in log.cpu().values())


def test_the_sync_steps_share_one_oracle() -> None:
    log = PassLog()
    lower(VADD, log=log)
    placed, pruned = log.results["place syncs"], log.results["remove redundant syncs"]
    assert isinstance(placed, Placed) and isinstance(pruned, Pruned)
    assert pruned.oracle is placed.oracle  # built once, by placement
    assert len(_syncs(pruned.kernel)) < len(_syncs(placed.kernel))
    assert all(i.channel is not None for i in _syncs(pruned.kernel))
    assert all(i.channel is None for i in _syncs(log.results["allocate event ids"]))
    assert log.text("place syncs") == str(placed.kernel)


def test_stop_after_returns_the_kernel_as_that_step_leaves_it() -> None:
    log = PassLog()
    k = lower(VADD, log=log, stop_after="memory plan")
    assert [n for n, _, _ in log.steps][-1] == "memory plan"
    assert isinstance(log.results["memory plan"], MemoryPlan)
    assert k is log.results["build"] and all(b.offsets is None for b in k.buffers)
    planned = lower(VADD, stop_after="apply memory plan")
    assert all(b.offsets is not None for b in planned.buffers) and not _syncs(planned)
    log = PassLog()
    pruned = lower(VADD, log=log, stop_after="remove redundant syncs")
    assert pruned is log.results["remove redundant syncs"].kernel and _syncs(pruned)


def test_stop_after_names_a_step() -> None:
    with pytest.raises(InternalCompilerError, match=r"lower\(stop_after='insert sync'\): no "
                       r"such step; the steps are build, verify built, lifetimes, "):
        lower(VADD, stop_after="insert sync")


def test_the_dump_has_one_file_per_step_and_the_emitted_cpp(tmp_path) -> None:
    log = PassLog(dump_dir=tmp_path / "dump")
    k, proj = compile_kernel(VADD, tmp_path / "proj", log=log)
    names = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert names == [f"{n + 1:03d}_{s.replace(' ', '_')}.txt"
                     for n, s in enumerate(STEPS + ("emit",))]
    assert (tmp_path / "dump" / "017_emit.txt").read_text() == proj.kernel_source + "\n"
    assert (tmp_path / "dump" / "002_verify_built.txt").read_text() == "(unchanged)\n"
    assert (tmp_path / "dump" / "016_verify_final.txt").read_text() == "(unchanged)\n"
    assert (tmp_path / "dump" / "013_allocate_event_ids.txt").read_text() == str(k) + "\n"


def test_explain_dumps_every_step(tmp_path, capsys) -> None:
    f = tmp_path / "user_vadd.py"
    f.write_text("from ascendsched.algo import library as L\n"
                 "from ascendsched.schedule import Schedule\n\n\n"
                 "def schedule():\n"
                 "    return Schedule(L.vadd(4096)).split('z', 'i', 1024)\n")
    assert main(["explain", f"{f}:schedule", "--dump-ir", str(tmp_path / "d")]) == 0
    files = sorted(p.name for p in (tmp_path / "d").glob("*.txt"))
    assert files[5:15] == ["006_hoist_invariants.txt", "007_order_vector.txt",
                           "008_sync_template.txt", "009_dependences.txt",
                           "010_cross-core_plan.txt", "011_place_syncs.txt",
                           "012_remove_redundant_syncs.txt", "013_allocate_event_ids.txt",
                           "014_template_syncs.txt", "015_cross-core_syncs.txt"]
    assert files[-1] == "017_emit.txt" and (tmp_path / "d" / "project").is_dir()
    assert "pass timings:" in capsys.readouterr().out


def test_the_pipeline_verifies_what_the_builder_made(monkeypatch) -> None:
    import ascendsched.lower.pipeline as pipeline

    k = vadd_kernel()
    (loop,) = k.programs[0].body
    bad_add = replace(loop.body[2], writes=(view("z_ub", 8, 16, 128, 128),))
    bad = k.replace_body(k.programs[0].core, (replace(
        loop, body=loop.body[:2] + (bad_add,) + loop.body[3:]),))
    monkeypatch.setattr(pipeline, "build_loop_nest", lambda sched, target: bad)
    log = PassLog()
    with pytest.raises(InternalCompilerError, match=r"breaks the IR contract \(bounds\): "
                       r"z_ub@\(8\)\[16:128, 128:1\] reaches elements up to \[8, 2055\]"):
        lower(VADD, log=log)
    assert [n for n, _, _ in log.steps] == ["build"]


def test_sync_minimality_reads_the_pruned_kernel_from_the_log() -> None:
    rep = sync_minimality(VADD)
    log = PassLog()
    lower(VADD, log=log)
    channels = {i.channel for i in _syncs(log.results["remove redundant syncs"].kernel)}
    assert rep.needed + len(rep.removable) == len(channels) and rep.removable == ()
