"""Errors and warnings of ascendsched.

User-input errors derive from :class:`AscendSchedError`; each message names the object, the
limit, the cause and a way out. :class:`InternalCompilerError` means a bug in ascendsched.
"""

from __future__ import annotations


class AscendSchedError(Exception):
    """Base of every error caused by user input (algorithm, schedule, options)."""


class AlgorithmError(AscendSchedError):
    """A malformed tensor expression: rank or dtype mismatch, out-of-range index, cycle..."""


class ScheduleError(AscendSchedError):
    """An illegal schedule primitive or combination of primitives."""


class CapacityError(ScheduleError):
    """On-chip buffers do not fit the target's usable capacity. ``facts``: what does not fit,
    without the message's advice (for a caller that knows the better way out)."""

    def __init__(self, message: str, facts: str | None = None) -> None:
        super().__init__(message)
        self.facts = facts if facts is not None else message


class NotAffineError(AscendSchedError):
    """An index expression that the polyhedral model cannot represent."""


class UnsupportedError(AscendSchedError):
    """A valid algorithm that this compiler (or the target) cannot lower yet: dtype, op, layout."""


class SyncError(AscendSchedError):
    """Synchronisation cannot be made legal within the target's budget."""


class ToolchainError(AscendSchedError):
    """An external tool (g++) is missing or failed; the message says how to fix it."""


class KernelTimeoutError(ToolchainError):
    """The emitted kernel's CPU run did not finish within the time limit."""


class UserCodeError(AscendSchedError):
    """The user's file or function could not be used: import failure, wrong signature or
    return value (``ascendsched MODULE:FUNCTION``)."""


class InputError(AscendSchedError):
    """Input arrays given to ``check``/``evaluate`` do not fit the algorithm's inputs."""


class InternalCompilerError(RuntimeError):
    """A bug in ascendsched: an IR invariant broke. Please report it with the kernel printout."""


class AscendSchedWarning(UserWarning):
    """Base of ascendsched warnings; ``warning_id`` lets users filter a single kind."""

    warning_id = "ascendsched"


class BarrierFallbackWarning(AscendSchedWarning):
    """Event ids ran out and a dependence was served by a barrier instead of a flag pair."""

    warning_id = "barrier-fallback"


class BufferingWarning(AscendSchedWarning):
    """The memory plan could not keep a schedule's buffering overlapping: a pipelined loop's
    buffers reuse bytes across pipes, or a multi-copy buffer's copies share bytes with other
    buffers, because the scope is too small."""

    warning_id = "buffering-not-honoured"
