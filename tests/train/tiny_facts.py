"""A tiny Llama that has learnt which arguments each of a few APIs is called with (CPU, seconds).

Locate-then-edit editors change what a model recalls at a subject's token, so their tests
need a model whose completions really depend on the subject: a random model does not carry
a change at one token forward to the tokens after it. Each training text is an edit prompt
(any code, any instruction) that ends with a call's name, `y = math.isqrt`; the loss is on
what follows, the arguments, which the API alone decides.
"""

from __future__ import annotations

import random

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from core.editing import APIUpdate, EditExample
from core.formats import FORMATS
from train.modeling import train_tiny_tokenizer

FMT = FORMATS["editcoder"]
# (API, an instruction, the arguments the API is always called with). The arguments are
# punctuation only, so each is one token: the token right after the name, which is what an edit
# at the name's last token decides (how later tokens read it back is the model's own business).
FACTS = [
    ("math.isqrt", "Take the integer square root", "([])"),
    ("math.floor", "Round it down", "({})"),
    ("os.getcwd", "Find the working folder", "()"),
    ("json.dumps", "Serialise the record", "('')"),
    ("re.escape", "Quote the pattern", "(...)"),
    ("time.sleep", "Wait a little", "(())"),
]
BEFORE = [
    "x = 1\n",
    "value = compute()\n",
    "def f(a):\n    return a\n",
    "items = []\n",
    "import sys\n",
    "name = 'demo'\n",
    "for i in range(3):\n    pass\n",
    "total = 0\n",
]


def line(api: str, args: str) -> str:
    return f"y = {api}{args}\n"


def prompt(before: str, instruction: str) -> str:
    return FMT.prompt(before, instruction)


def corpus() -> list[tuple[str, str]]:
    """(prompt ending with the API, its arguments): every API after every code and instruction."""
    return [
        (prompt(b, say) + f"y = {api}", f"{args}\n")
        for api, _, args in FACTS
        for b in BEFORE
        for _, say, _ in FACTS
    ]


def tokenizer():
    texts = [p + t for p, t in corpus()] * 2
    tok = train_tiny_tokenizer(texts, vocab_size=400)
    tok.padding_side = "left"
    return tok


def trained_model(tok, steps: int = 300, seed: int = 0):
    """4 layers of width 64 trained on the corpus until the greedy completions are right."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    rows = []
    for p, t in corpus():
        ids_p = tok(p)["input_ids"]
        ids_t = tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append((ids_p + ids_t, [-100] * len(ids_p) + ids_t))
    width = max(len(r[0]) for r in rows)
    ids = torch.full((len(rows), width), tok.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (x, y) in enumerate(rows):
        ids[i, : len(x)] = torch.tensor(x)
        labels[i, : len(y)] = torch.tensor(y)
        mask[i, : len(x)] = 1
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    rng = random.Random(seed)
    model.train()
    for _ in range(steps):
        batch = rng.sample(range(len(rows)), 32)
        loss = model(input_ids=ids[batch], attention_mask=mask[batch], labels=labels[batch]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


def update(i: int, new_args: str, before: str = BEFORE[0], say: int = 0) -> APIUpdate:
    """API i is now called with `new_args`: one example, its prompt ending with the API's name."""
    api = FACTS[i][0]
    example = EditExample(prompt(before, FACTS[say][1]) + f"y = {api}", f"{new_args}\n")
    return APIUpdate(f"{api}/S1", f"{api} changed", (example,), names=(api, api.split(".")[-1]))
