"""The kubelet's CPU manager checkpoint, ``/var/lib/kubelet/cpu_manager_state``, read and written exactly.

The kubelet (upstream ``pkg/kubelet/cm/cpumanager/state``) stores its static-policy state as
compact JSON::

    {"policyName":"static","defaultCpuSet":"0-1,6-11","entries":{"<pod uid>":{"<container>":"2-5"}},"checksum":1234}

``entries`` is left out when no container holds exclusive CPUs. ``checksum`` is upstream's
``checkpointmanager/checksum``: the 32-bit FNV-1a hash of the checkpoint struct printed by
go-spew with ``%#v`` (sorted map keys, methods disabled) while its checksum field is 0. This
module rebuilds that text byte for byte for every layout whose struct is known, and reproduces
upstream's own test vectors (see the tests):

* ``v2`` (kubelet 1.18 onwards): struct ``CPUManagerCheckpoint`` with ``Entries``;
* ``v3``: kubelets that know pod-level CPU sets verify the same fields through struct
  ``CPUManagerCheckpointV3``, which adds ``PodEntries``; reproduced for files without pod-level
  entries (the printed form of a non-empty ``podEntries`` is not known here, so such files are
  read unverified);
* ``v4``: the newest kubelets put the state, as a JSON string, in ``data`` and its checksum
  (FNV-1a of the string printed as ``(string)<data>``) in ``dataChecksum``; ``data`` is then
  the source of truth and the outer fields are ignored, as upstream;
* ``v1``: entries keyed by container id; a v1 file without entries is accepted with the v1
  checksum, as kubelets up to 1.3x accept it; v1 entries cannot be mapped to pods and are
  refused, as current kubelets refuse them.

A checksum of 0 in a v1-v3 file is accepted unverified, as upstream accepts it. Go's JSON
decoder matches keys case-insensitively (``defaultCPUSet`` reads as ``defaultCpuSet``); so does
this one.

A malformed file raises one :class:`InputError` naming the file and the field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError
from toposched.topology import CPUSet

__all__ = [
    "CPUManagerCheckpoint",
    "DEFAULT_CPU_MANAGER_STATE_PATH",
    "checkpoint_checksum",
    "data_checksum",
    "dumps_checkpoint",
    "loads_checkpoint",
    "read_checkpoint",
    "write_checkpoint",
]

DEFAULT_CPU_MANAGER_STATE_PATH = "/var/lib/kubelet/cpu_manager_state"

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193
_UINT64_MAX = 2**64 - 1
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _fnv32a(data: bytes) -> int:
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def _spew_map(entries: Mapping[str, Any] | None, value: Any) -> str:
    # go-spew prints a nil map as <nil> and a map as map[k:v k:v] with keys sorted.
    if entries is None:
        return "<nil>"
    return "map[" + " ".join(f"{k}:{value(entries[k])}" for k in sorted(entries)) + "]"


def checkpoint_checksum(
    policy_name: str,
    default_cpuset: str,
    entries: Mapping[str, Mapping[str, str]] | Mapping[str, str] | None,
    *,
    version: int = 2,
    pod_entries: Mapping[str, str] | None = _EMPTY,
) -> int:
    """Upstream's checksum of a CPU manager checkpoint (checksum field 0 while hashing).

    ``entries`` holds the strings as stored (``{pod: {container: cpuset}}``, or
    ``{container_id: cpuset}`` for ``version=1``); ``None`` is Go's nil map (a JSON ``null``).
    ``version=3`` is the struct with ``PodEntries``, known only while ``pod_entries`` is empty.
    """
    if version == 1:
        entries_type = "map[string]string"
        text = _spew_map(entries, str)
    elif version in (2, 3):
        entries_type = "map[string]map[string]string"
        text = _spew_map(entries, lambda containers: _spew_map(containers, str))
    else:
        raise InputError(f"unknown checkpoint version {version!r}", field="version")
    type_name = "CPUManagerCheckpointV3" if version == 3 else "CPUManagerCheckpoint"
    pods = ""
    if version == 3:
        if pod_entries:
            raise InputError("the checksum layout of non-empty pod entries is not known", field="podEntries")
        pods = f" PodEntries:(state.PodCPUAssignments){_spew_map(pod_entries, str)}"
    printed = (
        f"(*state.{type_name}){{PolicyName:(string){policy_name} DefaultCPUSet:(string){default_cpuset}"
        f" Entries:({entries_type}){text}{pods} Checksum:(checksum.Checksum)0}}"
    )
    return _fnv32a(printed.encode("utf-8"))


def data_checksum(data: str) -> int:
    """Upstream's ``dataChecksum`` of the ``data`` section of a v4 checkpoint."""
    return _fnv32a(("(string)" + data).encode("utf-8"))


def _freeze_entries(entries: Mapping[str, Mapping[str, CPUSet]]) -> Mapping[str, Mapping[str, CPUSet]]:
    return MappingProxyType({pod: MappingProxyType(dict(containers)) for pod, containers in entries.items()})


