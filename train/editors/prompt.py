"""The prompt baseline: an update is told to the model in its instruction, no weight changes.

It bounds what weight editing has to beat: the model reads every recorded update notice in
every prompt from then on.
"""

from __future__ import annotations

from typing import Any

from core.editing import APIUpdate, EditorOptions

HEADER = "API updates:"


class PromptEditor:
    """Records update notices; `notice()` is all of them in edit order, under a header line."""

    name = "prompt"
    options = EditorOptions  # none: no weights change

    def __init__(self, model: Any, tokenizer: Any, options: EditorOptions | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.notices: list[str] = []

    def edit(self, update: APIUpdate) -> dict[str, float]:
        self.notices.append(update.notice.strip())
        return {"notices": len(self.notices)}

    def notice(self) -> str:
        return "\n\n".join([HEADER, *self.notices]) if self.notices else ""

    def reset(self) -> None:
        self.notices.clear()
