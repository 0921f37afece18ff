"""The ops a traced value supports, in groups: what an unsupported-op error lists (one group
per kind of op, instead of ~200 names in one run) and what the docs show."""
from __future__ import annotations

GROUPS = (
    ("reductions and scans", (
        "all", "amax", "amin", "any", "argmax", "argmin", "argsort", "cummax", "cummin",
        "cumprod", "cumsum", "diff", "dist", "kthvalue", "logcumsumexp", "logsumexp", "max",
        "mean", "min", "msort", "nanmean", "nansum", "norm", "prod", "sort", "std", "sum",
        "topk", "trace", "var")),
    ("shape and indexing", (
        "T", "mT", "broadcast_to", "chunk", "clone", "contiguous", "detach", "diag",
        "diag_embed", "diagonal", "expand", "expand_as", "flatten", "flip", "gather",
        "index_select", "masked_fill", "moveaxis", "movedim", "narrow", "permute", "repeat",
        "repeat_interleave", "reshape", "reshape_as", "roll", "split", "squeeze", "swapaxes",
        "t", "take_along_dim", "tile", "transpose", "tril", "triu", "unbind", "unflatten",
        "unsqueeze", "view", "view_as", "where")),
    ("linear algebra", (
        "addmm", "baddbmm", "bmm", "cross", "dot", "ger", "inner", "kron", "matmul", "mm",
        "mv", "outer", "vdot")),
    ("comparison and logic", (
        "eq", "ge", "gt", "heaviside", "isfinite", "isinf", "isnan", "isneginf", "isposinf",
        "le", "logical_and",
        "logical_not", "logical_or", "lt", "ne", "sgn", "sign", "truth")),
    ("dtype and size", ("dim", "double", "float", "ndim", "numel", "size", "to", "type_as")),
)


def grouped(names) -> list[tuple[str, list[str]]]:
    """(group, sorted names) for `names`; those in no group are elementwise math."""
    names = set(names)
    out, placed = [], set()
    math = ("elementwise math", sorted(n for n in names
                                        if not any(n in g for _, g in GROUPS)))
    for title, members in (math,) + GROUPS:
        chosen = sorted(n for n in members if n in names)
        placed.update(chosen)
        if chosen:
            out.append((title, chosen))
    return out


def grouped_text(names) -> str:
    """'elementwise math: abs, acos, ...; reductions and scans: all, ...; ...'."""
    return "; ".join(f"{title} ({len(members)}): {', '.join(members)}"
                     for title, members in grouped(names))
