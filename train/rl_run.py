"""One RL run: tasks, the policy, trl's trainer with the sandbox's rewards, train, save.

The trainer is trl's (`GRPOTrainer`, or `RLOOTrainer` for `recipe.algorithm=rloo`), never a loop of
our own; what is ours is the reward path (`train/rl_rewards.py`: one batch of verdicts per step
from the tasks' benchmark kinds) and the tasks (`train/rl_tasks.py`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from accelerate import PartialState
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback, set_seed

from core.errors import ConfigError
from core.formats import get_format
from core.layout import FINAL_DIR, METRICS_FILE, write_trained_config
from core.sandbox import Sandbox
from train.attention import resolve_attn_implementation
from train.model_card import write_model_card
from train.modeling import torch_dtype
from train.rl_config import RLAppConfig
from train.rl_probe import HackProbe
from train.rl_rewards import VerdictRewards
from train.rl_tasks import TaskSet, build_tasks, task_prompt
from train.sft_run import push_final, resume_checkpoint, shared_arguments

log = logging.getLogger(__name__)
TASKS_MANIFEST = "tasks_manifest.json"


class RLRun:
    def __init__(self, app: RLAppConfig, resolved: dict[str, Any]) -> None:
        self.app, self.resolved = app, resolved
        self.output_dir = Path(app.run.output_dir)
        self.format = get_format(app.recipe.prompt_format)
        self._sandboxes: dict[str | None, Sandbox] = {}
        self.resume_from = resume_checkpoint(app.run.resume, self.output_dir)
        self.trainer: Any = None

    def sandbox(self, python: str | None = None) -> Sandbox:
        """The pool for programs run by `python` (None: the sandbox's own), started on first use."""
        if python not in self._sandboxes:
            from eval.toolchains import sandbox_paths

            self._sandboxes[python] = self.app.sandbox.open(python=python, read_only=sandbox_paths())
        return self._sandboxes[python]

    # ------------------------------------------------------------------------------- setup
    def setup(self) -> None:
        app, recipe = self.app, self.app.recipe
        weights = [w for w in app.reward.weights().values() if w > 0]  # the order of functions()
        args = rl_arguments(app, self.output_dir, weights)  # the process group first
        if app.deepspeed_config and args.use_cpu:
            import deepspeed

            # On GPUs accelerate starts DeepSpeed's comm layer; on CPU it must exist before the model.
            deepspeed.init_distributed(dist_backend="gloo")
        state = PartialState()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.tasks: TaskSet = build_tasks(app.tasks, self.output_dir, self.sandbox(), app.sandbox.limits)
        log.info("tasks: %d kept of %d (%s dropped)", self.tasks.manifest["kept"], self.tasks.manifest["candidates"],
                 self.tasks.manifest["dropped"] or "none")  # fmt: skip
        self.tokenizer = AutoTokenizer.from_pretrained(
            recipe.model.path,
            revision=recipe.model.revision,
            trust_remote_code=recipe.model.trust_remote_code,
        )
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        dataset = self._dataset()
        if state.is_main_process:
            (self.output_dir / TASKS_MANIFEST).write_text(json.dumps(self.tasks.manifest, indent=2))
        self.rewards = VerdictRewards(
            self.tasks.tasks,
            self.format,
            self.sandbox,
            app.sandbox.limits,
            app.reward,
            app.sandbox.max_code_bytes,
        )
        funcs, _ = self.rewards.functions()
        set_seed(app.run.seed)
        attn = resolve_attn_implementation(recipe.attn_implementation, False, recipe.dtype)
        model = AutoModelForCausalLM.from_pretrained(
            recipe.model.path,
            revision=recipe.model.revision,
            trust_remote_code=recipe.model.trust_remote_code,
            dtype=torch_dtype(recipe.dtype),
            attn_implementation=attn,
        )
        trainer_cls = _trainer_class(recipe.algorithm)
        self.trainer = trainer_cls(
            model=model,
            reward_funcs=funcs,
            args=args,
            train_dataset=dataset,
            processing_class=self.tokenizer,
            peft_config=recipe.lora.peft_config() if recipe.lora else None,
        )
        self.trainer.callback_handler.callbacks.insert(0, Throughput())  # before the trackers: they see it
        if app.probe.path is not None:  # first, so the trackers see the hack_rate it adds to a step's logs
            probe = HackProbe(app.probe, self.format, self.sandbox, app.sandbox, self.tokenizer)
            self.trainer.callback_handler.callbacks.insert(0, probe)

    def _dataset(self) -> Any:
        """One row per task: its prompt in the evaluation's format, and its `task_id` for the rewards.
        A prompt longer than `recipe.max_prompt_length` tokens is dropped and counted (never cut:
        a cut prompt asks for another edit)."""
        from datasets import Dataset

        rows, too_long = [], 0
        for task_id, task in self.tasks.tasks.items():
            prompt = task_prompt(task, self.format, self.tokenizer)
            if len(self.tokenizer(prompt)["input_ids"]) > self.app.recipe.max_prompt_length:
                too_long += 1
                continue
            rows.append({"prompt": prompt, "task_id": task_id})
        manifest = self.tasks.manifest
        if too_long:
            manifest["dropped"]["prompt_too_long"] = too_long
            manifest["kept"] -= too_long
        if not rows:
            raise ConfigError(
                f"every task's prompt is longer than recipe.max_prompt_length={self.app.recipe.max_prompt_length} "
                "tokens: raise it"
            )
        return Dataset.from_list(rows)

    # ------------------------------------------------------------------------ train / save
    def train(self) -> None:
        if self.resume_from:
            log.info("resuming from %s", self.resume_from)
        self.trainer.train(resume_from_checkpoint=self.resume_from)

    def save(self) -> Path:
        final = self.output_dir / FINAL_DIR
        self.trainer.save_model(str(final))
        if self.trainer.is_world_process_zero():
            self.tokenizer.save_pretrained(str(final))
            write_trained_config(final, self.resolved)
            history = self.trainer.state.log_history
            (self.output_dir / METRICS_FILE).write_text(
                json.dumps({"log_history": history, "last": history[-1] if history else {}}, indent=2)
            )
            write_model_card(final)
        self.trainer.accelerator.wait_for_everyone()
        return final

    def push(self) -> None:
        push_final(self.app.run, self.output_dir, f"EditForge RL recipe={self.app.recipe.name}")

    def close(self) -> None:
        for sandbox in self._sandboxes.values():
            sandbox.close()
        self._sandboxes.clear()


class Throughput(TrainerCallback):
    """Adds `tokens_per_second` (prompt and completion tokens trl counted since the last log, over
    the wall time between the two logs) to each logged step."""

    def __init__(self) -> None:
        self.last: tuple[float, float] | None = None

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kwargs: Any
    ) -> None:
        if logs is None or "num_tokens" not in logs:
            return
        now = time.perf_counter()
        if self.last is not None and now > self.last[0]:
            logs["tokens_per_second"] = (logs["num_tokens"] - self.last[1]) / (now - self.last[0])
            if state.log_history:
                state.log_history[-1]["tokens_per_second"] = logs["tokens_per_second"]
        self.last = (now, logs["num_tokens"])


