/* Call a compiled model from C: the whole C API in one page.
 *
 *   buildgen build                                   # builds build/mlp/cpu/libmlp.so
 *   cc -O2 examples/run_mlp.c -Ibuild/mlp/cpu/include \
 *      -Lbuild/mlp/cpu -lmlp -Wl,-rpath,$PWD/build/mlp/cpu -o run_mlp
 *   ./run_mlp
 *
 * The input is a fixed pattern, x[i] = ((i % 17) - 8) / 8 (exact in float32), so another
 * program can rebuild it and check the printed outputs: one line per output,
 * "<name> <n>" and then n values.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mlp.h"

int main(void) {
    mlp_model *model = NULL;
    if (mlp_create(&model) != 0) {
        fprintf(stderr, "mlp_create: %s\n", mlp_last_error(NULL));
        return 1;
    }

    /* The library describes its own inputs and outputs: no sizes are hard-coded here. */
    void *inputs[MLP_NUM_INPUTS];
    void *outputs[MLP_NUM_OUTPUTS];
    for (int i = 0; i < mlp_num_inputs; i++) {
        size_t n = mlp_input_bytes[i] / sizeof(float);
        float *x = malloc(mlp_input_bytes[i]);
        if (x == NULL) return 1;
        for (size_t k = 0; k < n; k++) x[k] = (float)((int)(k % 17) - 8) / 8.0f;
        inputs[i] = x;
    }
    for (int i = 0; i < mlp_num_outputs; i++) {
        outputs[i] = malloc(mlp_output_bytes[i]);
        if (outputs[i] == NULL) return 1;
    }

    if (mlp_run(model, (const void *const *)inputs, outputs) != 0) {
        fprintf(stderr, "mlp_run: %s\n", mlp_last_error(model));
        mlp_destroy(model);
        return 1;
    }

    for (int i = 0; i < mlp_num_outputs; i++) {
        size_t n = mlp_output_bytes[i] / sizeof(float);
        const float *y = outputs[i];
        printf("%s %zu\n", mlp_output_names[i], n);
        for (size_t k = 0; k < n; k++) printf("%.9g%c", y[k], k + 1 == n ? '\n' : ' ');
    }

    for (int i = 0; i < mlp_num_inputs; i++) free(inputs[i]);
    for (int i = 0; i < mlp_num_outputs; i++) free(outputs[i]);
    mlp_destroy(model);
    return 0;
}
