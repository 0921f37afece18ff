"""The documentation site stays consistent with the code and with itself, without MkDocs
installed (CI also runs `mkdocs build --strict`, which checks links and docstrings):
the CLI reference is the parser's own help, every page is in the nav, and the nav names no
page that is missing."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import docs_cli  # noqa: E402


def _nav_pages():
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        text = f.read()
    nav = text[text.index("\nnav:\n"):]
    return re.findall(r"([\w./-]+\.md)\s*$", nav, flags=re.M)


def test_cli_reference_is_the_parsers_help():
    page = docs_cli.current_page()
    assert page == docs_cli.updated_page(page), (
        "docs/cli.md differs from `symgrad COMMAND --help`: run PYTHONPATH=. python tools/docs_cli.py")


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    docs = os.path.join(ROOT, "docs")
    pages = {os.path.relpath(os.path.join(d, f), docs).replace(os.sep, "/")
             for d, _, files in os.walk(docs) for f in files if f.endswith(".md")}
    nav = _nav_pages()
    assert len(nav) == len(set(nav))
    assert sorted(set(nav) - pages) == []      # a nav entry without its file
    assert sorted(pages - set(nav)) == []      # a page nobody can reach from the nav


def test_the_differences_table_is_one_table():
    """Every difference from torch is collected in runtime.md's one table; a page that states
    one elsewhere links to it."""
    with open(os.path.join(ROOT, "docs", "runtime.md"), encoding="utf-8") as f:
        page = f.read()
    assert page.count("## Differences from torch\n") == 1
    table = page[page.index("## Differences from torch\n"):]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| **")]
    assert len(rows) > 40                      # header + rows: Fn()(x), 1 / x, kl_div at 0, ...
    assert all(line.count(" | ") >= 3 for line in rows)


def test_readme_pytorch_and_jax_section_runs_and_trains_as_the_frameworks_do():
    """The README's "Using symgrad from PyTorch and JAX" code runs as written, and its two
    loops end where the same loops on torch's and JAX's own autograd end."""
    import pytest

    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Using symgrad from PyTorch and JAX"):]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    torch.manual_seed(0)
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)
    # the same loops on the frameworks' own autograd, from the same start
    torch.manual_seed(0)
    x, y = torch.randn(32, 3), torch.randn(32, 1)
    params = [torch.nn.Parameter(0.5 * torch.randn(3, 8)), torch.nn.Parameter(torch.zeros(8)),
              torch.nn.Parameter(0.5 * torch.randn(8, 1)), torch.nn.Parameter(torch.zeros(1))]
    opt = torch.optim.SGD(params, lr=0.1)
    for _ in range(100):
        opt.zero_grad()
        ns["mlp_loss"](x, *params, y).backward()
        opt.step()
    for a, b in zip(ns["params"], params):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    jnp = jax.numpy

    def jloss(x, W1, b1, W2, b2, y):
        return jnp.mean((jnp.tanh(x @ W1 + b1) @ W2 + b2 - y) ** 2)

    step = jax.jit(lambda p, x, y: [w - 0.1 * g for w, g in
                                    zip(p, jax.grad(lambda p: jloss(x, *p, y))(p))])
    p = [jnp.asarray(t.detach().numpy()) for t in params]
    for _ in range(100):
        p = step(p, jnp.asarray(x.numpy()), jnp.asarray(y.numpy()))
    for a, b in zip(ns["p"], p):
        assert abs(a - b).max() < 1e-4
