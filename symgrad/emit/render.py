"""The Jinja environment: templates inside the package, strict, deterministic."""
from __future__ import annotations

import functools
import importlib.resources

import jinja2


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        # templates/ ships as the package symgrad.templates (pip install . and -e . alike)
        loader=jinja2.FileSystemLoader(str(importlib.resources.files("symgrad.templates"))),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template: str, context: dict) -> str:
    text = environment().get_template(template).render(**context)
    # one trailing newline, no trailing spaces: stable diffs
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n") + "\n"
