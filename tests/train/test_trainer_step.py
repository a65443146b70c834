"""The trainer's micro-step on the packed varlen path: trl's loss, no host read of its own outside
logging steps, the collator's document boundaries (computed once per batch) reaching every layer with
no mask, and the speed levers wired into the trainer the run builds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import app_config
from torch.profiler import ProfilerActivity, profile
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from trl import SFTTrainer

from train.attention import PACKED_VARLEN
from train.modeling import compile_decoder_layers
from train.sft_run import LIGER_KERNELS, SFTRun, training_arguments

pytestmark = pytest.mark.slow
SPY = "packed_varlen_spy"


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matrices: one thread is as fast, and does not spin against other jobs on the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _run(out: Path, *overrides: str) -> SFTRun:
    app, resolved = app_config(
        [
            "recipe=tiny",
            "recipe.attn_implementation=varlen",
            "recipe.per_device_batch_size=2",
            "recipe.grad_accum=2",
            "data.datasets=[{synthetic: 160}]",
            "data.val_size=0",
            "run.report_to=none",
            f"run.output_dir={out}",
            *overrides,
        ]
    )
    run = SFTRun(app, resolved)
    run.setup()
    return run


def _micro_batch(run: SFTRun) -> tuple[dict, torch.Tensor]:
    """Two packed rows through the trainer's own collator, and their target count."""
    trainer = run.trainer
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    return batch, (batch["labels"][:, 1:] != -100).sum()


def _host_reads(fn) -> int:
    """Reads of a tensor's value on the host (`.item()`, `bool(tensor)`) while `fn` runs."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(e.name == "aten::_local_scalar_dense" for e in prof.events())


def test_the_loss_is_trls_and_its_metrics_are_read_once_per_log(tmp_path):
    run = _run(tmp_path / "r")
    trainer, model = run.trainer, run.trainer.model
    batch, targets = _micro_batch(run)
    trls = SFTTrainer.compute_loss(trainer, model, dict(batch), num_items_in_batch=targets)
    trl_metrics = {k: list(v) for k, v in trainer._metrics["train"].items()}
    trl_tokens = trainer._total_train_tokens
    ours = trainer.compute_loss(model, dict(batch), num_items_in_batch=targets)
    torch.testing.assert_close(ours, trls)
    trainer._flush_metrics()  # what the next log reports: trl's own figures for this batch
    metrics = trainer._metrics["train"]
    for key in ("entropy", "mean_token_accuracy"):
        assert metrics[key] == pytest.approx(trl_metrics[key], rel=1e-5)
    assert trainer._total_train_tokens - trl_tokens == trl_tokens == batch["input_ids"].numel()


def test_a_micro_step_reads_nothing_back_beyond_what_the_model_itself_does(tmp_path):
    run = _run(tmp_path / "r")
    trainer, model = run.trainer, run.trainer.model
    batch, targets = _micro_batch(run)

    def bare():  # the forward and backward alone, as the model computes them
        model(**batch, use_cache=False, fused_lm_head=True).log_probs.sum().backward()

    def trl_step():
        SFTTrainer.compute_loss(trainer, model, dict(batch), num_items_in_batch=targets).backward()

    model_reads = _host_reads(bare)
    assert _host_reads(lambda: trainer.training_step(model, dict(batch), targets)) == model_reads
    assert _host_reads(trl_step) > model_reads  # trl reads its metrics back on every micro-step


def test_every_layer_gets_the_collators_boundaries_and_no_mask(tmp_path):
    """A spy registered beside the kernel (same registries, the kernel itself called inside) sees
    what each layer receives, through the trainer's own loop."""
    run = _run(tmp_path / "r", "run.max_steps=2")
    trainer, model = run.trainer, run.trainer.model
    seen: list[tuple] = []
    kernel = ALL_ATTENTION_FUNCTIONS[PACKED_VARLEN]

    def spy(module, query, key, value, attention_mask, **kwargs):
        seen.append((attention_mask, kwargs.get("cu_seq_lens_q"), kwargs.get("max_length_q")))
        return kernel(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(SPY, spy)
    AttentionMaskInterface.register(SPY, ALL_MASK_ATTENTION_FUNCTIONS[PACKED_VARLEN])
    model.set_attn_implementation(SPY)
    layers = model.config.num_hidden_layers

    batch, targets = _micro_batch(run)
    trainer.training_step(model, dict(batch), targets)
    assert len(seen) == layers and all(mask is None for mask, _, _ in seen)
    assert all(cu is batch["cu_seq_lens_q"] for _, cu, _ in seen)  # the collator's, not recomputed
    assert all(longest == batch["max_length_q"] for _, _, longest in seen)

    seen.clear()
    trainer.train()  # 2 optimizer steps x 2 micro-batches, each of 2 packed rows
    rows = {tuple(lengths) for lengths in trainer.train_dataset["seq_lengths"]}
    forwards = [seen[i : i + layers] for i in range(0, len(seen), layers)]
    assert len(forwards) == 4 and all(mask is None for mask, _, _ in seen)
    for calls in forwards:
        cu = calls[0][1]
        assert all(c is cu for _, c, _ in calls)  # one boundaries tensor per batch, shared by every layer
        lengths = tuple((cu[1:] - cu[:-1]).tolist())
        assert any(lengths[:k] in rows and lengths[k:] in rows for k in range(1, len(lengths)))


def test_checkpointing_of_every_nth_layer_reaches_the_model(tmp_path):
    run = _run(
        tmp_path / "r",
        "recipe.model.tiny.num_hidden_layers=4",
        "recipe.gradient_checkpointing=true",
        "recipe.gradient_checkpointing_every=2",
        "run.max_steps=1",
    )
    run.train()  # transformers switches checkpointing (and Liger) on when training starts
    layers = run.trainer.model.model.layers
    assert [layer.gradient_checkpointing for layer in layers] == [True, False, True, False]


def test_compiled_layers_are_the_models_own(tmp_path):
    layers = _run(tmp_path / "r", "recipe.compile_layers=true").trainer.model.model.layers
    assert all(layer._compiled_call_impl is not None for layer in layers)  # compiled at their first call


def test_liger_kernels_reach_the_training_arguments_with_the_loss_left_to_trl(tmp_path):
    app, _ = app_config(["recipe=tiny", "recipe.liger_kernels=true", f"run.output_dir={tmp_path}"])
    args = training_arguments(app, tmp_path)
    assert args.use_liger_kernel and args.liger_kernel_config == LIGER_KERNELS
    assert {k for k, on in LIGER_KERNELS.items() if on} == {"rms_norm", "rope", "swiglu"}
    off, _ = app_config(["recipe=tiny", f"run.output_dir={tmp_path}"])
    assert not training_arguments(off, tmp_path).use_liger_kernel


def test_compiled_layers_compute_what_eager_layers_do(tmp_path):
    run = _run(tmp_path / "r")
    model = run.trainer.model
    batch, targets = _micro_batch(run)

    def loss_and_grads():
        model.zero_grad()
        loss = model(**batch, use_cache=False, fused_lm_head=True).log_probs.sum()
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    eager_loss, eager_grads = loss_and_grads()
    assert compile_decoder_layers(model, backend="eager") == model.config.num_hidden_layers
    compiled_loss, compiled_grads = loss_and_grads()
    torch.testing.assert_close(compiled_loss, eager_loss)
    for name, grad in eager_grads.items():
        torch.testing.assert_close(compiled_grads[name], grad, msg=name)
