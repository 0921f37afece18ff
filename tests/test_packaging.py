"""The installed package holds every subpackage: pyproject.toml lists them by name (the
templates and cli folders map into the package), so a new folder must be added there. A
wheel without symgrad.nn failed at `import symgrad`, while the editable install CI uses
worked."""
import os
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_subpackage_is_listed_in_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = set()
    for folder, dirs, files in os.walk(os.path.join(ROOT, "symgrad")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        if "__init__.py" in files:
            found.add(os.path.relpath(folder, ROOT).replace(os.sep, "."))
    assert found - listed == set()
    assert {"symgrad.templates", "symgrad.cli"} <= listed
