"""The model editors of the API-update benchmark (`core/editing.py` is their contract).

`ft_l.FTLEditor` (constrained fine-tuning of one MLP projection), `lora.LoRAEditor` (a LoRA
adapter trained on the edit examples), `grace.GRACEEditor` (a codebook adaptor around one
layer) and `prompt.PromptEditor` (the update notice in the prompt, no weights changed). The
`editor` config group (`configs/editor/*.yaml`) names them by `module:Class`; each module
imports only what it needs, so this package imports nothing heavy.
"""
