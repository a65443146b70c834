"""Training: Hydra recipes, edit-example data, clean packed completion-only SFT through trl."""
