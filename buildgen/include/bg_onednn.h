/* Runtime of the modules that the onednn backend generates (oneDNN 3.x C API).
 *
 * A module's create function builds every primitive once: it describes each region's
 * tensors (bg_dnnl_tensor_spec), then calls one helper per group (bg_onednn_ops.h), which
 * creates the primitive with the layouts oneDNN prefers, reorders constant weights into them
 * once, and records the steps a run executes: the primitive, plus a reorder wherever a
 * tensor's layout differs from the one a primitive wants. A run binds the region's inputs
 * and outputs to its memory objects and executes the recorded steps; nothing is created or
 * allocated then.
 *
 * Layouts: tensors crossing a region's edge are plain (row-major, as ONNX has them). A
 * tensor inside a region marked `flexible` takes whatever layout its producer picks (e.g.
 * nChw8c after a convolution) and is read in that layout by the next convolution or pooling,
 * so a chain of them never converts back to plain in between.
 *
 * Memory: internal tensors live in the model's arena at offsets the generator planned (an
 * upper bound on their size in any layout; a layout that needs more gets its own
 * allocation). Weights reordered at create, temporaries of reorders and the scratchpad
 * that every primitive shares (user scratchpad mode) belong to the module.
 *
 * Header-only (static functions): each generated module compiles its own copy.
 */
#ifndef BG_ONEDNN_H
#define BG_ONEDNN_H

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "bg_alloc.h" /* bg_alloc_constants: the weights reordered at create */
#include "buildgen_abi.h"

/* oneDNN's name for the code that implements `pd` ("brgconv:avx2", "ref:any"); "" when
 * it does not say. */
static inline const char *bg_dnnl_impl_name(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
        return "";
    return impl != NULL ? impl : "";
}

#ifdef BG_DNNL_PROFILE
#include "bg_onednn_profile.h"
#endif

#define BG_DNNL_MAX_ARGS 40

enum bg_dnnl_role { BG_DNNL_IN, BG_DNNL_OUT, BG_DNNL_INTERNAL };

/* The layout convolutions read and write activations in (the `activation_layout` attribute):
 * channels-last suits oneDNN's brgemm convolutions (AVX2 and later), `any` lets each
 * convolution pick (often a channel-blocked layout), plain keeps ONNX's NCHW throughout. */
enum bg_dnnl_layout { BG_DNNL_CHANNELS_LAST, BG_DNNL_ANY, BG_DNNL_PLAIN };

/* One tensor of a region, as the generator describes it. */
typedef struct bg_dnnl_tensor_spec {
    const char *name;       /* the ONNX tensor, for messages */
    int role;               /* enum bg_dnnl_role */
    int index;              /* in[index] / out[index] for BG_DNNL_IN / BG_DNNL_OUT */
    int flexible;           /* may take the layout its producer prefers */
    size_t offset, bytes;   /* internal tensors: arena space (env->scratch + offset) */
    int ndims;
    dnnl_dim_t dims[DNNL_MAX_NDIMS];
} bg_dnnl_tensor_spec;

typedef struct bg_dnnl_tensor {
    const bg_dnnl_tensor_spec *spec;
    dnnl_memory_t memory;   /* its layout and bytes; NULL until its producer runs at create */
    dnnl_memory_t copy;     /* NULL, or its copy in another layout that a reorder step makes
                             * for the first reader wanting it, which later ones share */
} bg_dnnl_tensor;

typedef struct bg_dnnl_step {
    dnnl_primitive_t primitive;
    int nargs;
    dnnl_exec_arg_t args[BG_DNNL_MAX_ARGS];
#ifdef BG_DNNL_PROFILE
    int timer; /* its index in the module's timers */
#endif
} bg_dnnl_step;

typedef struct bg_dnnl_binding { dnnl_memory_t memory; int role, index; } bg_dnnl_binding;

