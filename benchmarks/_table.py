"""Aligned plain-text and Markdown tables."""
from __future__ import annotations


def render(headers, rows, markdown=False, align=None, title=None):
    """``align``: string of 'l'/'r' per column (default: first column left, rest right)."""
    headers = [str(h) for h in headers]
    rows = [[("" if c is None else str(c)) for c in r] for r in rows]
    ncol = len(headers)
    if align is None:
        align = "l" + "r" * (ncol - 1)
    widths = [max([_w(headers[i])] + [_w(r[i]) for r in rows]) for i in range(ncol)]

    def fmt(cells):
        out = []
        for i, c in enumerate(cells):
            pad = widths[i] - _w(c)
            out.append(c + " " * pad if align[i] == "l" else " " * pad + c)
        return out

    lines = []
    if markdown:
        if title:
            lines += [f"**{title}**", ""]
        lines.append("| " + " | ".join(fmt(headers)) + " |")
        lines.append("|" + "|".join((":" if a == "l" else "-") + "-" * max(1, w) +
                                    (":" if a == "r" else "-")
                                    for a, w in zip(align, widths)) + "|")
        lines += ["| " + " | ".join(fmt(r)) + " |" for r in rows]
    else:
        if title:
            lines.append(title)
        lines.append("  ".join(fmt(headers)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(fmt(r)).rstrip() for r in rows]
    return "\n".join(lines)


def _w(s: str) -> int:
    # all our markers (✗ ↑ —) are single-width
    return len(s)
