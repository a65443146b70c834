"""The library facts behind the failure classes: its folders and every name it defines."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from eval.novelapi.library import LibraryFactsWarning, library_facts, modules_in, names_in, same_environment


def test_names_cover_modules_definitions_reexports_and_all(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from .text import slugify as to_slug\n__all__ = ['exported_name']\n"
    )
    (package / "text.py").write_text(
        "LIMIT = 3\n\ndef slugify(text):\n    return text\n\nclass Slugger:\n    mode = 'x'\n"
        "    def run(self):\n        self.state = 1\n"
    )
    (package / "sub" / "deep.py").write_text("def helper():\n    pass\n")
    (package / "broken.py").write_text("def (:\n")
    names = names_in([str(package)])
    assert {"pkg", "text", "sub", "deep", "slugify", "to_slug", "exported_name", "LIMIT", "Slugger"} <= names
    assert {"mode", "run", "state", "helper"} <= names
    assert "made_up_name" not in names


def test_facts_come_from_the_interpreter_that_has_the_library():
    facts = library_facts("json", sys.executable)
    assert facts.folders and "JSONDecoder" in facts.names and "loads" in facts.names
    assert {"json", "json.decoder", "json.tool"} <= facts.modules and "json.__init__" not in facts.modules


def test_a_library_found_nowhere_is_announced_not_silent():
    library_facts.cache_clear()
    with pytest.warns(LibraryFactsWarning, match="'no_such_library_xyz' not found by this interpreter"):
        missing = library_facts("no_such_library_xyz")
    with pytest.warns(LibraryFactsWarning, match="not found by the interpreter"):
        assert library_facts("no_such_library_xyz", sys.executable + "-absent") == missing
    assert missing.names == frozenset() and missing.modules == frozenset()


def test_a_venv_on_the_same_base_python_is_its_own_environment(tmp_path):
    """`python -m venv` (and `uv venv`) link the new interpreter to the same base executable: its
    real path equals ours, its site-packages do not. Its library must be read through it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    package = Path(site) / "venvonlylib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("def only_in_the_venv():\n    pass\n")
    if python.is_symlink():  # the case a comparison of real paths took for this process
        assert python.resolve() == Path(sys.executable).resolve()
    assert Path(sysconfig.get_paths()["purelib"]) != Path(site)
    assert not same_environment(str(python)) and same_environment(sys.executable) and same_environment(None)
    facts = library_facts("venvonlylib", str(python))
    assert facts.folders == (str(package),) and "only_in_the_venv" in facts.names
    assert facts.modules == {"venvonlylib"}


def test_module_paths_of_a_package(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for name in ("__init__.py", "text.py", "sub/__init__.py", "sub/deep.py"):
        (tmp_path / "pkg" / name).write_text("")
    assert modules_in("pkg", [str(tmp_path / "pkg")]) == {"pkg", "pkg.text", "pkg.sub", "pkg.sub.deep"}
    assert modules_in("pkg", []) == frozenset()
