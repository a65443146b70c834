"""Merge a LoRA adapter into a 16-bit copy of its base model: an adapter folder -> a full model folder.

A QLoRA adapter was trained on a 4-bit base. Merged into those 4-bit weights, the sum would be
rounded back onto the 4-bit grid and most of the update lost; so the base is loaded again from
its checkpoint in bf16 (on CPU: about 2 bytes per parameter, 13 GB for 6.7B, 67 GB for 33B) and
the adapter is added there. Training does this itself for `recipe.lora.merge=true` with
`recipe.quantization`; alone, for an adapter saved with `merge=false` or on another machine:

    python -m train.merge runs/editcoder-33b-qlora/final --out runs/editcoder-33b-qlora/merged

The base comes from the adapter folder's `editforge_config.yaml` (`recipe.model.path`, at its
revision) unless `--base` names another copy of it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import yaml

from core.dtypes import torch_dtype
from core.layout import CONFIG_FILE
from train.model_card import write_model_card

DTYPE_CHOICES = ("bf16", "fp16", "fp32")


def merge_adapter(
    adapter: Path,
    out: Path,
    base: str,
    revision: str | None = None,
    trust_remote_code: bool = False,
    dtype: str = "bf16",
) -> Path:
    """Load `base` in `dtype`, add the adapter in `adapter`, save the merged model and the
    adapter's tokenizer (and training config, when there) to `out`."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(
        base, revision=revision, trust_remote_code=trust_remote_code, dtype=torch_dtype(dtype)
    )
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(adapter)).save_pretrained(str(out))  # the one training used
    if (adapter / CONFIG_FILE).is_file() and adapter.resolve() != out.resolve():
        shutil.copyfile(adapter / CONFIG_FILE, out / CONFIG_FILE)
    return out


def base_of(adapter: Path) -> tuple[str, str | None, bool]:
    """(path, revision, trust_remote_code) of the model `adapter` was trained on."""
    config = adapter / CONFIG_FILE
    if config.is_file():
        model = (yaml.safe_load(config.read_text()).get("recipe") or {}).get("model") or {}
        if model.get("path"):
            return model["path"], model.get("revision"), bool(model.get("trust_remote_code"))
    peft_config = adapter / "adapter_config.json"
    if peft_config.is_file():
        path = json.loads(peft_config.read_text()).get("base_model_name_or_path")
        if path:
            return path, None, False
    raise ValueError(
        f"{adapter}: no base model recorded (no {CONFIG_FILE} with recipe.model.path); pass --base"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.merge",
        description="Merge a (Q)LoRA adapter into a 16-bit copy of its base model.",
    )
    parser.add_argument("adapter", type=Path, help="the adapter folder (DIR/final or DIR/final-adapter)")
    parser.add_argument("--out", type=Path, required=True, help="where to write the merged model")
    parser.add_argument(
        "--base", help="the base model (hub id or folder); default: the one it was trained on"
    )
    parser.add_argument("--revision", help="the base model's revision (with --base)")
    parser.add_argument("--dtype", choices=DTYPE_CHOICES, default="bf16", help="the merged model's dtype")
    args = parser.parse_args(argv)
    if not (args.adapter / "adapter_config.json").is_file():
        print(
            f"error: {args.adapter} holds no adapter_config.json; pass a LoRA adapter folder", file=sys.stderr
        )
        return 2
    try:
        base, revision, trust = (args.base, args.revision, False) if args.base else base_of(args.adapter)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = merge_adapter(args.adapter, args.out, base, revision, trust, args.dtype)
    if (out / CONFIG_FILE).is_file():
        write_model_card(out)  # the card of a merged model, not of an adapter
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
