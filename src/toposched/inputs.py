"""The one way toposched reads what a user or a cluster hands it: files, YAML, JSON, names (docs/inputs.md).

Every reader at an edge goes through here, so hostile input meets the same rules everywhere:

- **Files** are regular files (never a FIFO, a device, a socket or a directory: those are refused
  before a byte is read, so a FIFO never blocks and ``/dev/zero`` is never read) of at most
  :data:`MAX_FILE_BYTES` (sysfs attributes: :data:`MAX_SYSFS_FILE_BYTES`); standard input has the
  same cap. A read under a root (a sysfs snapshot) never leaves that root, whatever its links say.
- **YAML** is parsed by PyYAML's safe loader with two more refusals: a mapping that repeats a key,
  and aliases that expand past :data:`MAX_ALIAS_EXPANSION` nodes in all (the "billion laughs"
  document) or that refer to themselves. Nesting deeper than Python's parser can follow, and
  integers longer than Python converts, are refused with a message instead of a traceback.
- **JSON** refuses repeated keys, ``NaN``/``Infinity`` and numbers that overflow a double.
- **Names** from a request or a flag that reach a URL or an object are checked as Kubernetes
  checks them (:func:`check_dns_subdomain`, :func:`check_dns_label`).

Every refusal is an :class:`~toposched.errors.InputError` naming the file (or request), the field
and the problem, printed on one line by the CLI.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from toposched.errors import InputError

__all__ = [
    "MAX_ALIAS_EXPANSION",
    "MAX_FILE_BYTES",
    "MAX_NAME_LENGTH",
    "MAX_SYSFS_FILE_BYTES",
    "check_dns_label",
    "check_dns_subdomain",
    "check_finite",
    "check_int_range",
    "check_number_range",
    "decode_documents",
    "load_json",
    "load_yaml_documents",
    "one_line",
    "qualified_name_problems",
    "read_file_bytes",
    "read_file_text",
    "read_stdin_text",
    "read_within",
]

MAX_FILE_BYTES = 64 * 2**20
"""The largest file (or standard input) toposched reads: 64 MiB, far above any manifest, trace or hwloc export."""

MAX_SYSFS_FILE_BYTES = 2**20
"""The largest single file read under a sysfs snapshot: 1 MiB (the kernel's attributes are one page)."""

MAX_ALIAS_EXPANSION = 10_000
"""How many YAML nodes aliases may add in all when expanded; past it the document is refused."""

MAX_NAME_LENGTH = 253

_KIND_OF = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int) -> str:
    for test, what in _KIND_OF:
        if test(mode):
            return what
    return "not a regular file"


def read_file_bytes(path: str | os.PathLike[str], *, limit: int = MAX_FILE_BYTES, source: str | None = None) -> bytes:
    """A regular file's bytes, at most ``limit`` of them; InputError naming the file otherwise.

    The file is opened without blocking and checked with ``fstat`` before anything is read, so a
    FIFO, a device (``/dev/zero``), a socket or a directory is refused at once, and a file larger
    than ``limit`` is refused without being read whole.
    """
    name = source or os.fspath(path)
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", source=name) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"is {_not_regular(info.st_mode)}, not a regular file", source=name)
        if info.st_size > limit:
            raise InputError(f"is {info.st_size:,} bytes, larger than the limit of {limit:,}", source=name)
        chunks = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise InputError(f"is larger than the limit of {limit:,} bytes", source=name)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", source=name) from None
    finally:
        os.close(fd)


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"is not UTF-8 text (byte {exc.start})", source=name) from None


def read_file_text(path: str | os.PathLike[str], *, limit: int = MAX_FILE_BYTES, source: str | None = None) -> str:
    """A regular file's UTF-8 text under the size cap (see :func:`read_file_bytes`)."""
    name = source or os.fspath(path)
    return _decode(read_file_bytes(path, limit=limit, source=name), name)


def read_stdin_text(*, limit: int = MAX_FILE_BYTES, source: str = "<stdin>") -> str:
    """Standard input's UTF-8 text, refused past ``limit`` bytes."""
    stream = getattr(sys.stdin, "buffer", None)
    data = stream.read(limit + 1) if stream is not None else sys.stdin.read(limit + 1).encode("utf-8")
    if len(data) > limit:
        raise InputError(f"is larger than the limit of {limit:,} bytes", source=source)
    return _decode(data, source)


