"""Issue 20, item 5: user-derived text (names, paths, constants, options) reaches generated
files only through the escaping filter of its context (symgrad/emit/render.py).

Hostile names, folders and constants are fed through every template of every target; each
generated file must have the structure of the file generated for harmless names (same Python
AST up to string constants, same C text once comments are removed), load without running the
payload, and compute the right values.
"""
from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import io
import re
import shlex
import shutil
import subprocess
import sys
import tokenize

import numpy as np
import pytest

import symgrad as sg
R = importlib.import_module("symgrad.emit.render")   # the package's render() shadows it

PAYLOAD = '__import__("builtins").setattr(__import__("builtins"), "SG_PWNED", 1)'
# a class name, a folder, and a constant's repr that try to leave their context
HOSTILE_NAME = f'A"; {PAYLOAD}; "\u2028{PAYLOAD}\x1c{PAYLOAD}\n{PAYLOAD}\\'
HOSTILE_DIRS = ["a*", "int sg_pwned_c = 1; ", "*b \"q\" '$(id)'; \u2028\x1c\u202e"]
C_PAYLOAD = "sg_pwned_c"

FORWARD = '''
import symgrad as sg


def forward(x, y, scale):
    z = sg.exp(x) * scale + y
    return (z * z).sum(dim=0) + sg.tanh(y).mean()
'''


class HostileConstant(float):
    """A constant whose repr would be a statement of its own."""

    def __repr__(self):
        return f"2.0\n{PAYLOAD}\n# */ int {C_PAYLOAD}_k = 1; /*"

    __hash__ = float.__hash__


def _load_forward(folder, modname):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fwd.py"
    path.write_text(FORWARD)
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod


def _hostile_function(fn, name):
    class Hostile(sg.Function):
        @staticmethod
        def forward(ctx, x, y, scale):
            return fn(x, y, scale)

    Hostile.__name__ = Hostile.__qualname__ = name
    return Hostile


def _program(fn, name, constant, target, dtype="float64"):
    """The Program the emitter sees for `fn` named `name` (its site and source in its file)."""
    from symgrad.compiler import regenerate_options
    from symgrad.differentiate import differentiate
    from symgrad.emit import Program
    from symgrad.optimize import optimize
    from symgrad.trace import trace

    x = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    y = np.linspace(0.5, 1.5, 3)
    graph = trace(_hostile_function(fn, name), x, y, constant)
    return Program(name=graph.name, source=graph.source, constants=graph.constants,
                   forward=optimize(graph, "forward"),
                   backward=optimize(differentiate(graph), "backward"), target=target,
                   dtype=dtype, options=regenerate_options(fn, graph, target, dtype) +
                   " --shape " + shlex.quote(f"{name}=2,3"))


def _files(program):
    from symgrad.compiler import emit

    files, _ = emit(program, program.target)
    if program.target == "cuda":
        from symgrad.emit.cuda import host_check_source

        files = dict(files, host_check_c=host_check_source(program))
    return files


