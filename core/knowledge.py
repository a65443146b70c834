"""The knowledge text a novel-API evaluation cell shows: parts of an API's S/E/M bundle, rendered.

A bundle (written by `data_pipeline/novel_api/bundles.py`) holds the API's specification S (name,
signature, parameters, returns), verified examples E and mechanism M (prose and source). The study
varies which parts a model sees; a *cell* is a subset of `PARTS`, `CELL_PRESETS` is the study's grid.
Evaluation and the data pipeline render the same way, so this lives in core (standard library only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

PARTS = frozenset({"S_name", "S_sig", "E", "M_prose", "M_code"})
MASK = "<API>"

_S = frozenset({"S_name", "S_sig"})
# The study's twelve cells (App. E.1): specification (name; name + signature), examples,
# mechanism prose and source code ablated apart. M is the prose alone; code is `M_code`.
CELL_PRESETS: dict[str, frozenset[str]] = {
    "baseline": frozenset(),
    "name-only": frozenset({"S_name"}),
    "S": _S,
    "E": frozenset({"E"}),
    "M": frozenset({"M_prose"}),
    "M_code": frozenset({"M_code"}),
    "S+E": _S | {"E"},
    "S+M": _S | {"M_prose"},
    "E+M": frozenset({"E", "M_prose"}),
    "Full": PARTS,
    "S+E+M_code": _S | {"E", "M_code"},
    "S+M_code": _S | {"M_code"},
}
# The study's own names of the three cells outside its main text (App. E.1).
PAPER_NAMES = {"k1a_only": "name-only", "k1a_k1b_k2_mcode": "S+E+M_code", "k1_full_mcode": "S+M_code"}


def cell_parts(cell: str) -> frozenset[str]:
    """The parts of a cell: a preset's name (`CELL_PRESETS`), or parts joined by "+"
    (``S_name+S_sig+M_prose``, ``E+M_code``); ValueError naming the choices otherwise."""
    cell = PAPER_NAMES.get(cell, cell)
    if cell in CELL_PRESETS:
        return CELL_PRESETS[cell]
    parts = frozenset(p.strip() for p in cell.split("+"))
    if not parts or not parts <= PARTS:
        raise ValueError(
            f"knowledge cell {cell!r}: a preset ({', '.join(CELL_PRESETS)}) or parts joined by '+' "
            f"({', '.join(sorted(PARTS))})"
        )
    return parts


def render_knowledge(bundle: dict[str, Any], cell: Iterable[str], stripped: bool = False) -> str:
    """The text of `cell`'s parts of `bundle`, in a fixed order, one headed section each; "" for an
    empty cell. `stripped` writes every name of the API (paths, qualname, bare name) as `<API>`, so
    the model must use the knowledge rather than recall the name."""
    parts = frozenset(cell)
    unknown = sorted(parts - PARTS)
    if unknown:
        raise ValueError(f"unknown knowledge parts {unknown}; choose from {sorted(PARTS)}")
    spec = bundle.get("S") or {}
    about = bundle.get("M") or {}
    sections = []
    if "S_name" in parts:
        sections.append(_name_section(bundle))
    if "S_sig" in parts and spec.get("signature"):
        sections.append(_signature_section(spec))
    if "E" in parts and bundle.get("E"):
        sections.append(_examples_section(bundle["E"]))
    if "M_prose" in parts and about.get("prose"):
        sections.append(f"How it works:\n{about['prose']}")
    if "M_code" in parts and about.get("code"):
        sections.append(f"Source:\n```python\n{about['code']}\n```")
    text = "\n\n".join(s for s in sections if s)
    return mask_names(text, bundle) if stripped else text


def api_names(bundle: dict[str, Any]) -> list[str]:
    """Every way the text may name the API, longest first: its public paths, module.qualname, the
    qualname and the bare name."""
    qualname = str(bundle.get("qualname") or "")
    names = {str(p) for p in bundle.get("paths") or []}
    if bundle.get("module") and qualname:
        names.add(f"{bundle['module']}.{qualname}")
    names |= {qualname, qualname.rsplit(".", 1)[-1]}
    return sorted((n for n in names if n), key=lambda n: (-len(n), n))


def mask_names(text: str, bundle: dict[str, Any]) -> str:
    """`text` with each whole-identifier occurrence of the API's names replaced by `<API>`."""
    names = api_names(bundle)
    if not names:
        return text
    pattern = re.compile(r"(?<![\w])(?:" + "|".join(re.escape(n) for n in names) + r")(?![\w])")
    return pattern.sub(MASK, text)


def _name_section(bundle: dict[str, Any]) -> str:
    paths = [str(p) for p in bundle.get("paths") or []]
    name = paths[0] if paths else str((bundle.get("S") or {}).get("name") or bundle.get("qualname", ""))
    release = " ".join(str(x) for x in (bundle.get("library"), bundle.get("version")) if x)
    lines = [f"API: {name}" + (f" ({release})" if release else "")]
    if len(paths) > 1:
        lines.append("Also importable as: " + ", ".join(paths[1:]))
    return "\n".join(lines)


def _signature_section(spec: dict[str, Any]) -> str:
    lines = [f"Signature: {spec['signature']}"]
    params = spec.get("params") or []
    if params:
        lines.append("Parameters:")
        for param in params:
            facts = [str(param[k]) for k in ("type",) if param.get(k)]
            if param.get("default") is not None:
                facts.append(f"default {param['default']}")
            head = f"- {param['name']}" + (f" ({', '.join(facts)})" if facts else "")
            about = str(param.get("description") or "").replace("\n", "\n  ")  # continuation lines indented
            lines.append(head + (f": {about}" if about else ""))
    returns = spec.get("returns") or {}
    kind, what = returns.get("type"), returns.get("description")
    if kind or what:
        lines.append("Returns: " + (f"{kind}: {what}" if kind and what else str(kind or what)))
    return "\n".join(lines)


def _examples_section(examples: list[dict[str, Any]]) -> str:
    blocks = ["Examples:"]
    for example in examples:
        block = f"```python\n{example['code']}\n```"
        if example.get("output"):
            block += f"\nOutput:\n```\n{example['output'].rstrip()}\n```"
        blocks.append(block)
    return "\n".join(blocks)