@dataclass(frozen=True, slots=True)
class CPUManagerCheckpoint:
    """The content of ``cpu_manager_state``.

    ``entries`` maps pod UID to container name to its exclusive CPUs; ``pod_entries`` the
    pod-level CPU sets newer kubelets record (``podEntries``); ``checksum`` is the value read
    from a file (``None`` for a checkpoint built in memory; :func:`dumps_checkpoint` computes it).
    """

    policy_name: str
    default_cpuset: CPUSet
    entries: Mapping[str, Mapping[str, CPUSet]] = field(default_factory=lambda: _EMPTY)
    pod_entries: Mapping[str, CPUSet] = field(default_factory=lambda: _EMPTY)
    checksum: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.policy_name, str):
            raise InputError(f"policy name {self.policy_name!r} is not a string", field="policyName")
        if not isinstance(self.default_cpuset, CPUSet):
            raise InputError("the default cpuset must be a CPUSet", field="defaultCpuSet")
        for pod, containers in self.entries.items():
            for name, cpus in containers.items():
                if not isinstance(cpus, CPUSet):
                    raise InputError("an entry must be a CPUSet", field=f"entries.{pod}.{name}")
        object.__setattr__(self, "entries", _freeze_entries(self.entries))
        object.__setattr__(self, "pod_entries", MappingProxyType(dict(self.pod_entries)))

    def computed_checksum(self, layout: str = "v2") -> int:
        """The checksum a kubelet writing ``layout`` (``"v2"`` or ``"v3"``) stores for this content."""
        version = _LAYOUTS.get(layout)
        if version is None:
            raise InputError(f"unknown layout {layout!r} (expected v2 or v3)", field="layout")
        pods = {pod: str(cpus) for pod, cpus in self.pod_entries.items()}
        return checkpoint_checksum(self.policy_name, str(self.default_cpuset), _entry_strings(self.entries),
                                   version=version, pod_entries=pods)


_LAYOUTS = {"v2": 2, "v3": 3}


def _entry_strings(entries: Mapping[str, Mapping[str, CPUSet]]) -> dict[str, dict[str, str]]:
    return {pod: {name: str(cpus) for name, cpus in containers.items()} for pod, containers in entries.items()}


def _go_json(value: Any) -> str:
    # encoding/json: compact, map keys sorted, HTML-sensitive characters escaped.
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def dumps_checkpoint(checkpoint: CPUManagerCheckpoint, *, layout: str = "v2") -> str:
    """The exact text a kubelet writes for ``checkpoint``.

    ``layout="v2"`` (the default) is what kubelets 1.18 to 1.34 write and read; ``"v3"`` carries
    the checksum kubelets that know pod-level CPU sets verify. Pod-level entries cannot be
    written (their checksum layout is not known).
    """
    if checkpoint.pod_entries:
        raise InputError("pod-level entries cannot be written: their checksum layout is not known",
                         field="podEntries")
    checksum = checkpoint.computed_checksum(layout)
    entries = _entry_strings(checkpoint.entries)
    parts = [f'"policyName":{_go_json(checkpoint.policy_name)}',
             f'"defaultCpuSet":{_go_json(str(checkpoint.default_cpuset))}']
    if entries:
        parts.append(f'"entries":{_go_json(entries)}')
    parts.append(f'"checksum":{checksum}')
    return "{" + ",".join(parts) + "}"


def write_checkpoint(path: str | os.PathLike[str], checkpoint: CPUManagerCheckpoint, *, layout: str = "v2") -> None:
    """Write ``checkpoint`` to ``path`` as the kubelet does (atomically: a temporary file, then rename)."""
    target = Path(path)
    text = dumps_checkpoint(checkpoint, layout=layout)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


# ---- reading ----------------------------------------------------------------------------------


