"""Markdown of the published audit's RQ1 comparison for one or more audits: languages, edit intents (its
Figure 1, against AIDev), application domains (its Figure 2, against Copilot Arena) and AI/ML
subcategories (its Table 1), each benchmark's shares beside the paper's, every reference column named
by its source. Used by report.md (one audit) and `tables.py` (several).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eval.audit import labels as L
from eval.audit.classify import describe

# Figure 2's comparison, largest Copilot Arena share first; User Interaction (no share stated) last
DOMAIN_ROWS = (L.BACKEND, L.FRONTEND, L.ALGORITHM, L.DATA, L.AI_ML, L.GAME, L.USER_INTERACTION)
WEB = ("Backend + Frontend", (L.BACKEND, L.FRONTEND), {"Copilot Arena": "46", "EDIT-Bench (published)": "24.1",
                                                        "CanItEdit (published)": "0.0"})  # fmt: skip


def _share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.1f}%)" if total else "NA"


def _table(title: str, rows: list[tuple[str, list[str]]], headers: list[str]) -> list[str]:
    lines = [f"| {title} | {' | '.join(headers)} |", "|---|" + "---:|" * len(headers)]
    lines += [f"| {name} | {' | '.join(cells)} |" for name, cells in rows]
    return lines


def _counts(audit: dict[str, Any], key: str) -> dict[str, int] | None:
    """An audit's label totals, or None for an audit written before the classifier."""
    return audit.get(key) if isinstance(audit.get(key), dict) and "classifier" in audit else None


def render(columns: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The four RQ1 tables: `columns` is (header, audit) per benchmark column."""
    heads = [h for h, _ in columns]
    audits = [a for _, a in columns]
    totals = [a["totals"]["problems"] for a in audits]

    def cells(key: str, name: str | tuple[str, ...], base: list[int] | None = None) -> list[str]:
        out = []
        for audit, total in zip(audits, base or totals, strict=True):
            counts = _counts(audit, key)
            names = (name,) if isinstance(name, str) else name
            out.append(
                "not classified" if counts is None else _share(sum(counts.get(n, 0) for n in names), total)
            )
        return out

    def published(table: dict[str, dict[str, str]], name: str) -> list[str]:
        return [table[col].get(name, "—") for col in table]

    # languages: the reference languages first, then any other a benchmark has
    seen = [n for a in audits for n in (_counts(a, "languages") or {})]
    languages = [*L.REFERENCE_LANGUAGES, *sorted(set(seen) - set(L.REFERENCE_LANGUAGES))]
    ref_head, ref = L.LANGUAGE_REFERENCE
    lines = ["### Languages", ""]
    lines += _table(
        "Language",
        [
            (n, [*cells("languages", n), *published(L.PUBLISHED_LANGUAGES, n), ref.get(n, "—")])
            for n in languages
        ],
        [*heads, *L.PUBLISHED_LANGUAGES, ref_head],
    )
    lines += ["", L.LANGUAGE_NOTE, ""]

    # edit intents (Figure 1)
    group_name, group, group_ref = L.INTENT_GROUP
    rows = [
        (
            n,
            [
                *cells("intents", n),
                *published(L.PUBLISHED_INTENTS, n),
                *(r.get(n, "—") for _, r in L.INTENT_REFERENCE),
            ],
        )
        for n in L.INTENTS
    ]
    rows.append((f"**{group_name}**", [*cells("intents", group), "0.0", "0.0", *group_ref]))
    lines += ["### Edit intent (the paper's Figure 1; reference: AIDev)", ""]
    lines += _table("Intent", rows, [*heads, *L.PUBLISHED_INTENTS, *(h for h, _ in L.INTENT_REFERENCE)])
    lines += ["", L.INTENT_NOTE, ""]

    # application domains (Figure 2)
    ref_head, ref = L.DOMAIN_REFERENCE
    rows = [
        (n, [*cells("domains", n), *published(L.PUBLISHED_DOMAINS, n), ref.get(n, "—")]) for n in DOMAIN_ROWS
    ]
    web_name, web, web_ref = WEB
    rows.append(
        (
            f"**{web_name}**",
            [*cells("domains", web), *(web_ref[c] for c in L.PUBLISHED_DOMAINS), web_ref[ref_head]],
        )
    )
    lines += ["### Application domain (the paper's Figure 2; reference: Copilot Arena)", ""]
    lines += _table("Domain", rows, [*heads, *L.PUBLISHED_DOMAINS, ref_head])
    lines += ["", L.DOMAIN_NOTE, ""]

    # AI/ML subcategories (Table 1): shares of each benchmark's AI/ML problems
    ai = [(_counts(a, "domains") or {}).get(L.AI_ML, 0) for a in audits]
    rows = [
        (n, [*cells("ai_subcategories", n, ai), *published(L.PUBLISHED_SUBCATEGORIES, n)])
        for n in L.AI_SUBCATEGORIES
    ]
    lines += ["### AI/ML subcategory (the paper's Table 1)", ""]
    lines += _table(
        "ML Subcategory",
        rows,
        [*(f"{h} ({n} AI/ML)" for h, n in zip(heads, ai, strict=True)), *L.PUBLISHED_SUBCATEGORIES],
    )
    lines += ["", L.SUBCATEGORY_NOTE, ""]
    sources = [
        f"- {h}: {describe(a['classifier']) if 'classifier' in a else 'no RQ1 labels (audited before the classifier)'}."
        for h, a in columns
    ]
    return "\n".join([*lines, "Where the labels come from:", "", *sources]) + "\n"
