"""torch.autograd.graph names: ``Node`` (the grad_fn base class)."""

from symgrad.autograd.engine import Node  # noqa: F401

__all__ = ["Node"]
