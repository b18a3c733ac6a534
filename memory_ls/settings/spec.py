"""How a setting is declared: ``setting()`` puts a ``Spec`` in its dataclass field's metadata.

The declarations themselves are in ``schema.py``; validation (``loading.py``), the manual's
table (``docs.py``) and the VS Code extension's ``contributes.configuration``
(``editors/vscode/scripts/gen_settings.py``) read them through ``leaves``.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, get_type_hints

SPEC = "memory_ls.spec"  # the dataclass field metadata key


@dataclass(frozen=True)
class Spec:
    """What a setting accepts and means. For a list, ``choices`` are the allowed items."""

    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    min_items: int = 0
    secret: bool = False  # a key, a token or a URL with a password: never shown in a problem


def setting(
    default: Any,
    description: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
    min_items: int = 0,
    secret: bool = False,
) -> Any:
    """A dataclass field carrying its ``Spec``; a list or table default is copied per instance."""
    spec = Spec(description, minimum, maximum, choices, min_items, secret)
    if isinstance(default, list | dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata={SPEC: spec})
    return field(default=default, metadata={SPEC: spec})


def camel(name: str) -> str:
    name = name.rstrip("_")
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def snake(name: str) -> str:
    out = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    return "lambda_" if out == "lambda" else out


def spec_of(f: dataclasses.Field[Any]) -> Spec | None:
    """The declaration of a leaf setting; None for a section (a nested dataclass)."""
    return f.metadata.get(SPEC)


@dataclass(frozen=True)
class Leaf:
    key: str  # camelCase and dotted, as users write it: "query.hybrid.rrfK"
    hint: Any  # the Python type: bool, int, float, str, list[str], dict[str, str]
    default: Any
    spec: Spec


def leaves(cls: type, prefix: str = "") -> Iterator[Leaf]:
    """Every leaf setting of ``cls``, in declaration order."""
    hints = get_type_hints(cls)
    instance = cls()
    for f in dataclasses.fields(cls):
        key = prefix + camel(f.name)
        spec = spec_of(f)
        if spec is None:
            yield from leaves(hints[f.name], key + ".")
        else:
            yield Leaf(key, hints[f.name], getattr(instance, f.name), spec)
