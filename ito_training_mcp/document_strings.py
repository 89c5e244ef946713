"""Every key and every string value of a parsed JSON document, collected once: the secret scanner and
the manifest's character rule both need them, and one walk serves both. The walk also records each
container (`Span`), so that the scanner can build a JSON pointer only for a container that holds a
finding."""

from __future__ import annotations

from typing import Any, NamedTuple

_CONTAINERS = (dict, list)


class Span(NamedTuple):
    """One container as `collect` visits it: its place (parent span, name in it) and its strings."""

    node: Any
    parent: int  # index of the parent's span; -1 for the document itself
    name: str | int  # its key or index in the parent (unused for the document itself)
    first: int  # index in `values` of its first string value
    strings: int  # how many string values it holds
    only_strings: bool  # every child is a string (then a value's position is its index minus `first`)


def collect(document: Any) -> tuple[list[str], list[str], list[Span]]:
    """Every distinct key, every string value in the order `_pointers` visits them, and the containers
    in that order. A container holding nothing but strings (a long list of labels) is taken whole."""
    keys: dict[str, None] = {}
    values: list[str] = [document] if isinstance(document, str) else []
    spans: list[Span] = []
    stack: list[tuple[Any, int, str | int]] = [(document, -1, "")] if type(document) in _CONTAINERS else []
    while stack:
        node, parent, name = stack.pop()
        if type(node) is dict:
            keys.update(dict.fromkeys(node))
            children: Any = node.values()
        else:
            children = node
        first = len(values)
        try:
            "".join(children)  # are they all strings? C speed, and no copy is kept
        except TypeError:
            values += [child for child in children if isinstance(child, str)]
            items = node.items() if type(node) is dict else enumerate(node)
            spans.append(Span(node, parent, name, first, len(values) - first, False))
            stack += [(child, len(spans) - 1, key) for key, child in items if type(child) in _CONTAINERS]
        else:
            values += children
            spans.append(Span(node, parent, name, first, len(values) - first, True))
    return list(keys), values, spans


class DocumentStrings:
    """Every distinct key and every string value of a parsed document, collected on first use: the
    scanner and the manifest's character rule both need them, and one walk serves both."""

    def __init__(self, document: Any) -> None:
        self.document = document
        self._collected: tuple[list[str], list[str], list[Span]] | None = None

    def _all(self) -> tuple[list[str], list[str], list[Span]]:
        if self._collected is None:
            self._collected = collect(self.document)
        return self._collected

    def get(self) -> tuple[list[str], list[str]]:
        keys, values, _ = self._all()
        return keys, values

    def spans(self) -> list[Span]:
        return self._all()[2]
