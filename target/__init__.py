"""Machine models. The only place hardware numbers live."""

from ascendsched.target.ascend910b import ASCEND_910B, DEFAULT_TARGET
from ascendsched.target.model import CoreType, Pipe, Scope, ScopeSpec, Target

__all__ = ["ASCEND_910B", "DEFAULT_TARGET", "CoreType", "Pipe", "Scope", "ScopeSpec", "Target"]