def _py_shape(text):
    """The module's AST with every string constant blanked (the names live in strings)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree)


def _py_comments(text):
    return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type == tokenize.COMMENT]


def _c_code(text):
    """C text without its comments (a minimal lexer: strings, //, /* */, line splices)."""
    text = text.replace("\\\n", "")
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            assert j >= 0, "unterminated comment"
            i = j + 2
            out.append(" ")
        elif text[i] == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return re.sub(r"[ \t]+", " ", "".join(out))


@pytest.fixture
def hostile_and_benign(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = _load_forward(tmp_path.joinpath(*HOSTILE_DIRS), "sg_issue20_hostile_fwd")
    good = _load_forward(tmp_path / "plain", "sg_issue20_plain_fwd")
    yield bad.forward, good.forward
    sys.modules.pop("sg_issue20_hostile_fwd", None)
    sys.modules.pop("sg_issue20_plain_fwd", None)


@pytest.mark.parametrize("target", ["numpy", "c", "cuda", "torch", "jax"])
def test_hostile_strings_through_every_template(hostile_and_benign, target):
    bad_fn, good_fn = hostile_and_benign
    bad = _files(_program(bad_fn, HOSTILE_NAME, HostileConstant(2.0), target))
    good = _files(_program(good_fn, "Plain", 2.0, target))
    assert len(bad) == len(good)
    kinds = sorted(n.rsplit(".", 1)[-1] if "." in n else n for n in bad)
    assert kinds == sorted(n.rsplit(".", 1)[-1] if "." in n else n for n in good)
    for (bname, btext), (gname, gtext) in zip(sorted(bad.items(), key=lambda kv: kv[0][-4:]),
                                              sorted(good.items(), key=lambda kv: kv[0][-4:])):
        # file names are word characters only
        assert re.fullmatch(r"\w+(\.\w+)?", bname), bname
        # no line break but "\n", no control or format character anywhere
        assert all(ch == "\n" or ch.isprintable() for ch in btext), bname
        assert btext.splitlines() == btext.split("\n")[:-1]
        if bname.endswith(".py"):
            assert _py_shape(btext) == _py_shape(gtext), bname
            comments = _py_comments(btext)
            assert len(comments) == len(_py_comments(gtext))
            # the regenerate line is one shell command whose FILE:NAME is the source, quoted
            line = next(c for c in comments if "Regenerate with:" in c)
            words = shlex.split(line.split("Regenerate with:", 1)[1])
            assert words[:2] == ["symgrad", "compile"] and words[3] == "--target"
            assert words[2].endswith(":" + HOSTILE_NAME.split("\u2028")[0].split("\n")[0]) \
                or "\\u2028" in words[2]
            assert "--shape" in words
        else:   # .c, .cu, the host check
            bcode, gcode = _c_code(btext), _c_code(gtext)
            assert C_PAYLOAD not in bcode
            assert bcode == gcode, bname


def test_hostile_module_loads_without_running_payload(hostile_and_benign, tmp_path):
    """The NumPy and C modules of the hostile program load (exec, ctypes) and compute the
    benign program's numbers; the payload never runs."""
    from symgrad.compiler import CompiledModule, load_source

    bad_fn, good_fn = hostile_and_benign
    x = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    y = np.linspace(0.5, 1.5, 3)
    for target in ("numpy", "c"):
        if target == "c" and shutil.which("cc") is None and shutil.which("gcc") is None:
            continue
        bad = _program(bad_fn, HOSTILE_NAME, HostileConstant(2.0), target)
        good = _program(good_fn, "Plain", 2.0, target)
        from symgrad.compiler import emit

        outs = []
        for program in (bad, good):
            files, main = emit(program, target)
            meta = {"n_outputs": 1, "differentiable_outputs": [True], "inputs": ["x", "y"],
                    "outputs": ["out"], "dtype": "float64", "name": program.name}
            module = CompiledModule(files, main, meta, target)
            assert "fallback" not in module.stats
            outs.append((module.raw.forward(x, y), module.raw.backward(np.ones(3), x, y)))
        assert not hasattr(builtins, "SG_PWNED")
        np.testing.assert_allclose(outs[0][0][0], outs[1][0][0])
        for a, b in zip(outs[0][1], outs[1][1]):
            np.testing.assert_allclose(a, b)
    # the NumPy module's NAME and SOURCE hold the user's text exactly
    files, main = __import__("symgrad.compiler", fromlist=["emit"]).emit(
        _program(bad_fn, HOSTILE_NAME, HostileConstant(2.0), "numpy"), "numpy")
    mod = load_source(files[main], "<issue20>")
    assert mod.NAME == HOSTILE_NAME
    assert mod.SOURCE.endswith(":" + HOSTILE_NAME) and "\u2028" in mod.SOURCE
    assert not hasattr(builtins, "SG_PWNED")


def test_compile_end_to_end_with_hostile_class_name(tmp_path, monkeypatch):
    """sg.compile and Function.apply with a hostile class name: no payload, right values, and
    `write()` stays inside its folder."""
    monkeypatch.setenv("SYMGRAD_CACHE_DIR", str(tmp_path / "cache"))

    def body(x, y, scale):
        return (sg.exp(x) * scale + y).sum()

    F = _hostile_function(body, "../../" + HOSTILE_NAME)
    x = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    y = np.linspace(0.5, 1.5, 3)
    for target in ("numpy", "c"):
        m = sg.compile(F, x, y, 2.0, target=target)
        np.testing.assert_allclose(m.forward(x, y), (np.exp(x) * 2.0 + y).sum())
        written = m.write(tmp_path / "out" / "mod.py")
        for path in written:
            assert str(path).startswith(str(tmp_path / "out")), path
    out = F.apply(sg.tensor(x, requires_grad=True), sg.tensor(y), 2.0)
    np.testing.assert_allclose(out.item(), (np.exp(x) * 2.0 + y).sum())
    assert not hasattr(builtins, "SG_PWNED")


@pytest.mark.parametrize("word", ["class", "lambda", "def", "None", "import"])
def test_keyword_argument_names_get_identifiers(word):
    def f(x, **kw):
        return x * kw[word] + kw[word].sin()

    x = np.linspace(0.1, 1.0, 4)
    w = np.linspace(1.0, 2.0, 4)
    m = sg.compile(f, x, **{word: w})
    assert all(n.isidentifier() and not __import__("keyword").iskeyword(n)
               for n in m.input_names)
    np.testing.assert_allclose(m.forward(x, w), x * w + np.sin(w))
    gx, gw = m.backward(np.ones(4), x, w)
    np.testing.assert_allclose(gx, w)
    np.testing.assert_allclose(gw, x + np.cos(w))


def test_unescaped_user_text_is_refused_by_the_environment():
    """The one enforcement point: a template writing Untrusted text without a filter fails."""
    env = R.environment()
    with pytest.raises(R.UnescapedText):
        env.from_string("NAME = {{ name }}").render(name=R.untrusted('a"b'))
    with pytest.raises(R.UnescapedText):
        env.from_string("# {{ names | join(', ') }}").render(names=R.untrusted(["a", "b\n"]))
    assert env.from_string("NAME = {{ name | py_str }}").render(
        name=R.untrusted('a"b\n\u2028')) == 'NAME = "a\\"b\\x0a\\u2028"'


@pytest.mark.parametrize("text", [
    'plain', 'a"b', "a'b", "x\ny", "x\ry", "\u2028", "\u2029", "\x1c\x1d\x1e", "\x85",
    "\x0b\x0c", "\\", "back\\", "*/ int x; /*", "??/", "\u202eevil", "tab\there", "é中",
    '"""', "\x00", "\U0001f600"])
def test_filters_per_context(text):
    # Python string literal: evaluates back to the text, on one line
    lit = R.py_str(text)
    assert ast.literal_eval(lit) == text and "\n" not in lit and lit.isprintable()
    # docstring text: inside """ ... """ it reads back as the text
    doc = R.py_doc(text)
    assert ast.literal_eval('"""' + doc + '"""') == text and doc.isprintable()
    # comments: one line, printable; C: no comment end/start, no trailing backslash
    for c in (R.py_comment(text), R.c_comment(text)):
        assert c.isprintable() and len(("#" + c + "\n").splitlines()) == 1
    c = R.c_comment(text)
    assert "*/" not in c and "/*" not in c and "\\\n" not in c + "\n" and "??" not in c
    # shell: one word, exactly the text
    assert shlex.split(R.shell(text)) == [text] or text == "\x00"
    # ordinary text is unchanged
    if text == "plain":
        assert (R.py_str(text), R.py_doc(text), R.c_comment(text)) == ('"plain"', "plain",
                                                                       "plain")
