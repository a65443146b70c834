"""Generation: the backends that make weights generate (`backends.py`: hf on CPU, vllm on GPUs,
an OpenAI-compatible server, and any a package registers), and the model kinds that need none
(`reference` and `identity` make every benchmark check itself, `replay` reads scripted answers)."""

from eval.generation.base import GenerationRequest, Generator, SamplingConfig, oracle_generator

__all__ = ["GenerationRequest", "Generator", "SamplingConfig", "oracle_generator"]
