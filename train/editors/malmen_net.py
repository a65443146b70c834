"""MALMEN's hyper-network and its least-squares aggregation (Tan et al. 2024, ICLR'24).

Follows the reference code (github.com/ChenmienTan/malmen, `nets.py` and `editor/malmen.py`):
one network per edited-matrix shape, shared by the modules of that shape and told apart by
per-module scale/shift embeddings; a learned step size turns the network's pseudo keys and
pseudo value gradients into value differences, and a learned ridge λ (as log λ) aggregates them.
"""

from __future__ import annotations

import torch
from torch import nn


class RunningMeanStd(nn.Module):
    """Per-feature mean and standard deviation of everything seen, merged batch by batch (Chan et
    al.), so keys and value gradients of very different scales reach the MLP standardised."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.register_buffer("n", torch.zeros(()))
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("m2", torch.zeros(size))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        count = x.shape[0]
        total = self.n + count
        batch_mean = x.mean(0)
        delta = batch_mean - self.mean
        self.m2 += ((x - batch_mean) ** 2).sum(0) + delta**2 * self.n * count / total
        self.mean += delta * count / total
        self.n.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = (self.m2 / (self.n - 1).clamp(min=1)).sqrt()
        return (x - self.mean) / (std + torch.finfo(x.dtype).eps)


class MALMENBlock(nn.Module):
    """A residual low-rank MLP layer: y + scale_m * relu(y A B + b) + shift_m for module m.

    B starts at zero, so the untrained network is the identity on its standardised input."""

    def __init__(self, size: int, rank: int, n_modules: int, generator: torch.Generator) -> None:
        super().__init__()
        self.A = nn.Parameter(torch.randn(size, rank, generator=generator))
        self.B = nn.Parameter(torch.zeros(rank, size))
        self.bias = nn.Parameter(torch.zeros(size))
        self.scale = nn.Embedding(n_modules, size)
        self.shift = nn.Embedding(n_modules, size)
        nn.init.ones_(self.scale.weight)
        nn.init.zeros_(self.shift.weight)

    def forward(self, y: torch.Tensor, module: torch.Tensor) -> torch.Tensor:
        x = (y @ self.A @ self.B + self.bias).clamp(min=0)
        return y + self.scale(module) * x + self.shift(module)


class MALMENNet(nn.Module):
    """Maps each token's key u and value gradient δ to a value difference
    d = -η_m (u · ũ) δ̃, where (ũ, δ̃) is the MLP's output: the value change that the rank-one
    shift -η_m δ̃ ũᵀ would make to u. `log_lambda` is the ridge term of each module's solve."""

    def __init__(
        self,
        key_size: int,
        value_size: int,
        rank: int,
        n_blocks: int,
        n_modules: int,
        edit_lr: float,
        seed: int,
    ) -> None:
        super().__init__()
        self.key_size, self.value_size = key_size, value_size
        generator = torch.Generator().manual_seed(seed)
        self.normalizer = RunningMeanStd(key_size + value_size)
        self.blocks = nn.ModuleList(
            MALMENBlock(key_size + value_size, rank, n_modules, generator) for _ in range(n_blocks)
        )
        self.lr = nn.Embedding(n_modules, 1)
        self.log_lambda = nn.Embedding(n_modules, 1)
        nn.init.constant_(self.lr.weight, edit_lr)
        nn.init.zeros_(self.log_lambda.weight)

    def forward(self, keys: torch.Tensor, values_grad: torch.Tensor, module: int) -> torch.Tensor:
        index = torch.tensor([module], device=keys.device)
        hidden = self.normalizer(torch.cat((keys, values_grad), -1))
        for block in self.blocks:
            hidden = block(hidden, index)
        pseudo_keys, pseudo_grads = hidden.split([self.key_size, self.value_size], -1)
        coeffs = -self.lr(index) * (keys * pseudo_keys).sum(-1, keepdim=True)
        return coeffs * pseudo_grads

    def ridge(self, module: int) -> torch.Tensor:
        return self.log_lambda.weight[module, 0].exp()


def ridge_shift(keys: torch.Tensor, value_diffs: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """The shift S (key_size × value_size) that best maps every key to its value difference:
    argmin Σ_i ‖Sᵀ u_i − d_i‖² + λ‖S‖², i.e. (UᵀU + λI)⁻¹ UᵀD = Uᵀ(UUᵀ + λI)⁻¹ D.

    The second form solves an n_tokens × n_tokens system instead of key_size × key_size (11008 in
    a 7B Llama's down-projection, against a few hundred target tokens per batch of edits); it is
    differentiable in D and λ, which is how the meta-gradient reaches the network."""
    gram = keys @ keys.T + lam * torch.eye(keys.shape[0], dtype=keys.dtype, device=keys.device)
    return keys.T @ torch.linalg.solve(gram, value_diffs)
