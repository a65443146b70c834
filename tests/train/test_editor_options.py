"""Typed editor options: each editor class declares its options dataclass, every shipped config
matches it key for key, and a bad option fails as one line before any model loads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import asdict, fields
from pathlib import Path

import pytest
import yaml

from core.editing import EditorOptions, editor_class, editor_options, load_editor
from core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
EDITOR_CONFIGS = sorted((REPO / "configs" / "apiupdate" / "editor").glob("*.yaml"))


@pytest.mark.parametrize("path", EDITOR_CONFIGS, ids=lambda p: p.stem)
def test_each_config_lists_exactly_its_editors_options_at_their_defaults(path):
    """The YAML documents every option and the class's defaults are the YAML's: neither drifts."""
    config = yaml.safe_load(path.read_text())
    schema = editor_class(config["target"]).options
    assert issubclass(schema, EditorOptions)
    assert set(config["options"]) == {f.name for f in fields(schema)}
    assert asdict(editor_options(config["target"], config["options"])) == asdict(schema())


def test_a_bad_option_is_one_line_naming_the_key_and_what_is_allowed():
    ft_l = "train.editors.ft_l:FTLEditor"
    with pytest.raises(
        ConfigError, match=r"editor\.options\.lyer .*its options: delta, layer, lr, module, steps"
    ):
        editor_options(ft_l, {"lyer": 3})
    with pytest.raises(ConfigError, match=r"editor\.options\.layer: Value 'abc'"):
        editor_options(ft_l, {"layer": "abc"})
    with pytest.raises(ConfigError, match=r"editor\.options: FT-L needs delta >= 0"):
        editor_options(ft_l, {"delta": -1})
    with pytest.raises(ConfigError, match=r"editor\.options\.norm_on='weights'"):
        editor_options("train.editors.malmen:MALMENEditor", {"norm_on": "weights"})
    with pytest.raises(ConfigError, match=r"editor\.options\.prefixes"):
        editor_options("train.editors.rome:ROMEEditor", {"prefixes": [[5]]})
    with pytest.raises(ConfigError, match=r"its options: none"):
        editor_options("train.editors.prompt:PromptEditor", {"layer": 1})
    # values arrive as YAML and overrides give them: converted to the declared types
    assert editor_options(ft_l, {"lr": 1, "layer": "3"}) == editor_class(ft_l).options(layer=3, lr=1.0)


def test_a_plugin_editor_declares_its_options_and_one_without_them_is_refused(tmp_path, monkeypatch):
    (tmp_path / "shout_editor.py").write_text(
        textwrap.dedent(
            '''
            from dataclasses import dataclass

            from core.editing import EditorOptions


            @dataclass
            class ShoutOptions(EditorOptions):
                word: str = "HEY"
                times: int = 1


            class ShoutEditor:
                """Says the notice louder; the options say how."""

                name = "shout"
                options = ShoutOptions

                def __init__(self, model, tokenizer, options):
                    self.model, self.tokenizer, self.settings = model, tokenizer, options


            class Untyped:
                def __init__(self, model, tokenizer, **options):
                    self.options = options
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    editor = load_editor("shout_editor:ShoutEditor", None, None, {"times": "2"})
    assert editor.settings.times == 2 and editor.settings.word == "HEY"
    with pytest.raises(ConfigError, match=r"editor\.options\.loud .*its options: times, word"):
        load_editor("shout_editor:ShoutEditor", None, None, {"loud": True})
    with pytest.raises(ConfigError, match="declares no `options` schema"):
        load_editor("shout_editor:Untyped", None, None, {})
    with pytest.raises(ConfigError, match="takes ShoutOptions, not EditorOptions"):
        load_editor("shout_editor:ShoutEditor", None, None, EditorOptions())


def test_the_study_refuses_a_bad_option_before_it_loads_a_model(tmp_path):
    """model.path names no model at all: the options are checked first, so the error is theirs."""
    from hydra.errors import HydraException

    from core.entry import one_line, validate_overrides
    from eval.apiupdate_edit import APP, preflight

    paths = [f"benchmark.path={tmp_path}", f"model.path={tmp_path / 'no-model'}", "editor=ft-l"]
    with pytest.raises(HydraException) as composed:  # Hydra refuses it while composing
        validate_overrides(APP, [*paths, "editor.options.lyer=3"])
    assert one_line(composed.value).startswith("unknown config key editor.options.lyer: check its spelling")
    with pytest.raises(ConfigError, match="editor.options: FT-L needs delta >= 0 and steps >= 1"):
        preflight(validate_overrides(APP, [*paths, "editor.options.steps=0"]))
    run = subprocess.run(
        [sys.executable, "-m", "eval.apiupdate_edit", *paths, "+editor.options.lyer=3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith("error: unknown config key editor.options.lyer (editor train.editors.ft_l")
