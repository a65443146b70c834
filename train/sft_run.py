"""One SFT run, top to bottom: validate, set up, train, save, clean up.

`SFTRun(app)` rejects bad or conflicting settings before anything heavy happens;
`setup()` builds the parts in dependency order (training arguments first, so DeepSpeed
ZeRO-3 can partition the model while it loads; data before the model, so a bad dataset
fails fast); `train()`, `save()` and `cleanup()` do what they say.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

import datasets
from accelerate import PartialState
from transformers import TrainerCallback, set_seed
from transformers.trainer_utils import get_last_checkpoint
from trl import SFTConfig

from core.config import wandb_has_key
from core.errors import ConfigError
from core.formats import get_format
from core.layout import (
    ADAPTER_DIR,
    CONFIG_FILE,
    DATA_STATS_FILE,
    FINAL_DIR,
    METRICS_FILE,
    TOKENIZER_CACHE_DIR,
    WANDB_ID_FILE,
    write_trained_config,
)
from train.attention import resolve_attn_implementation
from train.config import DType, RunConfig, SFTAppConfig, deepspeed_config_path
from train.edit_data import load_edit_splits
from train.hub_push import push_folder
from train.levers import cuda_available, resolve_liger
from train.merge import merge_adapter
from train.mfu import detect_peak_tflops, flops_per_token
from train.model_card import write_model_card
from train.modeling import check_dtype, count_parameters, load_model, load_or_train_tokenizer
from train.tokenization import encode_dataset
from train.trainer import EditSFTTrainer

log = logging.getLogger(__name__)

# Liger's Triton kernels for the decoder layers; the loss stays trl's fused LM head (no logits built).
LIGER_KERNELS = {
    "rms_norm": True,
    "rope": True,
    "swiglu": True,
    "cross_entropy": False,
    "fused_linear_cross_entropy": False,
}


class SFTRun:
    def __init__(
        self, app: SFTAppConfig, resolved: dict[str, Any], callbacks: list[TrainerCallback] | None = None
    ):
        self.app, self.resolved, self.callbacks = app, resolved, callbacks or []
        recipe, run = app.recipe, app.run
        self.attn_implementation = resolve_attn_implementation(
            recipe.attn_implementation, recipe.packing, recipe.dtype
        )
        check_dtype(recipe.dtype)
        self.output_dir = Path(run.output_dir)
        self.resume_from = resume_checkpoint(app.run.resume, self.output_dir)
        self.format = get_format(recipe.prompt_format)
        self.trainer: EditSFTTrainer | None = None
        self.start_step = _global_step(self.resume_from)  # where training picks up (0: from scratch)

    def finished(self) -> bool:
        """Whether ``run.output_dir`` already holds this very run, finished: ``final/`` saved with the
        same resolved config, metrics written, and the last checkpoint at the step they end at. A
        rerun then has nothing to train, and leaves every output as it is (with another config,
        e.g. a larger ``run.max_steps``, it trains on from the last checkpoint instead)."""
        import yaml

        saved, metrics = self.output_dir / FINAL_DIR / CONFIG_FILE, self.output_dir / METRICS_FILE
        if self.app.run.resume != "auto" or self.resume_from is None or not saved.is_file():
            return False
        if not metrics.is_file() or yaml.safe_load(saved.read_text()) != yaml.safe_load(
            yaml.safe_dump(self.resolved)
        ):
            return False
        try:
            last = json.loads(metrics.read_text())["last"]
        except (ValueError, KeyError, TypeError):
            return False
        return isinstance(last, dict) and last.get("step") == self.start_step

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        self.args = training_arguments(self.app, self.output_dir)  # the process group, ZeRO-3's zero.Init
        if self.app.deepspeed_config and self.args.use_cpu:
            import deepspeed

            # On GPUs accelerate starts DeepSpeed's comm layer; on CPU it must exist before zero.Init.
            deepspeed.init_distributed(dist_backend="gloo")
        state = PartialState()
        # datasets writes a transform's cache beside its input's files: into a built dataset's own
        # folder. Disabled, it writes temporary files instead, removed when the run ends.
        datasets.disable_caching()
        splits = load_edit_splits(self.app.data)
        with state.main_process_first():
            self.tokenizer = load_or_train_tokenizer(
                self.app.recipe, self._tokenizer_texts(splits.train), self.output_dir / TOKENIZER_CACHE_DIR
            )
            train_ds, train_report = self._encode(splits.train)
            eval_ds, eval_report = self._encode(splits.validation) if splits.validation else (None, None)
        for name, report in (("training", train_report), ("validation", eval_report)):
            if report is not None and report.kept == 0:
                raise ConfigError(empty_split_message(name, report, self.app))
        self.data_stats = {
            "sources": splits.counts,
            "train": train_report.as_dict(),
            "validation": eval_report.as_dict() if eval_report else None,
        }
        log.info("training data: %s", self.data_stats["train"])
        if state.is_main_process:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            (self.output_dir / DATA_STATS_FILE).write_text(json.dumps(self.data_stats, indent=2))
            self._init_wandb()
        set_seed(self.app.run.seed)  # a tiny model's random init (and any resized embeddings) must repeat
        model = load_model(self.app.recipe, self.tokenizer, self.attn_implementation)
        log.info("attention: %s", self.attn_implementation)
        # attention counts per edit example (a packed row's documents attend only within themselves)
        attention_len = train_report.squared_tokens / max(train_report.tokens, 1)
        self.trainer = EditSFTTrainer(
            model=model,
            args=self.args,
            train_dataset=train_ds,
            eval_dataset=eval_ds,
            processing_class=self.tokenizer,
            peft_config=self.app.recipe.lora.peft_config() if self.app.recipe.lora else None,
            callbacks=self.callbacks,
            # the fused head projects only the positions with a target
            flops=flops_per_token(
                model, attention_len, train_report.target_tokens / max(train_report.tokens, 1)
            ),
            peak_tflops=self.app.run.peak_tflops or detect_peak_tflops(),
            compile_layers=self.app.recipe.compile_layers,
        )
        total, trainable = count_parameters(self.trainer.model)
        log.info("model: %.1fM parameters, %.2fM trainable", total / 1e6, trainable / 1e6)

    def _tokenizer_texts(self, train):
        if self.app.recipe.model.tiny is None:
            return None
        fmt = self.format
        return (fmt.prompt(r["before"], r["instruction"]) + fmt.completion(r["after"]) for r in train)

    def _encode(self, ds):
        recipe = self.app.recipe
        return encode_dataset(
            ds,
            self.tokenizer,
            self.format,
            recipe.loss_on,
            recipe.max_length,
            recipe.overlong,
            num_proc=self.app.run.dataset_num_proc,
        )

    def _reports_to_wandb(self) -> bool:
        return "wandb" in self.args.report_to

    def _init_wandb(self) -> None:
        if not self._reports_to_wandb():
            return
        import wandb

        cfg = self.app.recipe.wandb
        mode = cfg.mode or ("online" if wandb_has_key() else "offline")
        id_file = self.output_dir / WANDB_ID_FILE
        run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:12]
        id_file.write_text(run_id)
        wandb.init(
            project=cfg.project,
            name=self.output_dir.name,
            tags=list(cfg.tags),
            config=self.resolved,
            dir=str(self.output_dir),
            mode=mode,
            id=run_id,
            resume="allow",
        )

    # ------------------------------------------------------------------ train / save
    def train(self) -> None:
        assert self.trainer is not None, "call setup() first"
        if self.resume_from:
            log.info("resuming from %s", self.resume_from)
        self.trainer.train(resume_from_checkpoint=self.resume_from)
        if self.trainer.eval_dataset is not None:
            self.trainer.evaluate()

    def save(self) -> Path:
        """Write the final model (HF format, tokenizer, resolved config) to DIR/final; a run that
        trained no step (resumed from its own last checkpoint) leaves what is there as it is."""
        assert self.trainer is not None, "call setup() first"
        final = self.output_dir / FINAL_DIR
        if (
            self.resume_from is not None
            and self.trainer.state.global_step == self.start_step
            and final.is_dir()
        ):
            log.info("no step left to train after step %d: %s is left as it was", self.start_step, final)
            return final
        lora = self.app.recipe.lora
        target = self.output_dir / ADAPTER_DIR if lora is not None and lora.merge else final
        self.trainer.save_model(str(target))  # a collective under ZeRO-3: every rank calls it
        if self.trainer.is_world_process_zero():
            if target != final:
                self._merge(target, final)
            for folder in {target, final}:
                write_trained_config(folder, self.resolved)
            metrics = {k: v for k, v in self.trainer.state.log_history[-1].items()}
            (self.output_dir / METRICS_FILE).write_text(
                json.dumps({"log_history": self.trainer.state.log_history, "last": metrics}, indent=2)
            )
            write_model_card(final)  # our card replaces any generic one in final/
        self.trainer.accelerator.wait_for_everyone()
        return final

    def _merge(self, adapter: Path, final: Path) -> None:
        """The merged full model in `final`; a 4-bit base's adapter goes into a fresh 16-bit copy
        of the base (recipe.dtype), never into the 4-bit weights (train/merge.py says why)."""
        recipe = self.app.recipe
        if recipe.quantization is None:
            merged = self.trainer.accelerator.unwrap_model(self.trainer.model).merge_and_unload()
            merged.save_pretrained(str(final))
            self.tokenizer.save_pretrained(str(final))
            return
        model = recipe.model
        merge_adapter(adapter, final, model.path, model.revision, model.trust_remote_code, recipe.dtype.value)

    def push(self) -> None:
        push_final(self.app.run, self.output_dir, f"EditForge recipe={self.app.recipe.name}")

    def cleanup(self) -> None:
        if self._reports_to_wandb() and PartialState().is_main_process:
            import wandb

            if wandb.run is not None:
                wandb.finish()


def resume_checkpoint(resume: str, output_dir: Path) -> str | None:
    """The checkpoint `run.resume` names: with auto, the last one in `output_dir` (None: from scratch);
    with never, a ConfigError if there is one (SFT's and RL's runs resume alike)."""
    if resume not in ("auto", "never"):
        return resume
    last = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
    if resume == "never" and last is not None:
        raise ConfigError(
            f"run.output_dir={output_dir} already has {Path(last).name}; "
            "pass run.resume=auto to continue it or choose a new run.output_dir"
        )
    return last


def push_final(run: RunConfig, output_dir: Path, message: str) -> None:
    """Upload DIR/final (model, tokenizer, config and card) to run.hub_model_id, from rank 0."""
    if not run.push_to_hub or not PartialState().is_main_process:
        return
    final = output_dir / FINAL_DIR
    url = push_folder(final, run.hub_model_id, run.hub_private_repo, f"{message}, run {output_dir.name}")
    log.info("pushed %s to the hub: %s", final, url)


def empty_split_message(name: str, report, app: SFTAppConfig) -> str:
    """One line for a split the overlong policy left empty: the counts and what would keep rows."""
    recipe = app.recipe
    options = [f"raise recipe.max_length (now {recipe.max_length})"]
    if recipe.overlong.value == "drop":
        options.append("use recipe.overlong=truncate")
    if name == "validation":
        options.append("set data.val_size=0 to train without validation")
    dropped = ", ".join(f"{count} {reason}" for reason, count in sorted(report.dropped.items()))
    return (
        f"the {name} split is empty: all {report.input} rows were dropped ({dropped}) "
        f"under recipe.max_length={recipe.max_length}, recipe.overlong={recipe.overlong.value}; "
        + ", or ".join(options)
    )


def _global_step(checkpoint: str | None) -> int:
    """The step a checkpoint was saved at (its trainer_state.json), 0 for none."""
    if checkpoint is None:
        return 0
    try:
        return int(json.loads((Path(checkpoint) / "trainer_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return int(Path(checkpoint).name.rpartition("-")[2] or 0)


def training_arguments(app: SFTAppConfig, output_dir: Path) -> SFTConfig:
    """trl's `SFTConfig` for `app`: the recipe's optimisation, its speed levers, the run's logging and saving.

    Shared by `SFTRun` and scripts/bench_train.py, so the benchmark times the step that training runs."""
    recipe, run = app.recipe, app.run
    on_gpu = cuda_available()
    liger = resolve_liger(recipe.liger_kernels).enabled  # preflight has settled auto; a bare config has not
    has_eval = app.data.val_size > 0
    every = recipe.gradient_checkpointing_every
    return SFTConfig(
        **shared_arguments(recipe, run, output_dir, app.deepspeed_config),
        optim=recipe.optim.value,
        per_device_eval_batch_size=recipe.per_device_batch_size,
        activation_checkpointing=recipe.gradient_checkpointing,
        activation_checkpointing_kwargs={"every_n_layers": every} if every > 1 else None,
        use_liger_kernel=liger,
        liger_kernel_config=LIGER_KERNELS if liger else None,
        # Its isnan check reads every micro-step's loss on the host; EditSFTTrainer stops on a bad loss.
        logging_nan_inf_filter=False,
        eval_strategy="steps" if (has_eval and run.eval_steps) else "no",
        eval_steps=run.eval_steps,
        max_length=recipe.max_length,
        packing=recipe.packing,
        packing_strategy="bfd",
        padding_free=recipe.packing,
        dataset_num_proc=run.dataset_num_proc,
        dataloader_num_workers=run.dataloader_num_workers,
        dataloader_persistent_workers=run.dataloader_num_workers > 0,
        # Batches go to the GPU from pinned memory without blocking the host.
        accelerator_config={"non_blocking": on_gpu},
        # Every parameter takes part in the forward (full fine-tune and LoRA): no search for
        # unused ones, and no per-rank warning that it found none.
        ddp_find_unused_parameters=False,
    )


def shared_arguments(recipe: Any, run: RunConfig, output_dir: Path, deepspeed: str | None) -> dict[str, Any]:
    """What SFT's and RL's trainer arguments share: the optimisation, precision, logging, saving,
    seeds, trackers, DeepSpeed and the device (CPU runs use gloo under torchrun)."""
    on_gpu = cuda_available()
    return dict(
        output_dir=str(output_dir),
        run_name=recipe.name,
        num_train_epochs=recipe.epochs,
        max_steps=run.max_steps,
        learning_rate=recipe.lr,
        lr_scheduler_type=recipe.lr_scheduler,
        warmup_steps=recipe.warmup_steps,
        weight_decay=recipe.weight_decay,
        max_grad_norm=recipe.max_grad_norm,
        per_device_train_batch_size=recipe.per_device_batch_size,
        gradient_accumulation_steps=recipe.grad_accum,
        bf16=recipe.dtype == DType.bf16 and on_gpu,
        fp16=recipe.dtype == DType.fp16,
        logging_steps=run.logging_steps,
        logging_first_step=True,
        save_strategy="steps",
        save_steps=run.save_steps,
        save_total_limit=run.save_total_limit,
        seed=run.seed,
        data_seed=run.seed,
        report_to=list(run.report_to),  # transformers expands ["all"] to the trackers installed
        deepspeed=deepspeed_config_path(deepspeed) if deepspeed else None,
        use_cpu=not on_gpu,
        ddp_backend="gloo" if not on_gpu and int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,
    )