def _get(obj: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    # Go's decoder: an exact key wins, otherwise the last case-insensitive match.
    if name in obj:
        return True, obj[name]
    found, value = False, None
    for key, item in obj.items():
        if key.lower() == name.lower():
            found, value = True, item
    return found, value


def _string(obj: Mapping[str, Any], name: str) -> str:
    present, value = _get(obj, name)
    if not present or value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", field=name)
    return value


def _cpuset(text: str, where: str) -> CPUSet:
    try:
        return CPUSet.parse(text)
    except InputError as err:
        raise InputError(err.message, field=where) from None


def _entries(value: Any) -> tuple[dict[str, dict[str, str]] | None, int]:
    """The raw entries and the checkpoint version their shape says (1 or 2)."""
    if value is None:
        return None, 2
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping of pods, got {type(value).__name__}", field="entries")
    if value and all(isinstance(v, str) for v in value.values()):
        return {"": dict(value)}, 1
    out: dict[str, dict[str, str]] = {}
    for pod, containers in value.items():
        if not isinstance(containers, Mapping):
            raise InputError(f"expected a mapping of containers, got {type(containers).__name__}",
                             field=f"entries.{pod}")
        for name, cpus in containers.items():
            if not isinstance(cpus, str):
                raise InputError(f"expected a cpuset string, got {type(cpus).__name__}", field=f"entries.{pod}.{name}")
        out[pod] = dict(containers)
    return out, 2


def _pod_entries(value: Any) -> dict[str, CPUSet]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping of pods, got {type(value).__name__}", field="podEntries")
    out = {}
    for pod, entry in value.items():
        if not isinstance(entry, Mapping):
            raise InputError(f"expected a mapping, got {type(entry).__name__}", field=f"podEntries.{pod}")
        out[pod] = _cpuset(_string(entry, "cpuSet"), f"podEntries.{pod}.cpuSet")
    return out


def _uint64(obj: Mapping[str, Any], name: str) -> int:
    present, value = _get(obj, name)
    if not present or value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _UINT64_MAX:
        raise InputError(f"{value!r} is not an unsigned 64-bit integer", field=name)
    return value


def _json_object(text: str, what: str) -> Mapping[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})", field=what) from None
    if not isinstance(obj, Mapping):
        raise InputError(f"expected a JSON object, got {type(obj).__name__}", field=what)
    return obj


def loads_checkpoint(
    text: str,
    *,
    source: str | None = None,
    verify: bool = True,
    expect_policy: str | None = None,
) -> CPUManagerCheckpoint:
    """Parse the text of a ``cpu_manager_state`` file.

    ``verify`` checks the checksum as the kubelet does (a mismatch raises :class:`InputError`
    on field ``checksum`` or ``dataChecksum``; files with pod-level entries outside ``data`` are
    read unverified, see the module notes). ``expect_policy`` refuses a checkpoint written by another CPU manager
    policy with upstream's message. ``source`` names the file in errors.
    """
    try:
        outer = _json_object(text, "checkpoint")
        has_data, data = _get(outer, "data")
        has_data_checksum, _ = _get(outer, "dataChecksum")
        v4 = has_data or has_data_checksum
        inner = outer
        if v4:
            if data is not None and not isinstance(data, str):
                raise InputError(f"expected a JSON string, got {type(data).__name__}", field="data")
            data = data or ""
            stored = _uint64(outer, "dataChecksum")
            if verify and stored != data_checksum(data):
                raise InputError(f"checkpoint is corrupted: dataChecksum {stored} does not match "
                                 f"{data_checksum(data)} computed from the data", field="dataChecksum")
            inner = _json_object(data, "data")
        policy = _string(inner, "policyName")
        default_text = _string(inner, "defaultCpuSet")
        entries_present, raw_entries = _get(inner, "entries")
        entries, version = _entries(raw_entries) if entries_present else ({}, 2)
        pods_present, raw_pods = _get(inner, "podEntries")
        pod_entries = _pod_entries(raw_pods) if pods_present else {}
        checksum = _uint64(outer, "checksum")

        if version == 1:
            raise InputError("entries keyed by container id (checkpoint v1) cannot be mapped to pods; "
                             "current kubelets refuse them too", field="entries")
        if verify and not v4 and checksum != 0 and not pod_entries:
            pods = None if pods_present and raw_pods is None else {}
            known = {checkpoint_checksum(policy, default_text, entries, version=3, pod_entries=pods)}
            if not pods_present:
                known.add(checkpoint_checksum(policy, default_text, entries))
                if not entries:
                    known.add(checkpoint_checksum(policy, default_text, entries, version=1))
            if checksum not in known:
                raise InputError(
                    f"checkpoint is corrupted: checksum {checksum} matches no known layout of this content "
                    f"(v2: {checkpoint_checksum(policy, default_text, entries)})", field="checksum")
        if expect_policy is not None and policy != expect_policy:
            raise InputError(f'configured policy "{expect_policy}" differs from state checkpoint policy "{policy}"',
                             field="policyName")
        default = _cpuset(default_text, "defaultCpuSet")
        parsed = {
            pod: {name: _cpuset(cpus, f"entries.{pod}.{name}") for name, cpus in containers.items()}
            for pod, containers in (entries or {}).items()
        }
        return CPUManagerCheckpoint(policy, default, parsed, pod_entries, checksum)
    except InputError as err:
        raise err.with_source(source) if source else err from None


def read_checkpoint(
    path: str | os.PathLike[str] = DEFAULT_CPU_MANAGER_STATE_PATH,
    *,
    verify: bool = True,
    expect_policy: str | None = None,
) -> CPUManagerCheckpoint:
    """Read a ``cpu_manager_state`` file; errors name the file and the field (see :func:`loads_checkpoint`)."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read the checkpoint: {err}", source=where) from None
    return loads_checkpoint(text, source=where, verify=verify, expect_policy=expect_policy)
