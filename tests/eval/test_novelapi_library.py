"""The library facts behind the failure classes: its folders and every name it defines."""

from __future__ import annotations

import sys

from eval.novelapi.library import library_facts, names_in


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
    assert library_facts("no_such_library_xyz") == library_facts("no_such_library_xyz", sys.executable)
    assert library_facts("no_such_library_xyz").names == frozenset()
