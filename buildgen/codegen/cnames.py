"""Turning ONNX names into safe C: identifiers, string literals and comment text.

A model is data: every string it carries (tensor, node and graph names, attribute values)
and every path reaches generated C/CUDA only through these three functions, which accept
any Python string and return text that cannot end the construct it sits in. The importer
already refuses control and bidi-override characters (buildgen/importer/names.py); these
functions do not rely on that.
"""

from __future__ import annotations

import hashlib
import re

_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")
# Past this, a name is cut and a digest of the whole name keeps it unique: C compilers
# accept long identifiers, but a 10 kB one makes every line that mentions it unreadable.
MAX_IDENTIFIER = 64
MAX_COMMENT = 160


def identifier(name: str, prefix: str = "t_") -> str:
    """A readable C identifier for an ONNX name.

    "/layer1/MatMul_output_0" becomes t_layer1_MatMul_output_0.
    """
    body = _NOT_IDENT.sub("_", name).strip("_")
    body = re.sub(r"_+", "_", body)
    if len(body) > MAX_IDENTIFIER:
        body = f"{body[:MAX_IDENTIFIER]}_{digest(name)}"
    return prefix + body


def digest(text: str) -> str:
    """A short stable tag of `text` (for names that had to be shortened)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


# Printable ASCII that stands for itself in a C string literal. '?' is excluded so no
# trigraph (??/ is a backslash under -trigraphs or -std=c89/c99/c11) can form.
_LITERAL_SAFE = frozenset(range(0x20, 0x7F)) - {ord('"'), ord("\\"), ord("?")}


def c_string(text: str) -> str:
    """A C string literal holding `text`'s UTF-8 bytes, exactly.

    Anything but plain printable ASCII is written as a three-digit octal escape: unlike
    \\x (which swallows every hex digit that follows) and \\u (which C forbids for control
    characters and surrogates), a three-digit octal escape always ends where it should,
    and it works the same in C, C++ and CUDA. A name with a NUL keeps it: the literal's
    bytes are the name's bytes (the importer refuses such names before this point).
    """
    out = []
    for byte in text.encode("utf-8", "surrogatepass"):
        out.append(chr(byte) if byte in _LITERAL_SAFE else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def printable(text: str, limit: int = MAX_COMMENT) -> str:
    """`text` as printable ASCII for a comment or message: other characters become \\uXXXX
    (so a bidi override is seen, not obeyed), and a long text is cut with '...'."""
    shown = []
    for ch in text:
        code = ord(ch)
        if 0x20 <= code < 0x7F:
            shown.append(ch)
        elif code <= 0xFFFF:
            shown.append(f"\\u{code:04x}")
        else:
            shown.append(f"\\U{code:08x}")
    result = "".join(shown)
    return result if len(result) <= limit else result[: limit - 3] + "..."


def comment(text: str, limit: int = MAX_COMMENT) -> str:
    """Text safe inside /* */ and after //: one line of printable ASCII with no comment
    delimiter, no trigraph, and no backslash at its end (which would splice the next line
    into a // comment)."""
    safe = printable(text, limit).replace("??", "?.?")
    safe = re.sub(r"\\( *)$", r"/\1", safe)
    while "*/" in safe or "/*" in safe or "//" in safe:
        safe = safe.replace("*/", "* /").replace("/*", "/ *").replace("//", "/ /")
    # Spaces keep a delimiter from forming with the text around it ("/*" + "/", "*" + "/").
    return f" {safe} " if safe.startswith("/") or safe.endswith("*") else safe