def read_within(root: str | os.PathLike[str], path: str | os.PathLike[str], *,
                limit: int = MAX_SYSFS_FILE_BYTES) -> bytes | None:
    """The bytes of ``path`` if it resolves (links followed) to a regular file inside ``root``, else None.

    For snapshot trees: a link that leads out of the root, a FIFO, a device or an oversized file
    reads as absent (None), so a snapshot can never make toposched read ``/dev/zero`` or block.
    """
    real_root = os.path.realpath(os.fspath(root))
    real = os.path.realpath(os.fspath(path))
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        return None
    try:
        return read_file_bytes(real, limit=limit)
    except InputError:
        return None


# ---- YAML and JSON ------------------------------------------------------------------------------


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's when PyYAML has it: ten times faster on big files)."""


def _check_tree(root: Node, budget: int) -> None:
    """Refuse repeated mapping keys, self-referring aliases and alias expansion past ``budget`` nodes.

    ``size`` of a node is how many nodes it stands for when expanded; aliases share the node
    they name, so the expansion is the sum of sizes over all references minus the unique nodes.
    """
    sizes: dict[int, int] = {}
    unique = 0
    # Iterative post-order walk: a deeply nested document cannot exhaust Python's stack here.
    stack: list[tuple[Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            if isinstance(node, SequenceNode):
                children = node.value
            elif isinstance(node, MappingNode):
                children = [n for pair in node.value for n in pair]
            else:
                children = []
            total = 1 + sum(sizes[id(c)] for c in children)
            sizes[key] = total
            if total - unique > budget:
                raise InputError(f"YAML aliases expand past {budget:,} nodes (the limit); write the values out")
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise InputError("a YAML alias refers to a node that contains it")
        open_nodes.add(key)
        unique += 1
        stack.append((node, True))
        if isinstance(node, MappingNode):
            seen: set[tuple[str, str]] = set()
            for k, _ in node.value:
                if isinstance(k, ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    marker = (k.tag, k.value)
                    if marker in seen:
                        line = k.start_mark.line + 1 if k.start_mark is not None else "?"
                        raise InputError(f"key {k.value[:80]!r} repeats in a mapping (line {line})")
                    seen.add(marker)
        if isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, SequenceNode):
            children = node.value
        else:
            children = []
        for child in reversed(children):
            if id(child) in open_nodes:
                raise InputError("a YAML alias refers to a node that contains it")
            if id(child) not in sizes:
                stack.append((child, False))


def load_yaml_documents(text: str, source: str, *, alias_budget: int = MAX_ALIAS_EXPANSION) -> list[Any]:
    """The documents of a YAML stream (``None`` for empty ones), through the safe loader with the checks above."""
    loader = _Loader(text)
    docs: list[Any] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                docs.append(None)
                continue
            _check_tree(node, alias_budget)
            docs.append(loader.construct_document(node))
    except InputError as err:
        raise err.with_source(source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(one_line(f"invalid YAML{where}: {problem}"), source=source) from None
    except RecursionError:
        raise InputError("invalid YAML: nested too deeply", source=source) from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more digits than Python converts
        raise InputError(one_line(f"invalid YAML: {exc}")[:200], source=source) from None
    finally:
        loader.dispose()
    return docs


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"key {key[:80]!r} repeats in an object")
        out[key] = value
    return out


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"number {text[:40]}{'...' if len(text) > 40 else ''} is out of range")
    return value


def _constant(text: str) -> Any:
    raise InputError(f"{text} is not a JSON number")


def load_json(text: str | bytes, source: str) -> Any:
    """One JSON value, refusing repeated keys, NaN/Infinity, overflowing numbers and absurd nesting."""
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_float=_float, parse_constant=_constant)
    except InputError as err:
        raise err.with_source(source) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=source) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", source=source) from None
    except (ValueError, OverflowError) as exc:
        raise InputError(one_line(f"invalid JSON: {exc}")[:200], source=source) from None


