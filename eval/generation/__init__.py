"""Generation backends: vLLM (GPU), transformers (CPU fallback), OpenAI-compatible HTTP,
and the oracle models `reference` and `identity` that make every benchmark check itself."""

from eval.generation.base import GenerationRequest, Generator, SamplingConfig, make_generator

__all__ = ["GenerationRequest", "Generator", "SamplingConfig", "make_generator"]
