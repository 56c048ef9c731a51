/* A generic driver for a compiled model's C API, for builds the tests cannot load into
 * Python (sanitizer-instrumented libraries need the sanitizer runtime in the executable).
 *
 *   cc -DMODEL=mlp run_model.c -Ibuild/mlp/t/include build/mlp/t/libmlp.a -lm -o run_mlp
 *   ./run_mlp inputs.bin outputs.bin
 *
 * inputs.bin holds every input's bytes, in input order, back to back; outputs.bin gets
 * every output's the same way. The model is created, run twice (a second run must not
 * depend on the first's leftovers) and destroyed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PASTE2(a, b) a##b
#define PASTE(a, b) PASTE2(a, b)
#define API(name) PASTE(MODEL, name)
#define STRING2(x) #x
#define STRING(x) STRING2(x)
#include STRING(MODEL.h)

static int fail(const char *what, const char *message)
{
    fprintf(stderr, "%s: %s\n", what, message ? message : "(no message)");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) return fail("usage", "run_model inputs.bin outputs.bin");
    enum { MAX_TENSORS = 64 };
    const int n_in = API(_num_inputs), n_out = API(_num_outputs);
    if (n_in > MAX_TENSORS || n_out > MAX_TENSORS) return fail("model", "too many tensors");
    void *inputs[MAX_TENSORS], *outputs[MAX_TENSORS];
    FILE *in = fopen(argv[1], "rb");
    if (in == NULL) return fail("open", argv[1]);
    for (int i = 0; i < n_in; ++i) {
        inputs[i] = malloc(API(_input_bytes)[i] + 1);
        if (inputs[i] == NULL) return fail("malloc", "input");
        if (fread(inputs[i], 1, API(_input_bytes)[i], in) != API(_input_bytes)[i])
            return fail("read", argv[1]);
    }
    fclose(in);
    for (int i = 0; i < n_out; ++i) {
        outputs[i] = malloc(API(_output_bytes)[i] + 1);
        if (outputs[i] == NULL) return fail("malloc", "output");
    }
    API(_model) *model = NULL;
    if (API(_create)(&model) != 0) return fail("create", API(_last_error)(NULL));
    for (int pass = 0; pass < 2; ++pass)
        if (API(_run)(model, (const void *const *)inputs, outputs) != 0)
            return fail("run", API(_last_error)(model));
    fprintf(stderr, "cpu_isa %s\n", API(_cpu_isa)(model));
    API(_destroy)(model);
    FILE *out = fopen(argv[2], "wb");
    if (out == NULL) return fail("open", argv[2]);
    for (int i = 0; i < n_out; ++i) {
        if (fwrite(outputs[i], 1, API(_output_bytes)[i], out) != API(_output_bytes)[i])
            return fail("write", argv[2]);
        free(outputs[i]);
    }
    for (int i = 0; i < n_in; ++i) free(inputs[i]);
    return fclose(out) != 0;
}
