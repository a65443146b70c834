"""What the three stages agree on, in one small package that train, data_pipeline and eval import.

- `schema`: the edit-example columns (data_pipeline writes them, train reads them);
- `layout`: the run and model folder layout, and the typed reader of a trained model's config;
- `formats`: prompt formats, so a model is evaluated in the format it was trained in;
- `problems`, `benchmarks`: the `Problem` type and the benchmark loaders (eval and decontamination);
- `config`, `errors`, `entry`, `logs`, `hub`: config plumbing, user errors, entry points, logging.

Nothing here imports torch, transformers or trl at module level, so a tool validates its
config before it pays for the heavy stack. train, data_pipeline and eval never import each other.
"""
