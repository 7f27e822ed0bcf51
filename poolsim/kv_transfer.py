"""The time a prompt's KV cache takes from a prefill pod to a decode pod (P/D pools).

In a disaggregated request the decode pod pulls, over the network (NIXL in llm-d and
vLLM), the KV of every prompt token its own prefix cache lacks. The time is

    setup_ms / 1e3 + kv_bytes_per_token x tokens / link_bytes_per_s    (seconds)

Transfers do not contend with each other (each gets the full link), a simplification.

Constants and where they come from:
- KV bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes per value. The
  h200 class is calibrated on traces of Qwen3-32B (poolsim.hardware), whose public model
  config has 64 layers, 8 KV heads (grouped-query attention) of dimension 128, served in
  bf16 (2 bytes): 2 x 64 x 8 x 128 x 2 = 262,144 bytes = 256 KiB per token.
- The link: **assumed** one 400 Gb/s RDMA NIC per pod, 50 GB/s, used at full rate (no
  public NIXL throughput figure for this setup was at hand).
- The setup: **assumed** 2 ms per transfer (the request's block list to the peer, the
  completion notice back), small against the transfer of any prompt past a few hundred
  tokens.
"""

from __future__ import annotations

from dataclasses import dataclass


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: int) -> int:
    """Bytes of K and V one token leaves in the cache, over every layer."""
    return 2 * layers * kv_heads * head_dim * bytes_per_value


# Qwen3-32B (the model the h200 class is calibrated on): 64 layers, 8 KV heads, dim 128, bf16
QWEN3_32B_KV_BYTES_PER_TOKEN = kv_bytes_per_token(64, 8, 128, 2)
LINK_BYTES_PER_S = 400e9 / 8  # assumed: one 400 Gb/s NIC
SETUP_MS = 2.0  # assumed


@dataclass(frozen=True, slots=True)
class KvTransfer:
    """The transfer model of one P/D pool."""

    bytes_per_token: int = QWEN3_32B_KV_BYTES_PER_TOKEN
    link_bytes_per_s: float = LINK_BYTES_PER_S
    setup_ms: float = SETUP_MS

    def seconds(self, tokens: int) -> float:
        """Seconds to move the KV of `tokens` prompt tokens (the setup even for none)."""
        return self.setup_ms / 1000.0 + self.bytes_per_token * tokens / self.link_bytes_per_s
