"""Ordinary evaluation runs of several models side by side (`python -m eval.tables compare RUN...`)."""