def decode_documents(text: str, source: str) -> list[Any]:
    """The non-empty documents of a YAML stream, or the one value of a JSON text."""
    if text.lstrip().startswith(("{", "[")):
        return [load_json(text, source)]
    return [doc for doc in load_yaml_documents(text, source) if doc is not None]


# ---- values -------------------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def check_dns_subdomain(value: Any, *, field: str, source: str | None = None) -> str:
    """``value`` if it is a DNS-1123 subdomain (a Node, Pod or object name), else InputError."""
    if not isinstance(value, str):
        raise InputError(f"expected a name (string), got {type(value).__name__}", field=field, source=source)
    if not value or len(value) > MAX_NAME_LENGTH or not _DNS_SUBDOMAIN.fullmatch(value):
        raise InputError(f"{value[:80]!r} is not a valid name: lower-case letters, digits, '-' and '.', "
                         f"at most {MAX_NAME_LENGTH} characters (DNS-1123 subdomain)", field=field, source=source)
    return value


def check_dns_label(value: Any, *, field: str, source: str | None = None) -> str:
    """``value`` if it is a DNS-1123 label (a namespace, a container name), else InputError."""
    if not isinstance(value, str):
        raise InputError(f"expected a name (string), got {type(value).__name__}", field=field, source=source)
    if not value or len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise InputError(f"{value[:80]!r} is not a valid name: lower-case letters, digits and '-', "
                         "at most 63 characters (DNS-1123 label)", field=field, source=source)
    return value


def check_finite(value: Any, *, field: str, source: str | None = None) -> float:
    """``value`` as a float if it is a finite real number (not a bool, NaN or infinity), else InputError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{_show(value)} is not a number", field=field, source=source)
    try:
        number = float(value)
    except OverflowError:
        raise InputError(f"{_show(value)} is out of range", field=field, source=source) from None
    if not math.isfinite(number):
        raise InputError(f"{_show(value)} is not a finite number", field=field, source=source)
    return number


def check_number_range(value: Any, low: float, high: float, *, field: str, source: str | None = None,
                       low_open: bool = False) -> float:
    """``value`` as a float if finite and within ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    number = check_finite(value, field=field, source=source)
    if number > high or number < low or (low_open and number == low):
        bracket = "(" if low_open else "["
        raise InputError(f"{_show(value)} is out of range {bracket}{low:g}, {high:g}] (the limit)",
                         field=field, source=source)
    return number


def check_int_range(value: Any, low: int, high: int, *, field: str, source: str | None = None) -> int:
    """``value`` if it is an integer (a whole float is accepted) within ``[low, high]``, else InputError naming the limit."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{_show(value)} is not an integer", field=field, source=source)
    if value < low or value > high:
        raise InputError(f"{_show(value)} is out of range [{low:,}, {high:,}] (the limit)", field=field, source=source)
    return value


def _show(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return "a number of more than 60 digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())


def is_regular_file(path: Path) -> bool:
    """True when ``path`` is a regular file (links followed)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


# ---- Kubernetes objects: the API server's rules -----------------------------------------------

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "storage", "pods"})
MAX_ANNOTATIONS_BYTES = 256 * 1024  # apimachinery's TotalAnnotationSizeLimitB
MAX_CONTAINERS = 1000  # far above any real pod; bounds the work one pod can ask for


_QUALIFIED_NAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')"
)


