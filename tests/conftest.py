"""Shared test set-up: hypothesis profiles ('ci' small, 'dev' larger), the repo on sys.path, and
the ``slow`` tier (every hypothesis test; g++ tests are marked in their modules)."""

import os

# numpy's threaded BLAS costs ~30 ms per small matmul on a busy 2-core machine (0.02 ms on one
# thread); the references and the simulator's Mmad do many small ones. Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Property tests (hypothesis) belong to the slow tier."""
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.slow)
