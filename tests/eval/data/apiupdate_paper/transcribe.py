"""Transcribe the API-update paper's Tables 4-7 and 9-14 (its text, as in ../shared/papers/) into
`paper_runs.json` (the figures as the study's results.json would hold them) and `tables_4_7.md`
(Tables 4-7 as the paper prints them, rows copied cell for cell), beside this file.

    python tests/eval/data/apiupdate_paper/transcribe.py ../shared/papers/000_e076a3e7c836a40d.txt

It prints the average cells that the means of the per-model figures round differently.
"""

import json
import sys
from pathlib import Path

text = Path(sys.argv[1]).read_text(encoding="utf-8").splitlines()
MODELS = ["CodeLlama", "CodeQwen", "DeepSeek"]
EDITORS = ["FT-L", "GRACE", "A-GRACE", "MALMEN", "MEMIT", "PMET", "ROME"]


def rows_after(caption_start, n=8):
    i = next(i for i, line in enumerate(text) if line.startswith(caption_start))
    out = {}
    for line in text[i + 1 :]:
        name = line.split(" ")[0]
        if name in ["pre-edit", *EDITORS] and name not in out:
            out[name] = line.split(" ")[1:]
        if len(out) == n:
            return out


def rows_before(caption_start):
    i = next(i for i, line in enumerate(text) if line.startswith(caption_start))
    out = {}
    for line in text[i - 8 : i]:
        name = line.split(" ")[0]
        if name in EDITORS:
            out[name] = line.split(" ")[1:]
    return out


t4, t5, t6, t7 = (rows_after(f"Table {n}:") for n in (4, 5, 6, 7))
shap = {("single", m): rows_before(f"Table {9 + i}:") for i, m in enumerate(MODELS)}
shap |= {("successive", m): rows_before(f"Table {12 + i}:") for i, m in enumerate(MODELS)}
f = float


def cp(vals, split_idx, mi):
    base = split_idx * 8 + mi * 2
    return {"compiles@5": f(vals[base]), "pass@5": f(vals[base + 1])}


runs = []
for regime, table in (("single", t4), ("successive", t7)):
    for mi, m in enumerate(MODELS):
        before = {
            "generalization": {"compiles@5": 1.0, "pass@5": 1.0},
            "specificity": {"compiles@5": 1.0, "pass@5": 1.0},
            "generalization_canonical": {
                "compiles@5": f(t5["pre-edit"][2 * mi]),
                "pass@5": f(t5["pre-edit"][2 * mi + 1]),
            },
            "nonworkaround": {
                "compiles@5": f(t6["pre-edit"][2 * mi]),
                "pass@5": f(t6["pre-edit"][2 * mi + 1]),
            },
        }
        for e in EDITORS:
            after = {"generalization": cp(table[e], 0, mi), "specificity": cp(table[e], 1, mi)}
            if regime == "single":
                c, p, a, w = t5[e][4 * mi : 4 * mi + 4]
                after["generalization_canonical"] = {
                    "compiles@5": f(c),
                    "pass@5": f(p),
                    "adoption@5": f(a),
                    "workaround@5": f(w),
                }
                after["nonworkaround"] = {"compiles@5": f(t6[e][2 * mi]), "pass@5": f(t6[e][2 * mi + 1])}
            s = shap[(regime, m)][e]
            shapley = {}
            for si, split in enumerate(("generalization", "specificity")):
                dp, pc, pq, cf = map(f, s[4 * si : 4 * si + 4])
                shapley[split] = {
                    "C0": before[split]["compiles@5"],
                    "P0": before[split]["pass@5"],
                    "C1": after[split]["compiles@5"],
                    "P1": after[split]["pass@5"],
                    "dP": dp,
                    "phi_C": pc,
                    "phi_Q": pq,
                    "CF": cf,
                }
            runs.append(
                {
                    "model": m,
                    "editor": e,
                    "regime": regime,
                    "shapley_k": 5,
                    "before": before,
                    "after": after,
                    "shapley": shapley,
                }
            )
out = Path(__file__).resolve().parent
(out / "paper_runs.json").write_text(
    json.dumps({"source": "arXiv paper Tables 4-7 and 9-14", "runs": runs}, indent=1) + "\n"
)


# the golden: the paper's rows, as printed, in markdown
def md(header, rows):
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(r) + " |" for r in rows
    ]


def cp_table(n, caption, table):
    header = ["Method"]
    for sp in ("Gen.", "Spec."):
        header += [f"{m} {sp} {x}@5" for m in MODELS for x in ("C", "P")] + [
            f"{sp} ΔP (avg)",
            f"{sp} CF (avg)",
        ]
    pre = table["pre-edit"]
    rows = [["pre-edit", *pre[:6], "", "", *pre[6:12], "", ""]] + [[e, *table[e]] for e in EDITORS]
    return [f"## Table {n}: {caption} (k=5)", "", *md(header, rows), ""]


lines = ["# Tables 4-7 of the API-update editing study, as the paper prints them", ""]
lines += cp_table(
    4,
    "Model performance for single edits across Generalization and Specificity. Aggregate ΔP and CF are averaged across models.",
    t4,
)
h5 = ["Method"] + [f"{m} {x}@5" for m in MODELS for x in "CPAW"]
pre5 = ["pre-edit"] + [v for mi in range(3) for v in (*t5["pre-edit"][2 * mi : 2 * mi + 2], "", "")]
lines += [
    "## Table 5: Model performance for single edits on the canonically filtered Generalization set. (k=5)",
    "",
    *md(h5, [pre5] + [[e, *t5[e]] for e in EDITORS]),
    "",
]
h6 = ["Method"] + [f"{m} {x}@5" for m in MODELS for x in ("Compiles", "Pass")]
lines += [
    "## Table 6: Performance for single edits on the non-workaroundable subset. Only solutions using the target API can succeed. (k=5)",
    "",
    *md(h6, [["pre-edit", *t6["pre-edit"]]] + [[e, *t6[e]] for e in EDITORS]),
    "",
]
lines += cp_table(
    7,
    "Performance under successive edits on Generalization and Specificity. Aggregate ΔP and CF are averaged across models.",
    t7,
)
(out / "tables_4_7.md").write_text("\n".join(lines))
# rounding check: the averages vs the per-model means
for regime, table in (("single", t4), ("successive", t7)):
    for e in EDITORS:
        for si in range(2):
            dp = sum(f(shap[(regime, m)][e][4 * si]) for m in MODELS) / 3
            cf = sum(f(shap[(regime, m)][e][4 * si + 3]) for m in MODELS) / 3
            if f"{dp:.2f}" != table[e][8 * si + 6] or f"{cf:.2f}" != table[e][8 * si + 7]:
                print(regime, e, si, f"{dp:.4f}", table[e][8 * si + 6], f"{cf:.4f}", table[e][8 * si + 7])
