"""Candidate bugs of one unit: `core.mutation`'s operators and bug patterns on the lines its tests run,
spread over the operators, each written into the module's own text (comments and layout kept)."""

from __future__ import annotations

import ast
import random
from collections import Counter
from dataclasses import dataclass

from core.mutation import Site, applied, mutation_sites, pattern_sites, preorder, shown_change, splice, spread


@dataclass(frozen=True)
class Bug:
    source: str  # the whole module with the bug
    operator: str
    line: int
    description: str  # "operator: `a + b` -> `a - b`"


def unit_bugs(
    source: str,
    first: int,
    last: int,
    covered: set[int],
    operators: list[str],
    cap: int,
    seed: str,
) -> tuple[list[Bug], Counter[str]]:
    """At most `cap` distinct bugs between lines `first` and `last` on statements in `covered`, and
    the counts of the candidates left out (`uncovered`, `equivalent`, `unsplicable`)."""
    tree = ast.parse(source)
    nodes = preorder(tree)
    counts: Counter[str] = Counter()
    seen = {ast.dump(tree)}
    distinct: list[Site] = []
    for site in mutation_sites(tree, nodes) + pattern_sites(tree, nodes):
        if site.operator not in operators or not first <= site.line <= last:
            continue
        if site.statement_line not in covered:
            counts["uncovered"] += 1
            continue
        with applied(nodes, site):
            dump = ast.dump(tree)
        if dump in seen:
            counts["equivalent"] += 1
            continue
        seen.add(dump)
        distinct.append(site)
    bugs = []
    for site in spread(distinct, cap, random.Random(seed)):
        text = splice(source, tree, nodes, site)
        if text is None:
            counts["unsplicable"] += 1
            continue
        before = shown_change(nodes, site)
        with applied(nodes, site):
            after = shown_change(nodes, site) if site.operator != "delete" else "pass"
        bugs.append(Bug(text, site.operator, site.line, f"{site.operator}: `{before}` -> `{after}`"))
    return bugs, counts
