"""symgrad.autograd: torch.autograd's API over symgrad's runtime (same names, same semantics)."""

from symgrad import tensor as _tensor  # noqa: F401  (binds the runtime before the engine)
from symgrad.autograd import grad_mode, anomaly_mode
from symgrad.autograd.grad_mode import (
    no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode,
    is_inference_mode_enabled, set_multithreading_enabled, is_multithreading_enabled,
)
from symgrad.autograd.anomaly_mode import (
    detect_anomaly, set_detect_anomaly, is_anomaly_enabled, is_anomaly_check_nan_enabled,
)
from symgrad.autograd.engine import backward, grad, Node
from symgrad.autograd.function import Function, FunctionCtx, once_differentiable
from symgrad.autograd import function, engine, functional, forward_ad
from symgrad.autograd.gradcheck import gradcheck, gradgradcheck, GradcheckError
from symgrad.autograd.variable import Variable
from symgrad.autograd import graph, profiler
from symgrad.autograd.graph import SavedTensor

__all__ = [
    "Function", "FunctionCtx", "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled",
    "is_grad_enabled", "inference_mode", "is_inference_mode_enabled", "detect_anomaly",
    "set_detect_anomaly", "is_anomaly_enabled", "gradcheck", "gradgradcheck", "GradcheckError",
    "functional", "forward_ad", "Variable", "once_differentiable", "Node",
    "set_multithreading_enabled", "is_multithreading_enabled", "SavedTensor",
]
