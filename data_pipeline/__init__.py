"""Data pipeline: commit sources, EditPackFT/Commits2023FT filters, MinHash dedup, decontamination."""
