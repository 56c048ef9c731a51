"""Read-only JSON-like values that still pass ``isinstance(x, dict)`` / ``isinstance(x, list)``.

Target attributes leave the manifest as they were written and are later validated by
jsonschema (whose "object" and "array" types mean dict and list) and serialized with
json.dumps. Subclassing keeps both working while making the manifest's data read-only, so
no stage can change what another stage sees.
"""

from __future__ import annotations

from typing import Any, NoReturn


def _read_only(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("manifest data is read-only; use buildgen.manifest.thaw() for a copy")


class FrozenDict(dict[str, Any]):
    __slots__ = ()

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        _read_only()

    def __delitem__(self, key: str) -> NoReturn:
        _read_only()

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _read_only()

    def clear(self) -> NoReturn:
        _read_only()

    def pop(self, *args: Any) -> NoReturn:
        _read_only()

    def popitem(self) -> NoReturn:
        _read_only()

    def setdefault(self, *args: Any) -> NoReturn:
        _read_only()

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        _read_only()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        # copy, deepcopy and pickle would otherwise refill an empty instance item by item.
        return (type(self), (dict(self),))


class FrozenList(list[Any]):
    __slots__ = ()

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        _read_only()

    def __delitem__(self, index: Any) -> NoReturn:
        _read_only()

    def __iadd__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _read_only()

    def __imul__(self, count: Any) -> NoReturn:  # type: ignore[misc]
        _read_only()

    def append(self, value: Any) -> NoReturn:
        _read_only()

    def extend(self, values: Any) -> NoReturn:
        _read_only()

    def insert(self, index: Any, value: Any) -> NoReturn:
        _read_only()

    def pop(self, *args: Any) -> NoReturn:
        _read_only()

    def remove(self, value: Any) -> NoReturn:
        _read_only()

    def clear(self) -> NoReturn:
        _read_only()

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        _read_only()

    def reverse(self) -> NoReturn:
        _read_only()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> tuple[type[FrozenList], tuple[list[Any]]]:
        return (type(self), (list(self),))


def freeze(value: Any) -> Any:
    """A read-only deep copy of plain data (dicts, lists, scalars)."""
    if isinstance(value, dict):
        return FrozenDict((key, freeze(item)) for key, item in value.items())
    if isinstance(value, list):
        return FrozenList(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of (possibly frozen) data."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    return value
