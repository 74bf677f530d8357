"""Evaluate schedules through the cache: look up every key, run only the misses on an executor,
commit each result as it finishes, and tick the progress bar.

``fresh`` lists the keys this evaluator computed (cache misses), ``hits`` counts lookups the
cache answered: a resumed sweep's ``fresh`` never holds a key the cache already had.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ascendsched.autotune.cache import Cache
from ascendsched.autotune.evaluate import AnySchedule, Evaluation, cache_key, evaluate_schedule
from ascendsched.autotune.executor import Executor, LocalExecutor


def progress_bar(total: int, desc: str, enabled: bool) -> Any:
    """A tqdm bar on stderr (a no-op object when disabled or tqdm is missing)."""
    if enabled:
        try:
            from tqdm import tqdm

            tqdm.monitor_interval = 0  # no monitor thread: worker pools fork after bars exist
            return tqdm(total=total, desc=desc, unit="pt", dynamic_ncols=True, leave=True)
        except ImportError:
            pass
    return _NoBar()


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def close(self) -> None:
        pass


class Evaluator:
    """Cached, parallel evaluation of schedules."""

    def __init__(self, cache: Cache | None = None, executor: Executor | None = None, *,
                 on_fresh: Callable[[str, Evaluation], None] | None = None) -> None:
        self.cache = cache if cache is not None else Cache()
        self.executor = executor if executor is not None else LocalExecutor()
        self.on_fresh = on_fresh
        self.fresh: list[str] = []
        self.hits = 0
        self.fresh_cpu_s = 0.0  # lowering + model CPU seconds of the fresh evaluations

    def run(self, scheds: Sequence[AnySchedule], bar: Any = None) -> list[Evaluation]:
        """The evaluation of every schedule, in order (each distinct key evaluated once)."""
        bar = bar or _NoBar()
        keys = [cache_key(s) for s in scheds]
        got: dict[str, Evaluation] = {}
        todo: dict[str, AnySchedule] = {}
        for k, s in zip(keys, scheds):
            if k in got or k in todo:
                continue
            ev = self.cache.get(k)
            if ev is not None:
                got[k] = ev
                self.hits += 1
                bar.update(1)
            else:
                todo[k] = s
        miss = list(todo.items())
        for i, ev in self.executor.imap(evaluate_schedule, [s for _, s in miss]):
            k, s = miss[i]
            self.cache.put(s, ev, k)
            got[k] = ev
            self.fresh.append(k)
            self.fresh_cpu_s += ev.lower_cpu_s + ev.model_cpu_s
            bar.update(1)
            if self.on_fresh is not None:
                self.on_fresh(k, ev)
        return [got[k] for k in keys]

    def close(self) -> None:
        self.executor.close()
        self.cache.close()
