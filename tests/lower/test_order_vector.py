"""Vector instructions in dependence levels (``lower/order_vector.py``): an online softmax's
chunk needs fewer barriers with the same results, every dependence keeps its order, and an
instruction reading a load's data stays late."""

from __future__ import annotations

import pytest

from ascendsched import dtypes as dt
from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.lower import pipeline
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import (
    Buffer,
    GmTensor,
    Instr,
    Kernel,
    Program,
    Region,
    Stmt,
    iter_instrs,
    view,
)
from ascendsched.lower.order_vector import _overlap, _Spans, order_vector
from ascendsched.lower.sync_ir import Barrier
from ascendsched.schedule import Schedule
from ascendsched.target import DEFAULT_TARGET, CoreType, Pipe
from ascendsched.target.model import Scope


def _online_softmax() -> Schedule:
    """Softmax 5 x 1000 on 2 cores, one row a tile, its statistics read online in chunks of
    256 columns (a 232-column tail chunk), the output in pieces of 256."""
    return (Schedule(L.softmax(5, 1000)).compute_inline("xf").compute_inline("e")
            .split("y", "i", 1).split("y", "j", 256).bind("y", "i_o", 2)
            .compute_at("mx", "y", "i_o").split("mx", "k", 256)
            .compute_at("s", "y", "i_o").split("s", "k2", 256).online("s", "mx")
            .buffer("x", 2).buffer("y", 2))


def _barriers(k: Kernel) -> int:
    return sum(isinstance(i, Barrier) for p in k.programs for i, _ in iter_instrs(p.body))


def test_an_online_chunk_needs_fewer_barriers(monkeypatch: pytest.MonkeyPatch) -> None:
    ordered = pipeline.lower(_online_softmax())
    monkeypatch.setattr(pipeline, "order_vector", lambda k: k)
    walked = pipeline.lower(_online_softmax())
    assert _barriers(ordered) < _barriers(walked)


def test_the_ordered_kernel_passes_the_ir_rungs() -> None:
    verdicts = check(_online_softmax(), cpp=False)
    assert [v.check for v in verdicts] == ["lower", "IR execution == numpy (y)",
                                           "IR trace race check"]
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


@pytest.mark.slow
def test_the_ordered_kernel_passes_every_rung() -> None:
    verdicts = check(_online_softmax())
    assert len(verdicts) == 7 and all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


# ----------------------------------------------------------------- on small IR
NAMES = ("a", "b", "c", "d", "e", "f", "x")


def _v(dst: str, *srcs: str, offset: int = 0) -> Instr:
    return Instr("vec_binary", Pipe.V, (view(dst, offset, 1, 64, 64),),
                 tuple(view(s, 0, 1, 64, 64) for s in srcs), (("fn", "add"),), comment=dst)


def _run(*body: Stmt) -> list[str]:
    bufs = tuple(Buffer(n, Scope.UB, dt.float32, 256, offsets=(1024 * k,))
                 for k, n in enumerate(NAMES))
    k = Kernel.build("k", (GmTensor("x_gm", (256,), dt.float32),), bufs, 1,
                     (Program(CoreType.AIV, body),), DEFAULT_TARGET)
    return [i.comment or i.op for i, _ in iter_instrs(order_vector(k).programs[0].body)]


def test_independent_work_joins_the_level_before_its_reader() -> None:
    # a -> b -> c, d -> e, then f reads c and e: walked, every step waits for the one before
    # (4 barriers); in levels a | b d | c e | f (3)
    assert _run(_v("a", "x"), _v("b", "a"), _v("c", "b"), _v("d", "x"), _v("e", "d"),
                _v("f", "c", "e")) == ["a", "b", "d", "c", "e", "f"]


def test_dependences_keep_their_order() -> None:
    # e reads a (RAW), then b overwrites what d read (WAR), and c overwrites a (WAW):
    # none of them may pass the other
    body = (_v("a", "x"), _v("d", "b"), _v("e", "a"), _v("b", "x"), _v("a", "c"))
    got = _run(*body)
    assert got.index("a") < got.index("e") and got.index("d") < got.index("b")
    assert [g for g in got if g == "a"] == ["a", "a"] and got[-1] == "a"  # the WAW stays last


def test_regions_meet_by_their_planned_bytes() -> None:
    bufs = {"a": Buffer("a", Scope.UB, dt.float32, 256, 2, offsets=(0, 1024)),
            "h": Buffer("h", Scope.UB, dt.float16, 512, offsets=(128,))}
    spans = _Spans(bufs)

    def meet(r: Region, q: Region) -> bool:
        return _overlap(spans.of(r), spans.of(q))

    j = Affine.of("j")
    assert not meet(view("a", 0, 1, 64, 64), view("a", 64, 1, 64, 64))  # other bytes
    assert meet(view("a", 0, 1, 64, 64), view("a", 63, 1, 64, 64))
    assert not meet(view("a", 0, 1, 64, 64, copy=0), view("a", 0, 1, 64, 64, copy=1))
    assert meet(view("a", 0, 1, 64, 64, copy=0), view("a", 0, 1, 64, 64, copy=Affine.mod("j", 2)))
    # the same loop-variable offset: compared by the constant part; different ones may meet
    assert not meet(view("a", j * 128, 1, 64, 64), view("a", j * 128 + 64, 1, 64, 64))
    assert meet(view("a", j * 128, 1, 64, 64), view("a", j * 64 + 64, 1, 64, 64))
    # another buffer, in bytes: float16 elements 0..63 of h are bytes 128..256, in a's copy 0
    assert meet(view("a", 32, 1, 8, 8), view("h", 0, 1, 64, 64))
    assert not meet(view("a", 64, 1, 8, 8), view("h", 0, 1, 64, 64))


def test_a_load_ends_the_run_and_its_reader_stays_late() -> None:
    load = Instr("copy_gm_ub", Pipe.MTE2, (view("x", 0, 1, 64, 64),),
                 (view("x_gm", 0, 1, 64, 64),), comment="load")
    # after the load: c (reads x) has no reader, so it stays at the last level, not first
    assert _run(_v("a", "b"), load, _v("c", "x"), _v("d", "a"), _v("e", "d")) == \
        ["a", "load", "d", "c", "e"]
