"""``CPUSet``: an immutable set of logical CPU ids with the kernel's list syntax.

The kernel writes CPU lists as comma-separated ranges ("0-3,8-11"), the empty set as "". The
set is stored as a Python int bitmask, which makes union/intersection/difference single
machine operations even for machines with hundreds of CPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from toposched.errors import InputError

__all__ = ["CPUSet"]

# Far above any real machine (the kernel's NR_CPUS tops out at 8192); guards "0-999999".
MAX_CPU_ID = 1 << 16


class CPUSet:
    """An immutable, hashable set of non-negative CPU ids, iterated in ascending order."""

    __slots__ = ("_mask",)

    def __init__(self, cpus: Iterable[int] = ()):
        mask = 0
        for cpu in cpus:
            cpu = int(cpu)
            if cpu < 0 or cpu >= MAX_CPU_ID:
                raise InputError(f"CPU id {cpu} is out of range 0..{MAX_CPU_ID - 1}", field="cpuset")
            mask |= 1 << cpu
        self._mask = mask

    @classmethod
    def from_mask(cls, mask: int) -> CPUSet:
        """Build a set from a bitmask (bit i set means CPU i is in the set)."""
        if mask < 0:
            raise InputError("a CPU bitmask cannot be negative", field="cpuset")
        out = cls.__new__(cls)
        out._mask = mask
        return out

    @classmethod
    def parse(cls, text: str) -> CPUSet:
        """Parse the kernel's list syntax: "0-3,8-11", "5", "" (empty), "0-15:2/4" (strided).

        Surrounding white space and a trailing newline are ignored. Errors quote the text.
        """
        raw = text
        text = text.strip()
        mask = 0
        if not text:
            return cls.from_mask(0)
        for part in text.split(","):
            part = part.strip()
            try:
                mask |= _parse_range(part)
            except ValueError as exc:
                raise InputError(f"invalid CPU list {raw!r}: {exc}", field="cpuset") from None
        return cls.from_mask(mask)

    @property
    def mask(self) -> int:
        """The set as a bitmask."""
        return self._mask

    def __iter__(self) -> Iterator[int]:
        mask = self._mask
        while mask:
            low = mask & -mask
            yield low.bit_length() - 1
            mask ^= low

    def __len__(self) -> int:
        return self._mask.bit_count()

    def __bool__(self) -> bool:
        return self._mask != 0

    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and cpu >= 0 and bool(self._mask >> cpu & 1)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CPUSet):
            return self._mask == other._mask
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("CPUSet", self._mask))

    def __or__(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask | other._mask)

    def __and__(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask & other._mask)

    def __sub__(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask & ~other._mask)

    def __xor__(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask ^ other._mask)

    def __le__(self, other: CPUSet) -> bool:
        return self._mask & ~other._mask == 0

    def __ge__(self, other: CPUSet) -> bool:
        return other <= self

    def __lt__(self, other: CPUSet) -> bool:
        return self <= other and self != other

    def __gt__(self, other: CPUSet) -> bool:
        return other < self

    union = __or__
    intersection = __and__
    difference = __sub__
    issubset = __le__
    issuperset = __ge__

    def isdisjoint(self, other: CPUSet) -> bool:
        """True when no CPU is in both sets."""
        return self._mask & other._mask == 0

    def sorted(self) -> list[int]:
        """The CPU ids in ascending order."""
        return list(self)

    def first(self, n: int) -> CPUSet:
        """The ``n`` lowest CPU ids of the set (all of them if it has fewer)."""
        out = 0
        mask = self._mask
        while mask and n > 0:
            low = mask & -mask
            out |= low
            mask ^= low
            n -= 1
        return CPUSet.from_mask(out)

    def __str__(self) -> str:
        ranges: list[str] = []
        ids = list(self)
        i = 0
        while i < len(ids):
            j = i
            while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
                j += 1
            ranges.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
            i = j + 1
        return ",".join(ranges)

    def __repr__(self) -> str:
        return f"CPUSet({str(self)!r})"


def _parse_int(token: str) -> int:
    if not token.isdigit():
        raise ValueError(f"{token!r} is not a CPU number")
    value = int(token)
    if value >= MAX_CPU_ID:
        raise ValueError(f"CPU {value} is out of range 0..{MAX_CPU_ID - 1}")
    return value


def _parse_range(part: str) -> int:
    if not part:
        raise ValueError("empty element")
    stride_used = stride_group = None
    if ":" in part:
        part, _, stride = part.partition(":")
        used, slash, group = stride.partition("/")
        if not slash:
            raise ValueError(f"stride {stride!r} must be USED/GROUP")
        stride_used, stride_group = _parse_int(used), _parse_int(group)
        if stride_used == 0 or stride_group == 0 or stride_used > stride_group:
            raise ValueError(f"stride {stride!r} is invalid")
    if "-" in part:
        lo_s, _, hi_s = part.partition("-")
        lo, hi = _parse_int(lo_s), _parse_int(hi_s)
        if lo > hi:
            raise ValueError(f"range {part!r} ends before it starts")
    else:
        lo = hi = _parse_int(part)
    if stride_used is None:
        return ((1 << (hi - lo + 1)) - 1) << lo
    mask = 0
    for cpu in range(lo, hi + 1):
        if (cpu - lo) % stride_group < stride_used:
            mask |= 1 << cpu
    return mask
