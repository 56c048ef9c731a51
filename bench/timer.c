/* Time one compiled model's <model>_run from C, without Python in the loop.
 *
 *   bg_timer <path/to/libM.so> <M> <warmup> <runs>
 *
 * The library is dlopen'ed and described by its own tables (<M>_num_inputs,
 * <M>_input_bytes, ...), so one binary times every model. Inputs are a fixed pattern of
 * small float32 values (no denormals, no NaN) -- timing does not depend on the values.
 * Prints one line: "median_us <x> min_us <y> runs <n>".
 */
#define _POSIX_C_SOURCE 199309L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*create_fn)(void **);
typedef int (*run_fn)(void *, const void *const *, void *const *);
typedef void (*destroy_fn)(void *);
typedef const char *(*error_fn)(const void *);

static void *sym(void *lib, const char *model, const char *suffix) {
    char name[256];
    snprintf(name, sizeof name, "%s_%s", model, suffix);
    void *p = dlsym(lib, name);
    if (p == NULL) {
        fprintf(stderr, "bg_timer: missing symbol %s\n", name);
        exit(2);
    }
    return p;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Fill a buffer with a pattern valid for its dtype; int64 inputs (indices) get zeros. */
static void *make_buffer(size_t bytes, const char *dtype) {
    void *buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (buf == NULL) exit(2);
    memset(buf, 0, bytes);
    if (strcmp(dtype, "float32") == 0) {
        float *f = buf;
        for (size_t k = 0; k < bytes / sizeof(float); k++) f[k] = (float)((int)(k % 17) - 8) / 8.0f;
    }
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s <libM.so> <M> <warmup> <runs>\n", argv[0]);
        return 2;
    }
    const char *model = argv[2];
    int warmup = atoi(argv[3]), runs = atoi(argv[4]);
    if (runs < 1 || warmup < 0) {
        fprintf(stderr, "bg_timer: need runs >= 1 and warmup >= 0\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "bg_timer: %s\n", dlerror());
        return 2;
    }
    create_fn create = (create_fn)sym(lib, model, "create");
    run_fn run = (run_fn)sym(lib, model, "run");
    destroy_fn destroy = (destroy_fn)sym(lib, model, "destroy");
    error_fn last_error = (error_fn)sym(lib, model, "last_error");
    int n_in = *(const int *)sym(lib, model, "num_inputs");
    int n_out = *(const int *)sym(lib, model, "num_outputs");
    const size_t *in_bytes = sym(lib, model, "input_bytes");
    const size_t *out_bytes = sym(lib, model, "output_bytes");
    const char *const *in_dtypes = sym(lib, model, "input_dtypes");
    const char *const *out_dtypes = sym(lib, model, "output_dtypes");

    void *m = NULL;
    if (create(&m) != 0) {
        fprintf(stderr, "bg_timer: create: %s\n", last_error(NULL));
        return 1;
    }
    void **ins = calloc((size_t)n_in + 1, sizeof(void *));
    void **outs = calloc((size_t)n_out + 1, sizeof(void *));
    double *times = calloc((size_t)runs, sizeof(double));
    if (ins == NULL || outs == NULL || times == NULL) return 2;
    for (int i = 0; i < n_in; i++) ins[i] = make_buffer(in_bytes[i], in_dtypes[i]);
    for (int i = 0; i < n_out; i++) outs[i] = make_buffer(out_bytes[i], out_dtypes[i]);

    for (int r = -warmup; r < runs; r++) {
        double t0 = now_us();
        if (run(m, (const void *const *)ins, outs) != 0) {
            fprintf(stderr, "bg_timer: run: %s\n", last_error(m));
            return 1;
        }
        double t1 = now_us();
        if (r >= 0) times[r] = t1 - t0;
    }
    qsort(times, (size_t)runs, sizeof(double), cmp_double);
    double median = runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
    printf("median_us %.3f min_us %.3f runs %d\n", median, times[0], runs);

    destroy(m);
    for (int i = 0; i < n_in; i++) free(ins[i]);
    for (int i = 0; i < n_out; i++) free(outs[i]);
    free(ins);
    free(outs);
    free(times);
    dlclose(lib);
    return 0;
}
