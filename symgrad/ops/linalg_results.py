"""torch.linalg's result types, in the op table's layer: the tracer (symgrad._linalg_trace)
and the runtime (symgrad.linalg, which re-exports them) return the same named tuples."""
from __future__ import annotations

import collections

# torch.return_types' named tuples
EighResult = collections.namedtuple("linalg_eigh", "eigenvalues eigenvectors")
SlogdetResult = collections.namedtuple("linalg_slogdet", "sign logabsdet")
SvdResult = collections.namedtuple("linalg_svd", "U S Vh")
QrResult = collections.namedtuple("linalg_qr", "Q R")
LstsqResult = collections.namedtuple("linalg_lstsq", "solution residuals rank singular_values")
