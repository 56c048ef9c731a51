"""include/<model>.h: the C API of a compiled model (see DESIGN.md, "The C API")."""

from __future__ import annotations

from buildgen import __version__
from buildgen.codegen.cnames import comment
from buildgen.ir import Graph, Value


def api_macro(model: str) -> str:
    return f"{model.upper()}_API"


def _tables(model: str, kind: str, values: tuple[Value, ...]) -> list[str]:
    api = api_macro(model)
    return [
        f"#define {model.upper()}_NUM_{kind.upper()}S {len(values)}",
        f"{api} extern const int {model}_num_{kind}s;",
        f"{api} extern const char *const {model}_{kind}_names[];",
        f'{api} extern const char *const {model}_{kind}_dtypes[];   /* "float32", "int64", ... */',
        f"{api} extern const int {model}_{kind}_ranks[];",
        f"{api} extern const int64_t *const {model}_{kind}_shapes[];",
        f"{api} extern const size_t {model}_{kind}_bytes[];",
    ]


def _describe(values: tuple[Value, ...]) -> list[str]:
    return [
        f" *   [{i}] {comment(v.name)}: {v.type.dtype.value}[{', '.join(map(str, v.type.shape))}]"
        for i, v in enumerate(values)
    ]


def generate_header(model: str, graph: Graph, *, device: bool = False,
                    profile_regions: int | None = None) -> str:
    """The header; `device`: the model has device regions (it declares their arena size);
    `profile_regions`: built with profile, with that many regions (codegen/profile.py)."""
    from buildgen.codegen import profile
    guard = f"BUILDGEN_{model.upper()}_H"
    api = api_macro(model)
    lines = [
        f"/* {model}: compiled by buildgen {__version__} from "
        f"{comment(str(graph.source or graph.name))}.",
        " *",
        " * Inputs:",
        *_describe(graph.inputs),
        " * Outputs:",
        *_describe(graph.outputs),
        " *",
        f" * Usage: {model}_create once, {model}_run any number of times (one thread at a time",
        f" * per instance), {model}_destroy. Every function returning int returns 0 on success;",
        f" * on failure {model}_last_error says why; {model}_last_error(NULL) after a failed",
        " * create.",
        " */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        "#if defined(_WIN32)",
        f"#define {api}",
        "#else",
        f'#define {api} __attribute__((visibility("default")))',
        "#endif",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f"typedef struct {model}_model {model}_model;",
        "",
        f"{api} int {model}_create({model}_model **out);",
        f"/* inputs[i] and outputs[i] point at dense row-major buffers of {model}_*_bytes[i];",
        " * for an empty tensor (0 bytes: a zero dim) the pointer may be NULL. */",
        f"{api} int {model}_run({model}_model *m, const void *const *inputs,",
        "        void *const *outputs);",
        f"{api} void {model}_destroy({model}_model *m);",
        f"{api} const char *{model}_last_error(const {model}_model *m);",
        "/* The instruction set the host code of this instance runs: the best level the CPU",
        " * supports of those the library was compiled for (\"x86-64-v3\"), picked at create;",
        " * or the one ISA it was built for (its march), or \"default\" (the compiler's). */",
        f"{api} const char *{model}_cpu_isa(const {model}_model *m);",
        "",
        *_tables(model, "input", graph.inputs),
        *_tables(model, "output", graph.outputs),
        f"{api} size_t {model}_arena_bytes(void);  /* working memory of one instance */",
        *(
            [f"{api} size_t {model}_device_arena_bytes(void);  /* its device (GPU) memory */"]
            if device else []
        ),
        *(profile.declarations(model, api, profile_regions) if profile_regions is not None
          else []),
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        f"#endif /* {guard} */",
        "",
    ]
    return "\n".join(lines)
