"""Reading Kubernetes objects from YAML or JSON files: one object, several documents, or a List.

The edges (CLI, simulator inputs) read files through here, so every malformed file gets the
same kind of error: the file, and where in it. Files and text go through :mod:`toposched.inputs`
(regular files under a size cap; YAML without alias bombs or repeated keys; JSON without NaN).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toposched.errors import InputError
from toposched.inputs import decode_documents, read_file_text

__all__ = ["decode_documents", "load_objects", "read_text"]


def read_text(path: str | Path) -> str:
    """A regular file's UTF-8 text under the size cap; InputError naming the file otherwise (see :mod:`toposched.inputs`)."""
    return read_file_text(path, source=str(path))


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
