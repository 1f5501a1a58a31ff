"""Reading Kubernetes objects from YAML or JSON files: one object, several documents, or a List.

The edges (CLI, simulator inputs) read files through here, so every malformed file gets the
same kind of error: the file, and where in it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from toposched.errors import InputError

__all__ = ["decode_documents", "load_objects", "read_text"]


def read_text(path: str | Path) -> str:
    """A file's UTF-8 text; InputError naming the file when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", source=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("file is not UTF-8 text", source=str(path)) from None


def decode_documents(text: str, source: str) -> list[Any]:
    """The non-empty documents of a YAML stream, or the one value of a JSON text."""
    if text.lstrip().startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=source) from None
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"invalid YAML{where}: {problem}", source=source) from None
    return [doc for doc in docs if doc is not None]


def load_objects(path: str | Path, *, list_kinds: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """Every object of a file as ``(where, object)``, with ``List`` items (and ``list_kinds``) expanded.

    ``where`` names the file, and the document or item when there are several, for error messages.
    """
    source = str(path)
    documents = decode_documents(read_text(path), source)
    out: list[tuple[str, Any]] = []
    for d, doc in enumerate(documents):
        where = source if len(documents) == 1 else f"{source} (document {d + 1})"
        if isinstance(doc, Mapping) and (doc.get("kind") == "List" or doc.get("kind") in list_kinds):
            items = doc.get("items")
            if not isinstance(items, list):
                raise InputError(f"a {doc.get('kind')} needs an items list", field="items", source=where)
            out.extend((f"{where}: items[{i}]", item) for i, item in enumerate(items))
        elif isinstance(doc, list):
            out.extend((f"{where}: [{i}]", item) for i, item in enumerate(doc))
        else:
            out.append((where, doc))
    return out
