"""The synchronisation instructions of the kernel IR: one frozen type per AscendC sync call.

Each is an :class:`~ascendsched.lower.ir.Instr` (so it sits in a body, has a pipe, a comment and
an ``id``) without regions or attrs; its own typed fields say what it does, and passes tell
the kinds apart with ``isinstance``:

  ``SetFlag(p, dst=q, event_id=e)``      ``SetFlag<HardEvent::p_q>(e)``: on the source pipe p,
                                         fires when every earlier p instruction is done
  ``WaitFlag(q, src=p, event_id=e)``     ``WaitFlag<HardEvent::p_q>(e)``: on the destination
                                         pipe q, holds later q work until the flag fired
  ``Barrier(p)``                         ``PipeBarrier<PIPE_p>()`` (``Pipe.ALL``: every pipe)
  ``CrossSet(p, flag_id=f, mode=2)``     ``CrossCoreSetFlag<2, PIPE_p>(f)``
  ``CrossWait(p, flag_id=f, mode=2)``    ``CrossCoreWaitFlag<2, PIPE_p>(f)``: blocks the core

``SetFlag`` and ``WaitFlag`` (``EventSync``) both answer ``src``, ``dst`` and ``event_id``. While
the sync passes run, a sync also carries its ``channel`` (the placement it belongs to: a
set/wait pair with its prologue sets and epilogue waits, or a barrier) and its ``role`` there;
event-id allocation clears both. Printed forms (``Instr.head``)::

    set_flag MTE2->V id=(k % 2) [ch 3, set]   # x_ub[copy (k % 2)]: MTE2 write -> V read (RAW)
    barrier V
    cross_set FIX flag=0 mode=2

Also here: ``program_epilogue``, the barrier every AIC program runs after its body
(``lower/ir.py``, "Program prologue and epilogue").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import AttrValue, Instr, Kernel, Region
from ascendsched.target.model import CoreType, Pipe


class SyncRole(str, Enum):
    """A sync's part in the placement (channel) it belongs to, while the sync passes run."""

    SET = "set"  # the set of a pair
    WAIT = "wait"  # the wait of a pair
    PROLOGUE = "prologue"  # a set before the loop of a carried pattern (one per event id)
    EPILOGUE = "epilogue"  # a wait after that loop
    KEEP = "keep"  # a barrier no other sync can replace

    def __str__(self) -> str:
        return self.value


PRINTED_REASONS = 3  # dependences a sync's printed comment names (format_instr)


@dataclass(frozen=True, kw_only=True)
class Sync(Instr):
    """Base of the synchronisation instructions: typed fields instead of regions and attrs.
    ``op`` is fixed by the type (the trace shows it). ``channel``/``role``: the placement a sync
    pass made it for and its part in it (None once event ids are allocated)."""

    op: str = field(default="", init=False)
    writes: tuple[Region, ...] = ()  # always empty (keyword-only, so generic code may
    reads: tuple[Region, ...] = ()  # ``replace`` them with empty tuples)
    attrs: tuple[tuple[str, AttrValue], ...] = ()
    comment: str = ""
    channel: int | None = None
    role: SyncRole | None = None

    def __post_init__(self) -> None:
        if type(self) is Sync:
            raise InternalCompilerError("Sync is the base of SetFlag, WaitFlag, Barrier, "
                                        "CrossSet and CrossWait; build one of those")
        if self.writes or self.reads or self.attrs:
            raise InternalCompilerError(f"{self.op} takes no regions and no attrs (its fields "
                                        f"say what it does): {self.writes} {self.reads} "
                                        f"{self.attrs}")
        if not isinstance(self.pipe, Pipe):
            raise InternalCompilerError(f"{self.op}: pipe must be a Pipe, not {self.pipe!r}")
        if self.channel is not None and (not isinstance(self.channel, int)
                                         or isinstance(self.channel, bool)):
            raise InternalCompilerError(f"{self.op}: channel must be an int or None, not "
                                        f"{self.channel!r}")
        if self.role is not None and not isinstance(self.role, SyncRole):
            raise InternalCompilerError(f"{self.op}: role must be a SyncRole or None, not "
                                        f"{self.role!r}")

    def printed_comment(self) -> str:
        """The first ``PRINTED_REASONS`` dependences that needed the sync and how many more
        (the comment keeps them all, ``;``-separated; the emitted C++ prints the first one):
        a barrier of a LayerNorm tile orders a hundred pairs."""
        parts = self.comment.split("; ")
        if len(parts) <= PRINTED_REASONS + 1:
            return self.comment
        return "; ".join(parts[:PRINTED_REASONS]) + f" (+{len(parts) - PRINTED_REASONS} more)"

    def head(self) -> str:
        """The call, then ``[ch N, role]`` while the sync passes run."""
        out = self.call()
        if self.channel is not None:
            out += f" [ch {self.channel}" + (f", {self.role}]" if self.role is not None else "]")
        return out

    def call(self) -> str:
        """``barrier V``: the printed sync without its channel."""
        return f"{self.op} {self.pipe}"


