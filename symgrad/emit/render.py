"""The Jinja environment: templates inside the package, strict, deterministic — and the one
place where user-derived text is escaped for the file it lands in.

A name, a path, a constant's repr or a command line option comes from the user (a class can be
named `A"; __import__("os").system("id"); "`, a folder `*/ evil(); /*`). The emitters wrap
each such string in `Untrusted`; the environment's `finalize` refuses to write an `Untrusted`
value, so a template must pass it through the filter of its context:

    py_str       a Python string literal, with its double quotes:  NAME = {{ name | py_str }}
    py_doc       text inside a Python triple-quoted docstring
    py_comment   text after `#` in Python
    c_comment    text inside a C / CUDA comment (`/* */` or `//`)
    comment(c)   py_comment or c_comment, by the comment marker c ("#" or "//")
    shell        one shell word (shlex.quote); the result is Untrusted again, as a shell line
                 sits in a comment: {{ source | shell | comment("#") }}

Each escape leaves ordinary text (identifiers, relative paths, numbers) unchanged, so the
generated files of ordinary programs are what they were. No filter's output holds a line
break of any kind (str.splitlines also splits at \\x1c-\\x1e, \\x85, \\u2028, \\u2029), a
control or format character (bidi overrides included), a `*/`, or a backslash a C
preprocessor could splice a `//` comment's next line with.
"""
from __future__ import annotations

import functools
import importlib.resources
import shlex

import jinja2


class Untrusted(str):
    """User-derived text: it reaches a generated file only through an escaping filter."""

    __slots__ = ()


class UnescapedText(jinja2.TemplateError):
    """A template wrote user-derived text without an escaping filter (a symgrad bug)."""


def untrusted(value):
    """`value` (a str, or a list / tuple of them) marked as user-derived; None stays None."""
    if value is None or isinstance(value, Untrusted):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(untrusted(v) for v in value)
    return Untrusted(value)


def _escape_char(ch: str) -> str:
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def _printable(text: str, also: str = "") -> str:
    """`text` with every non-printable character (and each of `also`) as a \\x / \\u escape."""
    text = str(text)
    if text.isprintable() and not any(ch in text for ch in also):
        return text   # (str.isprintable: every character is; the common case, one C call)
    return "".join(ch if ch.isprintable() and ch not in also else _escape_char(ch)
                   for ch in str(text))


def py_str(text) -> str:
    """A Python string literal (double-quoted) whose value is `text`."""
    return '"' + _printable(str(text).replace("\\", "\\\\").replace('"', '\\"')) + '"'


def py_doc(text) -> str:
    """`text` inside a (non-raw) triple-quoted docstring: its value reads as `text`."""
    return _printable(str(text).replace("\\", "\\\\").replace('"', '\\"'))


def py_comment(text) -> str:
    """`text` on one Python comment line (a comment ends only at a line break)."""
    return _printable(text)


def c_comment(text) -> str:
    """`text` inside a C comment: no line break, no `*/` or `/*`, no backslash (a trailing one
    splices the next line into a `//` comment), no trigraph."""
    text = _printable(text, also="\\")
    return text.replace("*/", "*\\x2f").replace("/*", "/\\x2a").replace("??", "?\\x3f")


def comment(text, marker="#") -> str:
    return py_comment(text) if marker == "#" else c_comment(text)


def shell(text) -> Untrusted:
    """One shell word (quoted where needed), still to be escaped for the comment it sits in."""
    return Untrusted(shlex.quote(str(text)))


def _finalize(value):
    if isinstance(value, Untrusted):
        raise UnescapedText(
            f"user-derived text {str(value)[:60]!r} reached a template without an escaping "
            "filter (py_str, py_doc, py_comment, c_comment, comment, shell)")
    return value


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        # templates/ ships as the package symgrad.templates (pip install . and -e . alike)
        loader=jinja2.FileSystemLoader(str(importlib.resources.files("symgrad.templates"))),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        finalize=_finalize,
    )
    env.filters.update(py_str=py_str, py_doc=py_doc, py_comment=py_comment,
                       c_comment=c_comment, comment=comment, shell=shell,
                       join=_joiner(env.filters["join"]))
    return env


def _joiner(join):
    """Jinja's join, whose result is Untrusted when one of the joined values is."""

    @jinja2.pass_eval_context
    def joined(ctx, value, d="", attribute=None):
        items = list(value)
        text = join(ctx, items, d, attribute)
        parts = items if attribute is None else \
            [ctx.environment.getitem(v, attribute) for v in items]
        return Untrusted(text) if any(isinstance(p, Untrusted) for p in parts) else text

    return joined


def render(template: str, context: dict) -> str:
    text = environment().get_template(template).render(**context)
    # one trailing newline, no trailing spaces: stable diffs. Split at "\n" only: the filters
    # leave no other line break, and str.splitlines would also split at \x1c or \u2028
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip("\n") + "\n"
