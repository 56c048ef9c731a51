"""A planned action's command as an argument list, expanded the way ninja expands it.

add_custom_command takes arguments, not shell text, so the fragment needs each action's
command as a list. Rule commands are buildgen's own (buildgen/ninja/rules.py): words
separated by spaces, each literal text and `$name` / `${name}` references. A reference that
is a whole word and holds an argument list (a tuple) becomes those arguments; inside a
longer word (`$out.d`) it must hold one value. `$in` and `$out` are the action's explicit
inputs and outputs. Shell syntax (`&&`, `|`, `>`) has no argument-list form and is refused:
the one rule using it (ar) is replaced by CMake's own archiving, never expanded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from buildgen.ninja.plan import Action, BuildPlan
from buildgen.ninja.writer import Value

# ninja's variable names: letters, digits, '_' and '-'; `$$`, `$ ` and `$:` are escapes.
_TOKEN = re.compile(r"\$(?:\{([A-Za-z0-9_-]+)\}|([A-Za-z0-9_-]+)|(\$| |:))")
_SHELL_SYNTAX = frozenset({"&&", "||", "|", ";", "<", ">", ">>", "&", "2>&1"})


def action_values(plan: BuildPlan, action: Action) -> dict[str, Value]:
    """What `$name` means in `action`'s command: its own variables, then the file's."""
    values: dict[str, Value] = dict(plan.variables)
    values.update(action.variables)
    values["in"] = action.inputs
    values["out"] = action.outputs
    return values


def expand_argv(template: str, values: Mapping[str, Value]) -> tuple[str, ...]:
    """The command `template` (ninja text) as an argument list."""
    argv: list[str] = []
    for word in template.split():
        if word in _SHELL_SYNTAX:
            raise ValueError(f"command {template!r} uses shell syntax {word!r}")
        whole = _TOKEN.fullmatch(word)
        name = whole and (whole.group(1) or whole.group(2))
        if name:
            value = _lookup(values, name, template)
            argv += list(value) if isinstance(value, tuple) else [value]
        else:
            argv.append(expand_text(word, values))
    return tuple(a for a in argv if a != "")


def expand_text(template: str, values: Mapping[str, Value]) -> str:
    """`template` as one string; a reference in it must hold a single value."""

    def one(match: re.Match[str]) -> str:
        if match.group(3) is not None:
            return match.group(3)
        name = match.group(1) or match.group(2)
        value = _lookup(values, name, template)
        if isinstance(value, tuple):
            if len(value) != 1:
                raise ValueError(f"${name} in {template!r} holds {len(value)} values, not one")
            return value[0]
        return value

    return _TOKEN.sub(one, template)


def _lookup(values: Mapping[str, Value], name: str, template: str) -> Value:
    try:
        return values[name]
    except KeyError:
        raise ValueError(f"${name} in {template!r} is not defined for this action") from None