typedef struct bg_dnnl_region {
    bg_dnnl_tensor *tensors;
    int ntensors;
    bg_dnnl_step *steps;
    int nsteps, step_capacity;
    bg_dnnl_binding *bindings; /* memories over in[] / out[]: their handles are set per run */
    int nbindings, binding_capacity;
#ifdef BG_DNNL_PROFILE
    const char *id; /* "r3": its steps' labels start with it */
#endif
} bg_dnnl_region;

typedef struct bg_dnnl_module {
    bg_env *env;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int threads;                 /* OpenMP threads for create and every run; 0 = as is */
    dnnl_fpmath_mode_t fpmath;
    int layout;                  /* enum bg_dnnl_layout */
    bg_dnnl_region *regions;
    int nregions;
    dnnl_primitive_t *primitives; /* everything created, released by bg_dnnl_module_free */
    int nprimitives, primitive_capacity;
    dnnl_memory_t *memories;
    int nmemories, memory_capacity;
    void **constants;            /* the bytes of the weights reordered at create */
    int nconstants, constant_capacity;
    dnnl_memory_t *scratchpads;  /* every primitive's scratchpad, bound to one buffer */
    int nscratchpads, scratchpad_capacity;
    size_t scratchpad_bytes;
    void *scratchpad;
#ifdef BG_DNNL_PROFILE
    bg_dnnl_timers timers;
#endif
} bg_dnnl_module;

static inline const char *bg_dnnl_status_name(dnnl_status_t s)
{
    switch (s) {
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "no implementation for these shapes and layouts";
    case dnnl_last_impl_reached: return "last implementation reached";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "error";
    }
}

/* Write "onednn: <what>: <reason>" to the model's error buffer; returns -1. */
static inline int bg_dnnl_fail(bg_env *env, const char *what, const char *reason)
{
    if (env != NULL && env->error != NULL && env->error_size > 0)
        snprintf(env->error, env->error_size, "onednn: %s: %s", what, reason);
    return -1;
}

#define BG_DNNL_TRY(mod, what, call)                                                        \
    do {                                                                                     \
        dnnl_status_t bg_status_ = (call);                                                   \
        if (bg_status_ != dnnl_success)                                                      \
            return bg_dnnl_fail((mod)->env, (what), bg_dnnl_status_name(bg_status_));       \
    } while (0)

/* Grow *items (of *count, room for *capacity) to hold one more of `size` bytes. */
static inline int bg_dnnl_grow(void **items, int count, int *capacity, size_t size)
{
    if (count < *capacity) return 0;
    int wanted = *capacity ? 2 * *capacity : 8;
    void *more = realloc(*items, (size_t)wanted * size);
    if (more == NULL) return -1;
    *items = more;
    *capacity = wanted;
    return 0;
}

/* Bytes for a constant of layout `md`, owned by m (bg_alloc.h: in huge pages when large). */
static inline void *bg_dnnl_constant_bytes(bg_dnnl_module *m, const_dnnl_memory_desc_t md)
{
    if (bg_dnnl_grow((void **)&m->constants, m->nconstants, &m->constant_capacity,
                     sizeof *m->constants) != 0)
        return NULL;
    void *bytes = bg_alloc_constants(dnnl_memory_desc_get_size(md));
    if (bytes != NULL) m->constants[m->nconstants++] = bytes;
    return bytes;
}

static inline int bg_dnnl_own_memory(bg_dnnl_module *m, dnnl_memory_t memory)
{
    if (bg_dnnl_grow((void **)&m->memories, m->nmemories, &m->memory_capacity,
                     sizeof *m->memories) != 0) {
        dnnl_memory_destroy(memory);
        return bg_dnnl_fail(m->env, "create", "out of memory");
    }
    m->memories[m->nmemories++] = memory;
    return 0;
}

/* A memory of layout `md` over `data` (DNNL_MEMORY_ALLOCATE: its own bytes), owned by m. */
static inline int bg_dnnl_memory(bg_dnnl_module *m, const_dnnl_memory_desc_t md, void *data,
                          dnnl_memory_t *out, const char *what)
{
    BG_DNNL_TRY(m, what, dnnl_memory_create(out, md, m->engine, data));
    return bg_dnnl_own_memory(m, *out);
}

