"""The model-editor contract: how an API update is put into a model (FT-L, LoRA, GRACE, a prompt).

The API-update benchmark (`python -m eval.apiupdate_edit`) edits a model with the examples of
one modified API, evaluates it, and either resets it (single regime) or edits on (successive
regime). Editors are named by a dotted path (`package.module:Class`) in the `editor` config
group, so the shipped ones live in `train/editors/` and another method (MEMIT, AlphaEdit, ...)
plugs in from any package without evaluation importing it. Each editor class declares its
options as a dataclass (`options`, an `EditorOptions`), so `editor.options.*` is checked like
every other config: an unknown key, a wrong type or a bad value fails before any model loads.

An editor owns the model it edits: `model` is what generation uses now, `edit` changes it in
place and accumulates over calls, `reset` returns it to the weights it was built with, and
`notice` is the text prompt-based editors add to every instruction ("" for weight editors).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from core.errors import ConfigError


@dataclass(frozen=True)
class EditExample:
    """One edit example: the prompt as the model sees it, and the completion it should give.

    `target` carries no EOS; editors that train append the tokenizer's EOS so the edited model
    learns to stop.
    """

    prompt: str
    target: str


@dataclass(frozen=True)
class APIUpdate:
    """One modified API: its id (`math.sqrt/R1`), the update notice, and the edit examples.

    `names` are the modified API as code writes it, most specific first (`math.square_root`,
    `square_root`): the "subject" that locate-then-edit editors (ROME, MEMIT, ...) look for in an
    edit prompt. Empty, `subject_names()` falls back to the id's API and its last dotted part.
    """

    api_id: str
    notice: str
    examples: tuple[EditExample, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    names: tuple[str, ...] = ()

    def subject_names(self) -> tuple[str, ...]:
        """The names to look for, longest first within the given order, without repeats."""
        api = self.api_id.split("/", 1)[0]
        found = self.names or (api, api.rsplit(".", 1)[-1])
        return tuple(dict.fromkeys(n for n in found if n))


@dataclass
class EditorOptions:
    """An editor's options (`editor.options`); each editor extends it with its own fields and
    checks in `__post_init__` what is wrong whatever the model (what needs the model, such as
    a layer index, the editor checks when built). An editor without options uses it as is."""


class Editor(Protocol):
    name: str
    options: ClassVar[type[EditorOptions]]  # its options schema
    model: Any  # the (possibly wrapped) model to generate with now
    tokenizer: Any

    def edit(self, update: APIUpdate) -> dict[str, float]:
        """Put `update` into the model, on top of earlier edits; returns figures for the report."""
        ...

    def notice(self) -> str:
        """Text to add to every instruction from now on ("" for editors that change weights)."""
        ...

    def reset(self) -> None:
        """Undo every edit: the model is again exactly the one the editor was built with."""
        ...


@runtime_checkable
class LearnedEditor(Editor, Protocol):
    """An editor that first learns how to edit (MALMEN's hyper-network, A-GRACE's key encoder).

    `fit` trains on a benchmark's edit split (one `APIUpdate` per modified API, its examples
    the reliability rows) and writes what it learned to the folder `out`; `load` reads such a
    folder back, so evaluation trains once and every later run loads. `fitted` says whether
    either has happened (an editor built with a `checkpoint` option loads it at once).
    """

    fitted: bool

    def fit(self, updates: Sequence[APIUpdate], out: Path) -> dict[str, float]: ...

    def load(self, path: Path) -> None: ...


def editor_class(target: str) -> type[Editor]:
    """The class `target` names (`package.module:Class`), or a ConfigError that names it."""
    module_name, _, class_name = target.partition(":")
    if not module_name or not class_name:
        raise ConfigError(f"editor.target={target!r}: write it as package.module:Class")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"editor.target={target!r} cannot be loaded: {err}") from err
    schema = getattr(cls, "options", None)
    if not (isinstance(schema, type) and issubclass(schema, EditorOptions)):
        raise ConfigError(
            f"editor.target={target}: the class declares no `options` schema "
            "(a dataclass extending core.editing.EditorOptions)"
        )
    return cls


def editor_options(target: str, options: Mapping[str, Any] | None = None) -> EditorOptions:
    """`options` as the options dataclass of the editor `target` names, validated strictly."""
    from core.config import to_dataclass

    cls = editor_class(target)
    return to_dataclass(cls.options, options or {}, "editor.options", owner=f"editor {target}")


def load_editor(
    target: str, model: Any, tokenizer: Any, options: Mapping[str, Any] | EditorOptions | None = None
) -> Editor:
    """Build the editor `target` names with its options (a mapping is validated first)."""
    cls = editor_class(target)
    if not isinstance(options, EditorOptions):
        options = editor_options(target, options)
    elif not isinstance(options, cls.options):
        raise ConfigError(f"editor {target} takes {cls.options.__name__}, not {type(options).__name__}")
    return cls(model, tokenizer, options)  # type: ignore[call-arg]  # the Protocol has no __init__


def examples_of(updates: Sequence[APIUpdate]) -> list[EditExample]:
    """Every edit example of `updates`, in order."""
    return [example for update in updates for example in update.examples]