def qualified_name_problems(value: str) -> list[str]:
    """What is wrong with ``value`` as a Kubernetes qualified name (``[prefix/]name``: label and
    annotation keys, resource names), in apimachinery's words (``IsQualifiedName``); empty when it
    is valid."""
    parts = value.split("/")
    if len(parts) > 2:
        return [f"a qualified name {_QUALIFIED_NAME_RULE} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    problems: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > MAX_NAME_LENGTH:
                problems.append(f"prefix part must be no more than {MAX_NAME_LENGTH} characters")
            if not _DNS_SUBDOMAIN.fullmatch(prefix):
                problems.append("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                                "characters, '-' or '.', and must start and end with an alphanumeric character")
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        problems.append(f"name part {_QUALIFIED_NAME_RULE}")
    return problems


def check_qualified_name(value: Any, *, field: str, source: str | None = None) -> str:
    """``value`` if it is a Kubernetes qualified name (``[prefix/]name``: label and annotation keys,
    resource names; see :func:`qualified_name_problems`)."""
    if not isinstance(value, str):
        raise InputError(f"key {_show(value)} is not a string", field=field, source=source)
    if qualified_name_problems(value):
        raise InputError(f"{value[:80]!r} is not a qualified name ([DNS-subdomain/]name of letters, digits, "
                         "'-', '_', '.', at most 63 characters)", field=field, source=source)
    return value


def check_labels(value: Any, *, field: str, source: str | None = None) -> dict[str, str]:
    """A labels mapping as the API server accepts it: qualified-name keys, short label-value strings."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"expected a mapping of strings, got {type(value).__name__}", field=field, source=source)
    for key, val in value.items():
        check_qualified_name(key, field=f"{field}[{str(key)[:60]}]", source=source)
        if not isinstance(val, str):
            raise InputError(f"value {_show(val)} is not a string", field=f"{field}.{key}", source=source)
        if len(val) > 63 or not _LABEL_VALUE.fullmatch(val):
            raise InputError(f"value {val[:80]!r} is not a valid label value (letters, digits, '-', '_', '.', "
                             "at most 63 characters)", field=f"{field}.{key}", source=source)
    return dict(value)


def check_annotations(value: Any, *, field: str, source: str | None = None) -> dict[str, str]:
    """An annotations mapping as the API server accepts it: qualified-name keys, string values, 256 KiB in all."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"expected a mapping of strings, got {type(value).__name__}", field=field, source=source)
    total = 0
    for key, val in value.items():
        check_qualified_name(key, field=f"{field}[{str(key)[:60]}]", source=source)
        if not isinstance(val, str):
            raise InputError(f"value {_show(val)} is not a string (quote it)", field=f"{field}.{key}", source=source)
        total += len(key) + len(val)
        if total > MAX_ANNOTATIONS_BYTES:
            raise InputError(f"annotations are larger than {MAX_ANNOTATIONS_BYTES:,} bytes (the limit)",
                             field=field, source=source)
    return dict(value)


def check_string_map(value: Any, *, field: str, source: str | None = None) -> dict[str, str]:
    """A mapping of strings to strings (e.g. a nodeSelector)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"expected a mapping of strings, got {type(value).__name__}", field=field, source=source)
    for key, val in value.items():
        if not isinstance(key, str) or not isinstance(val, str):
            raise InputError(f"{_show(key)}: {_show(val)} is not a string to a string", field=field, source=source)
    return dict(value)


def check_resource_name(value: Any, *, field: str, source: str | None = None) -> str:
    """A resource name the API server accepts: a standard one (cpu, memory, ephemeral-storage, hugepages-<size>)
    or an extended resource ``domain/name``."""
    if not isinstance(value, str):
        raise InputError(f"resource name {_show(value)} is not a string", field=field, source=source)
    if value in STANDARD_RESOURCES:
        return value
    if value.startswith("hugepages-"):
        hugepage_size(value, field=field, source=source)
        return value
    if "/" not in value:
        raise InputError(f"unknown resource {value[:80]!r}: a standard resource (cpu, memory, ephemeral-storage, "
                         "hugepages-<size>) or an extended resource domain/name", field=field, source=source)
    check_qualified_name(value, field=field, source=source)
    return value


def is_extended_resource(name: str) -> bool:
    """True for an extended resource (``domain/name`` outside ``kubernetes.io/``, or ``requests.``-less)."""
    return "/" in name and not name.startswith("kubernetes.io/")


def hugepage_size(name: str, *, field: str, source: str | None = None) -> int:
    """The page size in bytes of a ``hugepages-<size>`` resource; InputError when the size is not a quantity."""
    size = _page_size(name[len("hugepages-"):])
    if size is None:
        raise InputError(f"{name[:80]!r} does not name a page size (e.g. hugepages-2Mi)", field=field, source=source)
    return size


@functools.lru_cache(maxsize=256)
def _page_size(text: str) -> int | None:
    """The whole positive number of bytes ``text`` is as a quantity, or None (remembered: every
    report and pod names the same few page sizes)."""
    from toposched.quantity import parse_quantity

    try:
        size = parse_quantity(text)
    except InputError:
        return None
    return int(size) if size > 0 and size.denominator == 1 else None
