"""The model card in `DIR/final/README.md`: what was trained, on what, how, and how it scored.

Written when training saves `final/` (replacing any generic card), from files that are
already there: the resolved config (`final/editforge_config.yaml`), the data counts
(`DIR/data_stats.json`), the training log (`DIR/metrics.json`) and, for data built by
`python -m data_pipeline.build`, its `manifest.json`. Evaluation results are added later,
one benchmark at a time, and kept in `final/eval_results.json` so the card can be re-rendered:

    python -m train.model_card runs/tiny/final --results runs/tiny-fixtures/results.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from core.excess_metrics import EXCESS_CODE, EXCESS_CODE_REPO, PUBLISHED, current_layout
from core.layout import CONFIG_FILE, DATA_STATS_FILE, METRICS_FILE

CARD_FILE = "README.md"
EVAL_FILE = "eval_results.json"
_HYPERPARAMETERS = (
    "lr",
    "lr_scheduler",
    "warmup_steps",
    "epochs",
    "weight_decay",
    "max_grad_norm",
    "per_device_batch_size",
    "grad_accum",
    "max_length",
    "packing",
    "loss_on",
    "overlong",
    "dtype",
    "attn_implementation",
    "gradient_checkpointing",
    "optim",
    # RL recipes (train/rl.py)
    "algorithm",
    "num_generations",
    "temperature",
    "beta",
    "max_completion_length",
)
_CURVE_ROWS = 12  # logged steps the reward curve shows (evenly spaced, the last included)
_EVAL_METRICS = ("pass@1", "pass@10", EXCESS_CODE, EXCESS_CODE_REPO, "problems", "samples")


def write_model_card(final: Path | str, results: Path | str | None = None) -> Path:
    """Render `final/README.md`; with `results` (an eval `results.json`), add those results first."""
    final = Path(final)
    evals = _read_json(final / EVAL_FILE) or {}
    if results is not None:
        scored = _read_json(Path(results))
        if not scored or "metrics" not in scored:
            raise ValueError(f"{results}: not an evaluation results.json (no 'metrics')")
        name = scored.get("benchmark") or Path(results).parent.name
        evals[name] = {"metrics": scored["metrics"], "source": str(Path(results).resolve())}
        (final / EVAL_FILE).write_text(json.dumps(evals, indent=2))
    card = final / CARD_FILE
    card.write_text(render_model_card(final, evals))
    return card


def render_model_card(final: Path, evals: dict[str, Any] | None = None) -> str:
    config = yaml.safe_load((final / CONFIG_FILE).read_text())
    run_dir = final.parent
    recipe, data = config["recipe"], config.get("data")  # an RL run has tasks and rewards instead
    base = recipe["model"].get("path")
    # An adapter folder (LoRA without merge) loads through peft; the hub labels it from this line.
    library = "peft" if (final / "adapter_config.json").is_file() else "transformers"
    lines = ["---", f"library_name: {library}", "tags: [editforge, code-editing]"]
    if base and not Path(base).exists():
        lines.append(f"base_model: {base}")
    lines += ["---", "", f"# {run_dir.name}", ""]
    lines += [
        f"A code-edit model trained by EditForge with `recipe={recipe['name']}`: it takes code and an "
        "instruction and returns the edited code.",
        "",
        "## Base model",
        "",
        _base_model(recipe),
        "",
        "## Prompt format",
        "",
        f"`{recipe['prompt_format']}` (evaluation reads it from `{CONFIG_FILE}` in this folder).",
        "",
        "## Training",
        "",
        "| setting | value |",
        "| --- | --- |",
    ]
    lines += [f"| {key} | {recipe[key]} |" for key in _HYPERPARAMETERS if key in recipe]
    if recipe.get("lora"):
        lora = recipe["lora"]
        modules = ", ".join(lora.get("target_modules") or [])
        lines.append(
            f"| LoRA | r={lora['r']}, alpha={lora['alpha']}, dropout={lora['dropout']}, modules: {modules} |"
        )
    if recipe.get("quantization"):
        quant = recipe["quantization"]
        double = ", double quantisation" if quant.get("double_quant") else ""
        lines.append(
            f"| base weights (QLoRA) | 4-bit {quant['quant_type']}{double}, compute {quant['compute_dtype']} |"
        )
    lines.append(f"| DeepSpeed | {config.get('deepspeed_config') or 'none'} |")
    run = config.get("run", {})
    if run.get("max_steps", -1) > 0:
        lines.append(f"| max_steps | {run['max_steps']} |")
    lines.append(f"| seed | {run.get('seed')} |")
    lines += _training_log(run_dir)
    if data is not None:
        lines += ["", "## Data", ""] + _data(data, run_dir)
    else:
        lines += _rl_sections(config, run_dir)
    lines += ["", "## Evaluation", ""] + _evaluation(evals or {}, final)
    return "\n".join(lines) + "\n"


def _base_model(recipe: dict[str, Any]) -> str:
    model = recipe["model"]
    if model.get("tiny"):
        shape = ", ".join(f"{k}={v}" for k, v in model["tiny"].items() if v is not None)
        return (
            "None: a Llama initialised at random from a config "
            f"({shape}), with a BPE tokenizer trained on the training data."
        )
    revision = f" (revision `{model['revision']}`)" if model.get("revision") else ""
    return f"`{model['path']}`{revision}"


def _training_log(run_dir: Path) -> list[str]:
    metrics = _read_json(run_dir / METRICS_FILE)
    if not metrics:
        return []
    lines = []
    history = metrics.get("log_history", [])
    summary = next((h for h in reversed(history) if "train_loss" in h), None)
    if summary:
        lines.append(f"| steps | {summary.get('step')} ({summary.get('epoch', 0):.2f} epochs) |")
        lines.append(f"| final train loss | {summary['train_loss']:.4f} |")
    evals = [h for h in history if "eval_loss" in h]
    if evals:
        lines.append(f"| final validation loss | {evals[-1]['eval_loss']:.4f} |")
    return lines


def _rl_sections(config: dict[str, Any], run_dir: Path) -> list[str]:
    """An RL run's rewards, its tasks (the manifest's counts) and its reward curve."""
    weights = ", ".join(f"{k}={v}" for k, v in config.get("reward", {}).items())
    lines = [
        "",
        "## Rewards",
        "",
        f"Sandbox verdicts of each edit's tests (`train/rl_rewards.py`): {weights}.",
    ]
    manifest = _read_json(run_dir / "tasks_manifest.json")
    if manifest:
        dropped = ", ".join(f"{n} {reason}" for reason, n in manifest["dropped"].items()) or "none"
        lines += [
            "",
            "## Tasks",
            "",
            f"{manifest['kept']} of {manifest['candidates']} tasks (dropped: {dropped}).",
        ]
        lines += [
            f"- {label}: {n['problems']} problems, {n['tasks']} tasks"
            for label, n in manifest["sources"].items()
        ]
    history = [h for h in (_read_json(run_dir / METRICS_FILE) or {}).get("log_history", []) if "reward" in h]
    if history:
        every = max(1, -(-len(history) // _CURVE_ROWS))
        shown = history[::every] + ([history[-1]] if (len(history) - 1) % every else [])
        lines += ["", "## Reward curve", "", "| step | reward | pass |", "| --- | --- | --- |"]
        lines += [
            f"| {h['step']} | {h['reward']:.3f} | {h.get('rewards/pass/mean', float('nan')):.3f} |"
            for h in shown
        ]
    return lines


def _data(data: dict[str, Any], run_dir: Path) -> list[str]:
    specs = [{"path": data["path"], "synthetic": None}] if data.get("path") else data.get("datasets", [])
    lines = []
    for spec in specs:
        if spec.get("synthetic"):
            lines.append(f"- {spec['synthetic']} synthetic Python edits (`train/synthetic_edits.py`)")
            continue
        lines.append(
            f"- `{spec['path']}`" + (f" × {spec['weight']}" if spec.get("weight", 1.0) != 1.0 else "")
        )
        manifest = _read_json(Path(spec["path"]) / "manifest.json")
        if manifest:
            lines += _manifest_summary(manifest)
    stats = _read_json(run_dir / DATA_STATS_FILE)
    if stats and stats.get("train"):
        train = stats["train"]
        dropped = ", ".join(f"{k} {v}" for k, v in train.get("dropped", {}).items() if v) or "none"
        lines.append(
            f"- Training examples: {train['kept']} kept of {train['input']} (dropped: {dropped}), "
            f"{train.get('tokens', 0):,} tokens, {train.get('target_tokens', 0):,} of them in the loss"
        )
        if stats.get("validation"):
            lines.append(f"- Validation examples: {stats['validation']['kept']}")
    return lines or ["(no data record found)"]


def _manifest_summary(manifest: dict[str, Any]) -> list[str]:
    config = manifest.get("config", {})
    pipeline = config.get("pipeline", {})
    name = pipeline.get("name") if isinstance(pipeline, dict) else pipeline
    commit = manifest.get("versions", {}).get("editforge_commit")
    built = f"built by `python -m data_pipeline.build pipeline={name}`" if name else "built by data_pipeline"
    lines = [f"  - {built}" + (f" at editforge {commit[:12]}" if commit else "")]
    lines.append(f"  - {manifest['kept']} rows kept of {manifest['input']}")
    dropped = sorted(manifest.get("dropped", {}).items(), key=lambda kv: -kv[1])
    if dropped:
        lines.append("  - dropped: " + ", ".join(f"{reason} {count}" for reason, count in dropped))
    return lines


def _evaluation(evals: dict[str, Any], final: Path) -> list[str]:
    if not evals:
        return [
            "No results yet. Evaluate, then add the results to this card:",
            "",
            "```bash",
            f"python -m eval.run benchmark=fixtures model.path={final} out=OUT",
            f"python -m train.model_card {final} --results OUT/results.json",
            "```",
        ]
    published = {m.key: m.name for m in PUBLISHED}
    names = [f"{m} (%)" if m.startswith("pass@") else published.get(m, m) for m in _EVAL_METRICS]
    lines = ["| benchmark | split | " + " | ".join(names) + " |"]
    lines.append("| --- | --- |" + " --- |" * len(_EVAL_METRICS))
    for benchmark, entry in evals.items():
        for split, metrics in entry["metrics"].items():
            metrics = current_layout(metrics)  # results kept before the ExcessCode rename
            cells = [_cell(name, metrics.get(name)) for name in _EVAL_METRICS]
            lines.append(f"| {benchmark} | {split} | " + " | ".join(cells) + " |")
    lines += ["", "ExcessCode, lower is better, in both published forms:", ""]
    lines += [f"- **{m.name}** (`{m.key}`): {m.source}" for m in PUBLISHED]
    return lines


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "–"
    if name.startswith("pass@"):
        return f"{100 * value:.1f}"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.model_card",
        description="Re-render a trained model's card (DIR/final/README.md), adding evaluation results.",
    )
    parser.add_argument("final", type=Path, help="the model folder (DIR/final)")
    parser.add_argument("--results", type=Path, action="append", default=[], help="an eval results.json")
    args = parser.parse_args(argv)
    if not (args.final / CONFIG_FILE).is_file():
        print(
            f"error: {args.final} has no {CONFIG_FILE}; pass a trained model's final/ folder", file=sys.stderr
        )
        return 2
    try:
        for results in args.results or [None]:
            card = write_model_card(args.final, results)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(card)
    return 0


if __name__ == "__main__":
    sys.exit(main())
