"""The pods fingerprint NFD publishes in NodeResourceTopology objects (``nodeTopologyPodsFingerprint``).

A pure-Python rendering of k8stopologyawareschedwg/podfingerprint, the library both
node-feature-discovery's topology updater (which writes the attribute) and scheduler-plugins'
overreserve NRT cache (which recomputes it from the pods it knows on the node) use:

* each pod contributes one 64-bit hash: XXH64 of its name, seeded with XXH64 of its namespace;
* the hashes are sorted (so the order pods are listed in does not matter) and fed, as 8-byte
  little-endian words, to a fresh XXH64 (seed 0);
* the fingerprint is ``"pfp0" + "v001" + hex`` of that digest written big-endian, e.g.
  ``"pfp0v001b92008c14168b3a6"``.

Version ``v001`` is the only one the library has ever produced. The node name some callers pass
(``MakeStatus(nodeName)``) only labels the trace; it never enters the hash, so there is no
"with node name" variant of the value. :func:`fingerprint_trace` renders that trace.

The set is a multiset, as upstream's is: a pod listed twice contributes twice.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from enum import Enum

from toposched.errors import InputError

__all__ = [
    "FingerprintCheck",
    "PREFIX",
    "VERSION",
    "check_fingerprint",
    "fingerprint_trace",
    "is_version_compatible",
    "pod_hash",
    "pods_fingerprint",
    "xxh64",
]

PREFIX = "pfp0"
VERSION = "v001"

_PREFIX_LEN = 4
_VERSION_LEN = 4
_MIN_SUM_LEN = 8

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _MASK
    return (_rotl(acc, 31) * _P1) & _MASK


def _merge(acc: int, lane: int) -> int:
    acc ^= _round(0, lane)
    return (acc * _P1 + _P4) & _MASK


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` with ``seed`` (an unsigned 64-bit value), as the reference implementation computes it."""
    length = len(data)
    seed &= _MASK
    pos = 0
    if length >= 32:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed
        v4 = (seed - _P1) & _MASK
        stripes = length // 32
        lanes = struct.unpack_from(f"<{stripes * 4}Q", data)
        for i in range(0, stripes * 4, 4):
            v1 = _round(v1, lanes[i])
            v2 = _round(v2, lanes[i + 1])
            v3 = _round(v3, lanes[i + 2])
            v4 = _round(v4, lanes[i + 3])
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for lane in (v1, v2, v3, v4):
            acc = _merge(acc, lane)
        pos = stripes * 32
    else:
        acc = (seed + _P5) & _MASK
    acc = (acc + length) & _MASK
    while pos + 8 <= length:
        (lane,) = struct.unpack_from("<Q", data, pos)
        acc ^= _round(0, lane)
        acc = (_rotl(acc, 27) * _P1 + _P4) & _MASK
        pos += 8
    if pos + 4 <= length:
        (word,) = struct.unpack_from("<I", data, pos)
        acc ^= (word * _P1) & _MASK
        acc = (_rotl(acc, 23) * _P2 + _P3) & _MASK
        pos += 4
    while pos < length:
        acc ^= (data[pos] * _P5) & _MASK
        acc = (_rotl(acc, 11) * _P1) & _MASK
        pos += 1
    acc ^= acc >> 33
    acc = (acc * _P2) & _MASK
    acc ^= acc >> 29
    acc = (acc * _P3) & _MASK
    acc ^= acc >> 32
    return acc


@functools.lru_cache(maxsize=65536)  # a pod's hash is asked for at every report while it runs
def pod_hash(namespace: str, name: str) -> int:
    """The 64-bit value one pod contributes: XXH64(name) seeded with XXH64(namespace), both UTF-8."""
    return xxh64(name.encode(), xxh64(namespace.encode()))


def _digest(pods: Iterable[tuple[str, str]]) -> str:
    hashes = sorted(pod_hash(namespace, name) for namespace, name in pods)
    packed = struct.pack(f"<{len(hashes)}Q", *hashes)
    return f"{xxh64(packed):016x}"


def pods_fingerprint(pods: Iterable[tuple[str, str]]) -> str:
    """The fingerprint of a set of pods given as ``(namespace, name)`` pairs: the exact string NFD
    writes to ``nodeTopologyPodsFingerprint`` for the same pods, independent of their order."""
    return PREFIX + VERSION + _digest(pods)


def is_version_compatible(version: str) -> bool:
    """Whether a fingerprint version (the 4 characters after the prefix) is the one computed here.

    A version that is not exactly 4 characters long is malformed: :class:`InputError`.
    """
    if len(version) != _VERSION_LEN:
        raise InputError(f"fingerprint version {version!r} is not {_VERSION_LEN} characters long",
                         field="version")
    return version == VERSION


class FingerprintCheck(Enum):
    """The outcome of comparing a published fingerprint with a set of pods (upstream ``Check``)."""

    MATCH = "match"
    MISMATCH = "mismatch"
    MALFORMED = "malformed"
    INCOMPATIBLE_VERSION = "incompatible version"


def check_fingerprint(pods: Iterable[tuple[str, str]], expected: str) -> FingerprintCheck:
    """Compare ``expected`` (a published fingerprint) with the fingerprint of ``pods``.

    Shorter than 16 characters or without the ``pfp0`` prefix: MALFORMED; another version:
    INCOMPATIBLE_VERSION; otherwise MATCH or MISMATCH. Never raises for a bad ``expected``.
    """
    if len(expected) < _PREFIX_LEN + _VERSION_LEN + _MIN_SUM_LEN or expected[:_PREFIX_LEN] != PREFIX:
        return FingerprintCheck.MALFORMED
    if not is_version_compatible(expected[_PREFIX_LEN:_PREFIX_LEN + _VERSION_LEN]):
        return FingerprintCheck.INCOMPATIBLE_VERSION
    if _digest(pods) != expected[_PREFIX_LEN + _VERSION_LEN:]:
        return FingerprintCheck.MISMATCH
    return FingerprintCheck.MATCH


def fingerprint_trace(node_name: str, pods: Iterable[tuple[str, str]], expected: str | None = None) -> str:
    """The human-readable trace upstream's tracing fingerprint records (``Status.Repr``).

    One line naming the node, one with the pod count, one ``+ namespace/name`` per pod in the
    order given, ``= <computed>`` and, when an expected value was checked, ``V <expected>``.
    """
    pods = list(pods)
    lines = [f'> processing node "{node_name}"', f"> processing {len(pods)} pods"]
    lines += [f"+ {namespace}/{name}" for namespace, name in pods]
    lines.append(f"= {pods_fingerprint(pods)}")
    if expected:
        lines.append(f"V {expected}")
    return "\n".join(lines) + "\n"
