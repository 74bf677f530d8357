"""Autotuning: search spaces over schedules, search strategies, cached parallel evaluation.

    from ascendsched.autotune import library_space, tune
    result = tune(library_space("softmax", 4096, 4096), budget=64)
    print(result.best.schedule, result.best.evaluation.time_s)   # modelled
"""

from ascendsched.autotune.cache import Cache
from ascendsched.autotune.codegen import schedule_code
from ascendsched.autotune.evaluate import Evaluation, cache_key, evaluate_schedule, model_version
from ascendsched.autotune.executor import LocalExecutor, RayExecutor, make_executor
from ascendsched.autotune.runner import Evaluator
from ascendsched.autotune.search import SAMPLERS, STRATEGIES, Trial, TuneResult, tune
from ascendsched.autotune.space import Checked, Param, PruneReport, Space
from ascendsched.autotune.spaces import (
    default_space,
    gemm_space,
    library_space,
    vector_space,
)

__all__ = [
    "SAMPLERS", "STRATEGIES", "Cache", "Checked", "Evaluation", "Evaluator", "LocalExecutor",
    "Param", "PruneReport", "RayExecutor", "Space", "Trial", "TuneResult", "cache_key",
    "default_space", "evaluate_schedule", "gemm_space", "library_space", "make_executor",
    "model_version", "schedule_code", "tune", "vector_space",
]