static inline int bg_dnnl_bind(bg_dnnl_module *m, bg_dnnl_region *r, dnnl_memory_t memory, int role,
                        int index)
{
    if (bg_dnnl_grow((void **)&r->bindings, r->nbindings, &r->binding_capacity,
                     sizeof *r->bindings) != 0)
        return bg_dnnl_fail(m->env, "create", "out of memory");
    r->bindings[r->nbindings++] = (bg_dnnl_binding){memory, role, index};
    return 0;
}

/* Append a step executing `primitive` (owned by m from now on) with `args`. */
static inline int bg_dnnl_add_step(bg_dnnl_module *m, bg_dnnl_region *r, dnnl_primitive_t primitive,
                            const dnnl_exec_arg_t *args, int nargs, const char *what)
{
    if (bg_dnnl_grow((void **)&m->primitives, m->nprimitives, &m->primitive_capacity,
                     sizeof *m->primitives) != 0) {
        dnnl_primitive_destroy(primitive);
        return bg_dnnl_fail(m->env, what, "out of memory");
    }
    m->primitives[m->nprimitives++] = primitive;
    if (nargs > BG_DNNL_MAX_ARGS) return bg_dnnl_fail(m->env, what, "too many arguments");
    if (bg_dnnl_grow((void **)&r->steps, r->nsteps, &r->step_capacity, sizeof *r->steps) != 0)
        return bg_dnnl_fail(m->env, what, "out of memory");
    bg_dnnl_step *step = &r->steps[r->nsteps++];
    step->primitive = primitive;
    step->nargs = nargs;
    memcpy(step->args, args, (size_t)nargs * sizeof *args);
#ifdef BG_DNNL_PROFILE
    step->timer = bg_dnnl_timer_add(&m->timers, r->id, what, primitive);
    if (step->timer < 0) return bg_dnnl_fail(m->env, what, "out of memory");
#endif
    return 0;
}

/* Row-major strides of `dims`. */
static inline void bg_dnnl_dense_strides(int ndims, const dnnl_dim_t *dims, dnnl_dims_t strides)
{
    dnnl_dim_t stride = 1;
    for (int d = ndims - 1; d >= 0; --d) {
        strides[d] = stride;
        stride *= dims[d];
    }
}

static inline dnnl_status_t bg_dnnl_plain_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims)
{
    dnnl_dims_t shape, strides;
    memcpy(shape, dims, (size_t)ndims * sizeof *dims);
    bg_dnnl_dense_strides(ndims, dims, strides);
    return dnnl_memory_desc_create_with_strides(md, ndims, shape, dnnl_f32, strides);
}

static inline dnnl_status_t bg_dnnl_any_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims)
{
    dnnl_dims_t shape;
    memcpy(shape, dims, (size_t)ndims * sizeof *dims);
    return dnnl_memory_desc_create_with_tag(md, ndims, shape, dnnl_f32, dnnl_format_tag_any);
}

/* The md of an activation in the module's layout (a convolution's src or dst). */
static inline dnnl_status_t bg_dnnl_activation_md(const bg_dnnl_module *m, dnnl_memory_desc_t *md,
                                                  int ndims, const dnnl_dim_t *dims)
{
    static const dnnl_format_tag_t channels_last[] = {dnnl_nwc, dnnl_nhwc, dnnl_ndhwc};
    if (m->layout == BG_DNNL_PLAIN || ndims < 3 || ndims > 5) return bg_dnnl_plain_md(md, ndims, dims);
    dnnl_dims_t shape;
    memcpy(shape, dims, (size_t)ndims * sizeof *dims);
    dnnl_format_tag_t tag = m->layout == BG_DNNL_ANY ? dnnl_format_tag_any : channels_last[ndims - 3];
    return dnnl_memory_desc_create_with_tag(md, ndims, shape, dnnl_f32, tag);
}

