"""torch.nn's functional API: `F = sg.nn.functional` (see `symgrad.nn.functional`)."""
from . import functional  # noqa: F401

__all__ = ["functional"]
