"""KV-cache blocks of one pod, with an automatic prefix cache (vLLM-like).

Blocks hold `block_size` tokens. A full block inside a request's shared prefix has a key
(its group and index: requests of one group share those tokens, so equal keys mean equal
content, as a hash chained along the prompt would); every other block is private. Free
blocks keep their content until reused: a freed keyed block stays findable, and allocation
takes never-used blocks first, then evicts the least recently freed. A request's blocks are
freed last block first (vLLM's order), so a prefix's head outlives its tail.

`KVBlockAllocator` is the real thing; `CountingAllocator` is the cheap stand-in a look-ahead
(the oracle policy) runs on: block counts only, prefix matches read from the real allocator,
which it never changes.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from poolsim.request import Request

_PRIVATE = -1  # LRU keys below this are runs of private blocks of one freed request


def shared_key(group: int, index: int) -> int:
    return group * 1_000_003 + index


class Holder(Protocol):
    """The per-sequence block holdings the allocators read and update."""

    request: Request
    shared_keys: list[int]
    own_blocks: int
    blocks_held: int


class BlockAllocator(Protocol):
    total: int

    def free_blocks(self) -> int: ...
    def match(self, request: Request) -> tuple[int, int]: ...
    def acquire_matched(self, seq: Holder, count: int, evictable: int) -> None: ...
    def allocate(self, seq: Holder, count: int) -> bool: ...
    def release(self, seq: Holder) -> None: ...


class KVBlockAllocator:
    def __init__(self, total: int, block_size: int) -> None:
        self.total = total
        self.block_size = block_size
        self.never_used = total
        self.in_use: dict[int, int] = {}  # shared key -> sequences referencing it
        self.lru: OrderedDict[int, int] = OrderedDict()  # freed key -> blocks (1 if shared)
        self.lru_blocks = 0
        self._next_private = _PRIVATE - 1
        self.evicted_shared = 0

    def free_blocks(self) -> int:
        return self.never_used + self.lru_blocks

    def used_fraction(self) -> float:
        return 1.0 - self.free_blocks() / self.total

    def match(self, request: Request) -> tuple[int, int]:
        """(leading shared blocks of the prompt found here, how many of them are free)."""
        group = request.prefix_group
        if group is None:
            return 0, 0
        found = free = 0
        for index in range(request.shared_blocks(self.block_size)):
            key = shared_key(group, index)
            if key in self.in_use:
                found += 1
            elif key in self.lru:
                found += 1
                free += 1
            else:
                break
        return found, free

    def acquire_matched(self, seq: Holder, count: int, evictable: int) -> None:
        group = seq.request.prefix_group
        assert group is not None or count == 0
        for index in range(count):
            key = shared_key(group or 0, index)
            if key in self.lru:
                del self.lru[key]
                self.lru_blocks -= 1
                self.in_use[key] = 1
            else:
                self.in_use[key] += 1
            seq.shared_keys.append(key)
        seq.blocks_held += count

    def allocate(self, seq: Holder, count: int) -> bool:
        """`count` new blocks for the next block indices of `seq`; False if they don't fit."""
        if count > self.free_blocks():
            return False
        self._take(count)
        shared = seq.request.shared_blocks(self.block_size)
        group = seq.request.prefix_group
        for index in range(seq.blocks_held, seq.blocks_held + count):
            key = shared_key(group, index) if group is not None and index < shared else None
            if key is not None and key not in self.in_use and key not in self.lru:
                self.in_use[key] = 1
                seq.shared_keys.append(key)
            else:  # private, or a duplicate of a block another sequence computed meanwhile
                seq.own_blocks += 1
        seq.blocks_held += count
        return True

    def _take(self, count: int) -> None:
        from_new = min(count, self.never_used)
        self.never_used -= from_new
        count -= from_new
        while count:
            key, blocks = next(iter(self.lru.items()))
            taken = min(blocks, count)
            if taken == blocks:
                del self.lru[key]
                if key >= 0:
                    self.evicted_shared += 1
            else:
                self.lru[key] = blocks - taken
            self.lru_blocks -= taken
            count -= taken

    def release(self, seq: Holder) -> None:
        if seq.own_blocks:
            self.lru[self._next_private] = seq.own_blocks
            self._next_private -= 1
            self.lru_blocks += seq.own_blocks
        for key in reversed(seq.shared_keys):
            refs = self.in_use[key] - 1
            if refs:
                self.in_use[key] = refs
            else:
                del self.in_use[key]
                self.lru[key] = 1
                self.lru_blocks += 1
        seq.shared_keys = []
        seq.own_blocks = 0
        seq.blocks_held = 0


class CountingAllocator:
    """Free-block arithmetic over a frozen view of a real allocator, for look-aheads.

    Prefix matches are read from the real allocator as it was when the look-ahead began (the
    look-ahead never changes it, so blocks it frees or evicts do not change them). Every
    block a look-ahead allocates counts as private; matched shared blocks go back to the
    free count when the last look-ahead sequence of their group lets go of them."""

    def __init__(self, real: KVBlockAllocator, group_refs: dict[int, int]) -> None:
        self.total = real.total
        self.real = real
        self.free = real.free_blocks()
        self.group_refs = group_refs

    def free_blocks(self) -> int:
        return self.free

    def match(self, request: Request) -> tuple[int, int]:
        return self.real.match(request)

    def acquire_matched(self, seq: Holder, count: int, evictable: int) -> None:
        self.free -= evictable
        seq.blocks_held += count
        if count and seq.request.prefix_group is not None:
            group = seq.request.prefix_group
            self.group_refs[group] = self.group_refs.get(group, 0) + 1

    def allocate(self, seq: Holder, count: int) -> bool:
        if count > self.free:
            return False
        self.free -= count
        seq.blocks_held += count
        seq.own_blocks += count
        return True

    def release(self, seq: Holder) -> None:
        self.free += seq.own_blocks
        shared = seq.blocks_held - seq.own_blocks
        group = seq.request.prefix_group
        if shared and group is not None:
            refs = self.group_refs.get(group, 1) - 1
            self.group_refs[group] = refs
            if refs <= 0:
                self.free += shared
        seq.own_blocks = seq.blocks_held = 0