/* Whether `md` blocks a dimension (nChw16c), as no plain or channels-last layout does. */
static inline int bg_dnnl_is_blocked(const_dnnl_memory_desc_t md)
{
    int nblks = 0;
    dnnl_memory_desc_query(md, dnnl_query_inner_nblks_s32, &nblks);
    return nblks != 0;
}

/* Whether `md` is plain row-major (no blocking, dense strides): a reshape of a plain tensor. */
static inline int bg_dnnl_is_dense(const_dnnl_memory_desc_t md)
{
    dnnl_format_kind_t kind;
    int ndims = 0, nblks = 0;
    const dnnl_dims_t *dims = NULL, *strides = NULL;
    if (dnnl_memory_desc_query(md, dnnl_query_format_kind, &kind) != dnnl_success
        || kind != dnnl_blocked)
        return 0;
    dnnl_memory_desc_query(md, dnnl_query_ndims_s32, &ndims);
    dnnl_memory_desc_query(md, dnnl_query_inner_nblks_s32, &nblks);
    dnnl_memory_desc_query(md, dnnl_query_dims, &dims);
    dnnl_memory_desc_query(md, dnnl_query_strides, &strides);
    if (nblks != 0) return 0;
    dnnl_dims_t dense;
    bg_dnnl_dense_strides(ndims, *dims, dense);
    for (int d = 0; d < ndims; ++d)
        if ((*dims)[d] != 1 && (*strides)[d] != dense[d]) return 0;
    return 1;
}

/* Where tensor t's bytes are: in[]/out[] (NULL now: bound per run) or its arena space. */
static inline void *bg_dnnl_tensor_data(bg_dnnl_module *m, const bg_dnnl_tensor *t)
{
    return t->spec->role == BG_DNNL_INTERNAL ? m->env->scratch + t->spec->offset : DNNL_MEMORY_NONE;
}

/* A memory of layout `md` over plain tensor t's bytes (a reshape or strided view of it). */
static inline int bg_dnnl_view(bg_dnnl_module *m, bg_dnnl_region *r, bg_dnnl_tensor *t,
                        const_dnnl_memory_desc_t md, dnnl_memory_t *out)
{
    if (bg_dnnl_memory(m, md, bg_dnnl_tensor_data(m, t), out, t->spec->name) != 0) return -1;
    if (t->spec->role == BG_DNNL_INTERNAL) return 0;
    return bg_dnnl_bind(m, r, *out, t->spec->role, t->spec->index);
}

/* Describe the region's tensors; plain ones get their memory now. */
static inline int bg_dnnl_region_init(bg_dnnl_module *m, bg_dnnl_region *r,
                               const bg_dnnl_tensor_spec *specs, int ntensors)
{
    r->tensors = (bg_dnnl_tensor *)calloc((size_t)(ntensors ? ntensors : 1), sizeof *r->tensors);
    if (r->tensors == NULL) return bg_dnnl_fail(m->env, "create", "out of memory");
    r->ntensors = ntensors;
    for (int i = 0; i < ntensors; ++i) {
        bg_dnnl_tensor *t = &r->tensors[i];
        t->spec = &specs[i];
        if (specs[i].flexible) continue;
        dnnl_memory_desc_t md;
        BG_DNNL_TRY(m, specs[i].name, bg_dnnl_plain_md(&md, specs[i].ndims, specs[i].dims));
        int rc = bg_dnnl_view(m, r, t, md, &t->memory);
        dnnl_memory_desc_destroy(md);
        if (rc != 0) return rc;
    }
    return 0;
}

static inline int bg_dnnl_module_init(bg_dnnl_module *m, bg_env *env, int threads, int fpmath,
                                      int layout, int nregions)
{
    memset(m, 0, sizeof *m);
    m->env = env;
    m->threads = threads;
    m->fpmath = (dnnl_fpmath_mode_t)fpmath;
    m->layout = layout;
    m->nregions = nregions;
    m->regions = (bg_dnnl_region *)calloc((size_t)(nregions ? nregions : 1), sizeof *m->regions);
    if (m->regions == NULL) return bg_dnnl_fail(env, "create", "out of memory");
    BG_DNNL_TRY(m, "create the CPU engine", dnnl_engine_create(&m->engine, dnnl_cpu, 0));
    BG_DNNL_TRY(m, "create a stream",
                dnnl_stream_create(&m->stream, m->engine, dnnl_stream_default_flags));
    return 0;
}

