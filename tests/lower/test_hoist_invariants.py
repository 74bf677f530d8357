"""Loop-invariant Vector instructions leave their loop (``lower/hoist_invariants.py``): a
chunked softmax broadcasts each row's max and computes ``1 / sum`` once per row, not once per
column chunk, with the same results; and each rule that keeps an instruction in its loop
holds."""

from __future__ import annotations

import pytest

from ascendsched import dtypes as dt
from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.lower.affine import Affine
from ascendsched.lower.hoist_invariants import HOISTED, hoist_invariants
from ascendsched.lower.ir import (
    Buffer,
    For,
    GmTensor,
    Instr,
    Kernel,
    Program,
    Stmt,
    iter_instrs,
    view,
)
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from ascendsched.target import DEFAULT_TARGET, CoreType, Pipe
from ascendsched.target.model import Scope


def _chunked_softmax() -> Schedule:
    """Softmax 5 x 1000, one row a tile on 2 cores, the row in 256-column pieces (a tail
    piece) and its statistics read online in 256-column chunks."""
    return (Schedule(L.softmax(5, 1000)).compute_inline("xf").compute_inline("e")
            .split("y", "i", 1).split("y", "j", 256).bind("y", "i_o", 2)
            .compute_at("mx", "y", "i_o").split("mx", "k", 256)
            .compute_at("s", "y", "i_o").split("s", "k2", 256).online("s", "mx")
            .buffer("x", 2).buffer("y", 2))


def test_a_chunked_softmax_computes_its_row_values_once_per_row() -> None:
    k = lower(_chunked_softmax())
    placed = [(i, tuple(s.var for s in around if isinstance(s, For)))
              for i, around in iter_instrs(k.programs[0].body)]
    moved = [(i, loops) for i, loops in placed if HOISTED in i.comment]
    # the row max's broadcast, 1 / sum and its broadcast: before the piece loop, in the row's
    assert {i.comment.split(" (")[0] for i, _ in moved} >= {
        "y: broadcast mx_ub per row", "y: dup", "y: div", "y: broadcast y_t6 per row"}
    assert all("j_o" not in loops and "i_o_k" in loops for _, loops in moved)
    # what reads the piece stays in the piece loop (the tail piece follows the loop)
    assert {i.comment for i, loops in placed if "j_o" in loops} >= {"y: exp", "y: sub", "y: mul"}


def test_the_hoisted_kernel_passes_the_ir_rungs() -> None:
    verdicts = check(_chunked_softmax(), cpp=False)
    assert [v.check for v in verdicts] == ["lower", "IR execution == numpy (y)",
                                           "IR trace race check"]
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


# ----------------------------------------------------------------- the rules, on small IR
def _v(op: str, dst: str, *srcs: str, offset: Affine | int = 0) -> Instr:
    """A vector op over 64 floats of ``dst`` at ``offset`` (the sources at 0)."""
    return Instr(op, Pipe.V, (view(dst, offset, 1, 64, 64),),
                 tuple(view(s, 0, 1, 64, 64) for s in srcs), comment=f"{dst}: {op}")


NAMES = ("a", "b", "s", "x", "acc", "out")


def _kernel(*body: Stmt, at: dict[str, int] | None = None) -> Kernel:
    """An AIV kernel of ``body`` over UB buffers of 256 floats, each at its own bytes unless
    ``at`` places it (a planner's reuse)."""
    at = at or {}
    bufs = tuple(Buffer(n, Scope.UB, dt.float32, 256, offsets=(at.get(n, 1024 * k),))
                 for k, n in enumerate(NAMES))
    return Kernel.build("k", (GmTensor("x_gm", (1024,), dt.float32),), bufs, 1,
                        (Program(CoreType.AIV, body),), DEFAULT_TARGET)


def _names(body: tuple[Stmt, ...]) -> list[str]:
    return [s.comment.split(" (")[0] if isinstance(s, Instr) else f"for {s.var}"
            for s in body]  # type: ignore[union-attr]


def _body(k: Kernel) -> tuple[Stmt, ...]:
    return hoist_invariants(k).programs[0].body


def test_an_invariant_chain_moves_in_order_and_the_loop_keeps_the_rest() -> None:
    j = Affine.of("j")
    k = _kernel(For("j", 4, (_v("vec_dup", "a"), _v("vec_binary", "b", "a", "s"),
                             _v("vec_binary", "out", "x", "b", offset=j * 64))))
    out = _body(k)
    assert _names(out) == ["a: vec_dup", "b: vec_binary", "for j"]
    assert _names(out[-1].body) == ["out: vec_binary"]  # type: ignore[union-attr]
    assert out[0].comment.endswith(f"({HOISTED} j)")  # type: ignore[union-attr]
    # in place (b at a's bytes): it reads what the dup before it wrote, every iteration
    assert _names(_body(_kernel(*k.programs[0].body, at={"b": 0}))) == \
        ["a: vec_dup", "b: vec_binary", "for j"]


def test_what_must_run_every_iteration_stays() -> None:
    j = Affine.of("j")
    cases = {
        # an update reads what it writes: acc = acc * b must run four times
        "update": ((_v("vec_binary", "acc", "acc", "b"),), {}),
        # in place over bytes nothing before it wrote this iteration: an update too
        "update in place": ((_v("vec_binary", "b", "a", "s"),), {"b": 0}),
        # its source is written in the loop (by a load of the next piece)
        "source written": ((Instr("copy_gm_ub", Pipe.MTE2, (view("x", 0, 1, 64, 64),),
                                  (view("x_gm", j * 64, 1, 64, 64),)),
                            _v("vec_binary", "a", "x", "s")), {}),
        # its result is read before it in the loop: iteration 0 reads what was there before
        "read before": ((_v("vec_binary", "out", "a", "s", offset=j * 64),
                         _v("vec_dup", "a")), {}),
        # its result is written by an instruction that stays (the piece)
        "other writer": ((_v("vec_dup", "a"), _v("vec_binary", "a", "x", "s", offset=j)), {}),
        # the planner gave its bytes to a buffer the loop writes
        "shared bytes": ((_v("vec_dup", "a"),
                          _v("vec_binary", "out", "x", "s", offset=j * 64)), {"a": 5120}),
    }
    for name, (body, at) in cases.items():
        k = _kernel(For("j", 4, body), at=at)
        assert hoist_invariants(k) is k, name


def test_a_single_iteration_keeps_its_loop() -> None:
    k = _kernel(For("j", 1, (_v("vec_dup", "a"),)))
    assert hoist_invariants(k) is k


def test_an_instruction_leaves_every_loop_it_does_not_depend_on() -> None:
    i, j = Affine.of("i"), Affine.of("j")
    inner = For("j", 3, (_v("vec_dup", "a"), _v("vec_binary", "b", "a", "s"),
                         _v("vec_binary", "out", "x", "b", offset=i * 256 + j * 64)))
    out = _body(_kernel(For("i", 2, (inner,))))
    assert _names(out) == ["a: vec_dup", "b: vec_binary", "for i"]
    outer = out[-1]
    assert isinstance(outer, For) and _names(outer.body) == ["for j"]


@pytest.mark.slow
def test_the_hoisted_kernel_passes_every_rung() -> None:
    k = lower(_chunked_softmax())
    assert any(HOISTED in i.comment for i, _ in iter_instrs(k.programs[0].body))
    verdicts = check(_chunked_softmax())
    assert len(verdicts) == 7 and all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
