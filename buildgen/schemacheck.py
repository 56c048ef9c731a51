"""Does a document satisfy a JSON Schema? A quick yes from generated code; jsonschema for why.

jsonschema is the reference: its errors are what buildgen turns into located messages
(manifest/validate.py, targets/attributes.py). It is also slow for the common case, a
document with nothing wrong: ~60 ms to import and ~50 µs per manifest value, a fifth of
`buildgen gen` at 1,000 models. So a document is first checked by the code fastjsonschema
generates from the same schema (~3 ms for 1,000 models), and only one it does not accept
goes to jsonschema, which finds the problems or, if the two ever disagree, accepts it.
The quick path never decides that a document is wrong, so it can only cost time, never
change a result; the tests check that the two agree on what they accept.

Generating and compiling the code takes ~30 ms a schema, so its bytecode is kept in the
user's cache folder and read from there by later runs. The folder must be the
user's own and private, as for any code run from it; anything unexpected (no such folder,
a plug-in's schema fastjsonschema cannot read) and the answer is "not known", which sends
the document to jsonschema.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import CodeType
from typing import Any

from buildgen.fsutil import owned_privately, write_atomic

# Bumped when the way a schema becomes code changes, so old modules are not reused.
_FORMAT = 1
# Keywords that only describe: dropped before generating (they would be embedded in every
# error fastjsonschema raises, tripling the code) and never change what is accepted.
_ANNOTATIONS = frozenset({"$id", "$schema", "$comment", "title", "description", "default",
                          "examples"})
# Keys whose value maps names to schemas: their keys are names, not keywords.
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
# Keys whose value is data to compare with, kept as it is.
_DATA = frozenset({"const", "enum"})

Validate = Callable[[object], object]
_loaded: dict[str, Validate | None] = {}


def accepts(schema: Mapping[str, Any], document: object) -> bool:
    """True when `document` certainly satisfies `schema`; False when it does not or when
    that is not known here (then ask jsonschema)."""
    validate = _validator(schema)
    if validate is None:
        return False
    try:
        validate(document)
    except Exception:  # JsonSchemaValueException, or anything the generated code trips on
        return False
    return True


def code_file(schema: Mapping[str, Any]) -> Path | None:
    """Where the bytecode checking `schema` is kept; None without a private cache folder."""
    folder = _private_folder()
    return folder / _file_name(_schema_text(schema)) if folder is not None else None


def _validator(schema: Mapping[str, Any]) -> Validate | None:
    try:
        text = _schema_text(schema)
        name = _file_name(text)
    except ImportError:  # no fastjsonschema
        return None
    if name not in _loaded:
        _loaded[name] = _load(name, text)
    return _loaded[name]


def _schema_text(schema: Mapping[str, Any]) -> str:
    return json.dumps(_without_annotations(schema), sort_keys=True)


def _file_name(schema_text: str) -> str:
    """Names the schema, the code generator's version and the bytecode's format."""
    import fastjsonschema

    key = f"{_FORMAT}\0{fastjsonschema.VERSION}\0{sys.version}\0{schema_text}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return f"schema-{digest}.{sys.implementation.cache_tag}.code"


def _load(name: str, schema_text: str) -> Validate | None:
    folder = _private_folder()
    # Bytecode, marshalled: what importing a .py would read from __pycache__, but also
    # where bytecode is not written (PYTHONDONTWRITEBYTECODE), and in one file.
    path = folder / name if folder is not None else None
    if path is not None and owned_privately(path):
        try:
            return _run(marshal.loads(path.read_bytes()))
        except Exception:  # damaged: made again below
            pass
    try:
        code = compile(_generate(json.loads(schema_text)), f"<schema {name}>", "exec")
    except Exception:  # a construct fastjsonschema does not know: jsonschema decides
        return None
    if path is not None:
        with contextlib.suppress(OSError):
            write_atomic(path, marshal.dumps(code))
            os.chmod(path, 0o600)
    return _run(code)


def _generate(schema: dict[str, Any]) -> str:
    import fastjsonschema

    # Draft 7 is the newest fastjsonschema reads; for the keywords buildgen's schemas use
    # (type, properties, $ref to $defs, oneOf, if/then/else, pattern, ...) it means the same
    # as 2020-12. Defaults are not filled in (the document is not changed) and `format` is
    # not checked, as jsonschema checks it only when asked.
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
    code: str = fastjsonschema.compile_to_code(schema, use_default=False, use_formats=False)
    return code


def _run(code: CodeType) -> Validate:
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    validate: Validate = namespace["validate"]
    return validate


def _private_folder() -> Path | None:
    from buildgen.cache.settings import private_subfolder

    return private_subfolder("schemas")


def _without_annotations(node: Any, names: bool = False) -> Any:
    """`node` (a schema; with `names`, a map of names to schemas) without annotations."""
    if isinstance(node, dict):
        return {k: v if not names and k in _DATA
                else _without_annotations(v, names=not names and k in _NAMED_SCHEMAS)
                for k, v in node.items()
                if names or not (k in _ANNOTATIONS or k.startswith("x-"))}
    if isinstance(node, list):
        return [_without_annotations(v) for v in node]
    return node