def _trainer_class(algorithm: str) -> Any:
    if algorithm == "rloo":
        from trl import RLOOTrainer

        return RLOOTrainer
    from trl import GRPOTrainer

    return GRPOTrainer


def rl_arguments(app: RLAppConfig, output_dir: Path, weights: list[float]) -> Any:
    """trl's `GRPOConfig` (or `RLOOConfig`) for `app`: SFT's shared arguments plus the RL ones."""
    recipe = app.recipe
    common: dict[str, Any] = dict(
        **shared_arguments(recipe, app.run, output_dir, app.deepspeed_config),
        gradient_checkpointing=recipe.gradient_checkpointing,
        num_generations=recipe.num_generations,
        max_completion_length=recipe.max_completion_length,
        temperature=recipe.temperature,
        top_p=recipe.top_p,
        beta=recipe.beta,
        epsilon=recipe.epsilon,
        num_iterations=recipe.num_iterations,
        reward_weights=weights,
        use_vllm=recipe.generation != "hf",
    )
    if recipe.generation != "hf":  # vLLM stops at the format's stop strings, as evaluation's generation does
        stop = list(get_format(recipe.prompt_format).stop)
        common.update(
            vllm_mode=recipe.generation.removeprefix("vllm_"),
            generation_kwargs={"stop": stop} if stop else None,
        )
        if recipe.generation == "vllm_server":
            common.update(vllm_server_base_url=recipe.vllm_server_url)
        else:
            common.update(vllm_gpu_memory_utilization=recipe.vllm_gpu_memory_utilization)
    if recipe.algorithm == "rloo":
        from trl import RLOOConfig

        return RLOOConfig(**common)
    from trl import GRPOConfig

    return GRPOConfig(loss_type=recipe.algorithm, **common)
