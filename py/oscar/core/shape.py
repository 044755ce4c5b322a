"""A model's attention shapes and fingerprint: what a rotation file must match."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ModelShape:
    """What a rotation file must match: architecture and attention shapes, plus the
    fingerprint (sha256 over these and the raw bytes of every layer's attention weights)."""
    arch: str
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    fingerprint: str

    def describe(self) -> str:
        return (f"{self.arch}, {self.n_layer} layers, {self.n_head} q heads / {self.n_head_kv} kv heads, "
                f"head_dim {self.head_dim}")