static inline void bg_dnnl_module_free(bg_dnnl_module *m)
{
#ifdef BG_DNNL_PROFILE
    bg_dnnl_timers_free(&m->timers);
#endif
    for (int i = m->nprimitives - 1; i >= 0; --i) dnnl_primitive_destroy(m->primitives[i]);
    for (int i = m->nmemories - 1; i >= 0; --i) dnnl_memory_destroy(m->memories[i]);
    for (int i = 0; i < m->nregions; ++i) {
        free(m->regions[i].tensors);
        free(m->regions[i].steps);
        free(m->regions[i].bindings);
    }
    if (m->stream) dnnl_stream_destroy(m->stream);
    if (m->engine) dnnl_engine_destroy(m->engine);
    free(m->regions);
    free(m->primitives);
    free(m->memories);
    for (int i = 0; i < m->nconstants; ++i) free(m->constants[i]);
    free(m->constants);
    free(m->scratchpads);
    free(m->scratchpad);
}

/* Once every primitive exists: one scratchpad buffer, as large as the largest asks. */
static inline int bg_dnnl_module_finish(bg_dnnl_module *m)
{
    if (m->scratchpad_bytes == 0) return 0;
    m->scratchpad = aligned_alloc(64, (m->scratchpad_bytes + 63) / 64 * 64);
    if (m->scratchpad == NULL) return bg_dnnl_fail(m->env, "create", "out of memory for the scratchpad");
    for (int i = 0; i < m->nscratchpads; ++i)
        BG_DNNL_TRY(m, "scratchpad", dnnl_memory_set_data_handle(m->scratchpads[i], m->scratchpad));
    return 0;
}

/* Sets the module's OpenMP thread count for the calling thread; returns the previous one. */
static inline int bg_dnnl_use_threads(const bg_dnnl_module *m)
{
    int previous = omp_get_max_threads();
    if (m->threads > 0 && m->threads != previous) omp_set_num_threads(m->threads);
    return previous;
}

static inline void bg_dnnl_restore_threads(const bg_dnnl_module *m, int previous)
{
    if (m->threads > 0 && m->threads != previous) omp_set_num_threads(previous);
}

/* Run one region: bind in[] and out[], then execute its steps in order. */
static inline int bg_dnnl_run(bg_dnnl_module *m, bg_dnnl_region *r, const void *const *in,
                       void *const *out, const char *what)
{
    for (int i = 0; i < r->nbindings; ++i) {
        const bg_dnnl_binding *b = &r->bindings[i];
        void *data = b->role == BG_DNNL_IN ? (void *)in[b->index] : out[b->index];
        BG_DNNL_TRY(m, what, dnnl_memory_set_data_handle(b->memory, data));
    }
    int previous = bg_dnnl_use_threads(m);
    dnnl_status_t status = dnnl_success;
    for (int i = 0; i < r->nsteps && status == dnnl_success; ++i) {
#ifdef BG_DNNL_PROFILE
        uint64_t start = bg_dnnl_clock(); /* CPU primitives are done when execute returns */
#endif
        status = dnnl_primitive_execute(r->steps[i].primitive, m->stream, r->steps[i].nargs,
                                        r->steps[i].args);
#ifdef BG_DNNL_PROFILE
        m->timers.ns[r->steps[i].timer] += bg_dnnl_clock() - start;
#endif
    }
    if (status == dnnl_success) status = dnnl_stream_wait(m->stream);
    bg_dnnl_restore_threads(m, previous);
    if (status != dnnl_success) return bg_dnnl_fail(m->env, what, bg_dnnl_status_name(status));
    return 0;
}

#endif
