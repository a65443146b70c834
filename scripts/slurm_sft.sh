#!/usr/bin/env bash
# Multi-node EditCoder fine-tuning under Slurm: one torchrun per node, c10d rendezvous.
#   sbatch --nodes 4 scripts/slurm_sft.sh recipe=editcoder-33b run.output_dir=runs/ec33
#SBATCH --job-name=editforge-sft
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --exclusive
#SBATCH --output=%x-%j.out
set -euo pipefail

head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export OMP_NUM_THREADS=8
# Keep the effective batch at the paper's 32 rows: 1 row x (8 x nodes) GPUs x grad_accum.
grad_accum=$(( 32 / (8 * SLURM_NNODES) ))
grad_accum=$(( grad_accum > 0 ? grad_accum : 1 ))

srun torchrun \
    --nnodes "$SLURM_NNODES" \
    --nproc_per_node 8 \
    --rdzv_id "$SLURM_JOB_ID" \
    --rdzv_backend c10d \
    --rdzv_endpoint "$head_node:29500" \
    train/sft.py recipe.grad_accum="$grad_accum" "$@"
