"""The vision encoder of a multimodal pod: its cost per image, and its cache of encoded images.

Before a request's prompt can be prefilled, each of its images has to go through the
vision encoder, unless the pod's encoder cache already holds that image's embeddings (as
vLLM's EncoderCacheManager shares them across requests by the image's hash). The pod
(poolsim.pod) does it at every admission of the request: the images the cache lacks are
encoded in the step that schedules the request's first prompt chunk, which takes that much
longer, for every sequence in the batch (vLLM v1 runs the encoder in the same model step,
before the forward pass); the encoded images enter the cache, the ones found are touched.

Encoder time per image, linear in its vision tokens (documented choice):

    encode_ms = (ENCODER_SETUP_MS + ENCODER_MS_PER_TOKEN * tokens) * ms_per_token / 0.13

The h200 figures are from the one public measurement at hand (vLLM issue #41267: vLLM
0.19.1, Qwen2.5-VL-7B on one H100 80GB, a 1080p image, 2,718 prompt tokens of which
69 x 39 = 2,691 vision tokens): 167 ms of encoder time against 126 ms of prefill.
Qwen2.5-VL's models share one ~670M-parameter ViT, so the figure stands for the vision
tower of a 32B-class model too, and an H200 has the H100's dense BF16 FLOPs, so it is taken
as the h200 figure. The split into a setup and a per-token part is ours (assumed: 5 ms of
setup per image, the rest, 0.0602 ms per vision token, proportional). The 167 ms is a
residual (end-to-end minus the other spans), so it includes the image preprocessing, which
a repeated image also skips (vLLM's processor cache); we count it all as encoder time.
Linear, not quadratic: that ViT uses windowed attention in all but 4 of its 32 layers.
Other classes scale it by their compute speed (`ms_per_token` relative to h200's 0.13: a
b200 encodes 2.25x faster, an a100 pod 1.585x slower; a `--slowdown` slows it alike).

The cache is an LRU of image ids holding at most ENCODER_CACHE_TOKENS vision tokens per
pod: an assumption. vLLM sizes its encoder cache in encoder tokens too, but by default only
about one step's budget (max_num_batched_tokens, or the largest item); 200,000 tokens
stands for an operator who gave it room for cross-request reuse (~2 GB of bf16 embeddings
5,120 wide, a 32B-class model's hidden size). It is separate from the KV blocks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from poolsim.hardware import H200, Hardware
from poolsim.request import Request

ENCODER_SETUP_MS = 5.0  # per image, on h200 (assumed)
ENCODER_MS_PER_TOKEN = 0.0602  # per vision token, on h200: (167 - 5) / 2,691 (vLLM #41267)
ENCODER_CACHE_TOKENS = 200_000  # vision tokens an encoder cache holds per pod (assumed)


def encode_ms(hw: Hardware, image_tokens: Sequence[int]) -> float:
    """Encoder time (ms) on `hw` for images of these sizes (vision tokens each)."""
    if not image_tokens:
        return 0.0
    per_image = sum(ENCODER_SETUP_MS + ENCODER_MS_PER_TOKEN * tokens for tokens in image_tokens)
    return per_image * hw.ms_per_token / H200.ms_per_token


class EncoderCache:
    """Encoded images of one pod, least recently used first, within a capacity in vision
    tokens. An image larger than the whole cache is encoded but never kept."""

    def __init__(self, capacity_tokens: int = ENCODER_CACHE_TOKENS) -> None:
        self.capacity = capacity_tokens
        self.entries: OrderedDict[int, int] = OrderedDict()  # image id -> vision tokens
        self.used = 0

    def matched_tokens(self, request: Request) -> int:
        """Vision tokens of the request's images held here (llm-d's encoder_matched_size);
        a look only: the cache's order does not change."""
        entries = self.entries
        return sum(
            tokens
            for image, tokens in zip(request.image_ids, request.image_tokens, strict=True)
            if image in entries
        )

    def missing(self, request: Request) -> list[int]:
        """The sizes of the request's images not held here (those an admission now would
        encode); a look only, as matched_tokens."""
        entries = self.entries
        return [
            tokens
            for image, tokens in zip(request.image_ids, request.image_tokens, strict=True)
            if image not in entries
        ]

    def admit(self, request: Request) -> list[int]:
        """The request is admitted: its cached images are touched, the others are to be
        encoded now and enter the cache. Returns the sizes of those to encode."""
        misses: list[int] = []
        entries = self.entries
        for image, tokens in zip(request.image_ids, request.image_tokens, strict=True):
            if image in entries:
                entries.move_to_end(image)
            else:
                misses.append(tokens)
                self._insert(image, tokens)
        return misses

    def _insert(self, image: int, tokens: int) -> None:
        if tokens > self.capacity:
            return
        while self.used + tokens > self.capacity:
            _, evicted = self.entries.popitem(last=False)
            self.used -= evicted
        self.entries[image] = tokens
        self.used += tokens

    def copy(self) -> EncoderCache:
        """An independent copy (a look-ahead admits into it without touching this one)."""
        clone = EncoderCache(self.capacity)
        clone.entries = self.entries.copy()
        clone.used = self.used
        return clone
