"""Turning ONNX names into safe C: identifiers, string literals and comment text."""

from __future__ import annotations

import json
import re

_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")


def identifier(name: str, prefix: str = "t_") -> str:
    """A readable C identifier for an ONNX name.

    "/layer1/MatMul_output_0" becomes t_layer1_MatMul_output_0.
    """
    body = _NOT_IDENT.sub("_", name).strip("_")
    body = re.sub(r"_+", "_", body)
    return prefix + body


def c_string(text: str) -> str:
    """A C string literal. JSON escaping is valid C for the characters it emits; '?' is split
    so no trigraph can form."""
    return json.dumps(text, ensure_ascii=True).replace("?", '?""')


def comment(text: str) -> str:
    """Text safe inside /* */."""
    return text.replace("*/", "* /").replace("/*", "/ *").replace("\n", " ")
