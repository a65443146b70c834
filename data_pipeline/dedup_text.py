"""The text each edit example is near-deduplicated on (`DedupOptions.text`).

- ``"edit"``: ``before + "\\n" + after``, the change alone. The same change under two commit
  messages is one duplicate.
- ``"formatted"``: the training text itself, instruction included, rendered by the
  ``editcoder`` prompt format that training uses (`core.formats`). EditPackFT was
  deduplicated on this text (nuprl/CanItEdit ``editpackft/format.py`` builds it as the
  ``content`` column that its near-dedup step reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.formats import FORMATS

# The columns each mode reads, so that a job loads only those.
TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "edit": ("before", "after"),
    "formatted": ("before", "instruction", "after"),
}
_FORMAT = FORMATS["editcoder"]


def dedup_texts(columns: Mapping[str, Sequence[str]], text: str) -> list[str]:
    """One dedup text per row of a columnar batch; a pure function of its rows."""
    if text not in TEXT_COLUMNS:
        raise ValueError(f"dedup text={text!r}: choose one of {tuple(TEXT_COLUMNS)}")
    rows = zip(*(columns[c] for c in TEXT_COLUMNS[text]), strict=True)
    if text == "edit":
        return [before + "\n" + after for before, after in rows]
    return [_FORMAT.prompt(before, instr) + _FORMAT.completion(after) for before, instr, after in rows]
