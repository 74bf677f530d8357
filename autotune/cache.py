"""The on-disk evaluation cache: one SQLite row per (algorithm, schedule, target, model version).

Every finished evaluation is committed at once (WAL journal), so a sweep killed at any moment
keeps everything it had finished and a rerun evaluates only what is missing. Compile failures
are cached like results (a schedule that failed fails again until the model version changes).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ascendsched.autotune.evaluate import AnySchedule, Evaluation, cache_key, model_version

_SCHEMA = """
CREATE TABLE IF NOT EXISTS evaluations (
    key TEXT PRIMARY KEY,
    algorithm TEXT NOT NULL,
    schedule TEXT NOT NULL,
    target TEXT NOT NULL,
    model_version TEXT NOT NULL,
    status TEXT NOT NULL,
    time_s REAL,
    result TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class Cache:
    """Evaluations by cache key; ``path=":memory:"`` keeps them in this process only."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self._db.commit()

    def get(self, key: str) -> Evaluation | None:
        row = self._db.execute("SELECT result FROM evaluations WHERE key = ?", (key,)).fetchone()
        return Evaluation.from_json(row[0]) if row else None

    def put(self, sched: AnySchedule, ev: Evaluation, key: str | None = None) -> None:
        key = key or cache_key(sched)
        self._db.execute(
            "INSERT OR REPLACE INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, sched.algo.name, str(sched), sched.target.name, model_version(), ev.status,
             ev.time_s if ev.ok else None, ev.to_json(), time.time()))
        self._db.commit()

    def keys(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT key FROM evaluations")}

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
