"""Near-duplicate detection: the one engine behind the build's dedup, decontamination and the audit.

The build's dedup, its decontamination against the benchmarks and the benchmark audit's
independence check all decide what counts as a near-duplicate; they share this code so they
can never disagree on the same texts under the same `core.minhash_config.MinHashConfig`.

- `minhash`: signatures and shingle sets, numba kernels (bit for bit datasketch's MinHash).
- `lsh`: band keys, buckets, signature estimates and exact Jaccard checks, numba kernels.
- `clusters`: the union-find (lowest index as root) and the natural id order of keepers.
- `dedup`: `find_duplicates`, the clusters of a corpus in memory (the build's sharded job,
  `data_pipeline/minhash_job.py`, runs the same kernels from disk).
- `pairs`: every near-duplicate pair within one set of texts, or between a batch and a
  fixed set of references.
- `instructions`: the normal form in which two instructions are compared.

Importing the package loads none of its modules, so `instructions` stays free of numba.
"""