@dataclass(frozen=True, kw_only=True)
class EventSync(Sync):
    """A set or a wait of the HardEvent flag ``src -> dst`` with id ``event_id`` (both types
    answer ``src`` and ``dst``)."""

    event_id: Affine = field(default_factory=Affine)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.event_id, Affine):
            raise InternalCompilerError(f"{self.op}: event_id must be an Affine, not "
                                        f"{self.event_id!r}")

    def call(self) -> str:
        return f"{self.op} {self.src}->{self.dst} id={self.event_id}"  # type: ignore[attr-defined]


@dataclass(frozen=True, kw_only=True)
class SetFlag(EventSync):
    """``SetFlag``: on the source pipe ``pipe``, fires when its earlier work is done."""

    op: str = field(default="set_flag", init=False)
    dst: Pipe

    @property
    def src(self) -> Pipe:
        return self.pipe

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.dst, Pipe):
            raise InternalCompilerError(f"set_flag: dst must be a Pipe, not {self.dst!r}")


@dataclass(frozen=True, kw_only=True)
class WaitFlag(EventSync):
    """``WaitFlag``: on the destination pipe ``pipe``, holds its later work until the flag
    fired."""

    op: str = field(default="wait_flag", init=False)
    src: Pipe

    @property
    def dst(self) -> Pipe:
        return self.pipe

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.src, Pipe):
            raise InternalCompilerError(f"wait_flag: src must be a Pipe, not {self.src!r}")


@dataclass(frozen=True, kw_only=True)
class Barrier(Sync):
    """``PipeBarrier<PIPE_X>``: later ``pipe`` work starts after earlier ``pipe`` work is done
    (``Pipe.ALL``: every pipe)."""

    op: str = field(default="barrier", init=False)


@dataclass(frozen=True, kw_only=True)
class CrossSync(Sync):
    """A cross-core flag (AIC <-> its AIVs): ``flag_id`` in ``mode`` (2: one AIC, its AIVs)."""

    flag_id: Affine = field(default_factory=Affine)
    mode: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.flag_id, Affine):
            raise InternalCompilerError(f"{self.op}: flag_id must be an Affine, not "
                                        f"{self.flag_id!r}")
        if not isinstance(self.mode, int) or isinstance(self.mode, bool):
            raise InternalCompilerError(f"{self.op}: mode must be an int, not {self.mode!r}")

    def call(self) -> str:
        return f"{self.op} {self.pipe} flag={self.flag_id} mode={self.mode}"


@dataclass(frozen=True, kw_only=True)
class CrossSet(CrossSync):
    """``CrossCoreSetFlag<mode, pipe>(flag_id)``: fires when earlier ``pipe`` work is done."""

    op: str = field(default="cross_set", init=False)


@dataclass(frozen=True, kw_only=True)
class CrossWait(CrossSync):
    """``CrossCoreWaitFlag<mode, pipe>(flag_id)``: blocks the whole core until the other
    core's set arrived."""

    op: str = field(default="cross_wait", init=False)


def program_epilogue(kernel: Kernel, core: CoreType) -> tuple[Instr, ...]:
    """What every ``core`` program of ``kernel`` runs after its body (``lower/ir.py``, "Program
    prologue and epilogue"): a ``barrier ALL`` on the AIC (id ``kernel.next_id``: no body
    instruction has it), nothing on the AIV (its TPipe lives to the end, and the destructor's
    ``TPipe::Destroy`` drains the pipes, kernel_tpipe_impl.h:80-86, 595-600)."""
    if core == CoreType.AIC:
        return (Barrier(Pipe.ALL, comment="kernel end: drain every pipe (the TPipe was "
                        "destroyed at the start)", id=kernel.next_id),)
    return ()
