/* Layouts, constants and post-ops for the onednn backend's modules (see bg_onednn.h).
 *
 * bg_dnnl_read / bg_dnnl_write give a primitive the memory of a tensor in the layout the
 * primitive chose, adding a reorder step where the tensor's own layout differs.
 * bg_dnnl_constant reorders constant weights once, at create, into the chosen layout.
 * bg_dnnl_attr turns a group's fused steps into oneDNN post-ops.
 */
#ifndef BG_ONEDNN_LAYOUT_H
#define BG_ONEDNN_LAYOUT_H

#include "bg_onednn.h"

/* Append a step that copies `from` into `to`, converting the layout. */
static inline int bg_dnnl_reorder(bg_dnnl_module *m, bg_dnnl_region *r, dnnl_memory_t from,
                           dnnl_memory_t to, const char *what)
{
    const_dnnl_memory_desc_t a, b;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t primitive;
    BG_DNNL_TRY(m, what, dnnl_memory_get_memory_desc(from, &a));
    BG_DNNL_TRY(m, what, dnnl_memory_get_memory_desc(to, &b));
    BG_DNNL_TRY(m, what, dnnl_reorder_primitive_desc_create(&pd, a, m->engine, b, m->engine, NULL));
    dnnl_status_t status = dnnl_primitive_create(&primitive, pd);
    dnnl_primitive_desc_destroy(pd);
    BG_DNNL_TRY(m, what, status);
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return bg_dnnl_add_step(m, r, primitive, args, 2, what);
}

/* A new memory *out in layout `want`, filled from `from` by a reorder step. */
static inline int bg_dnnl_reordered(bg_dnnl_module *m, bg_dnnl_region *r, dnnl_memory_t from,
                                    const_dnnl_memory_desc_t want, dnnl_memory_t *out,
                                    const char *what)
{
    if (bg_dnnl_memory(m, want, DNNL_MEMORY_ALLOCATE, out, what) != 0) return -1;
    return bg_dnnl_reorder(m, r, from, *out, what);
}

static inline const_dnnl_memory_desc_t bg_dnnl_md_of(dnnl_memory_t memory)
{
    const_dnnl_memory_desc_t md = NULL;
    dnnl_memory_get_memory_desc(memory, &md);
    return md;
}

/* Tensor t as a plain operand of dims (ndims, dims): its memory if that is what it is, else a
 * dense view (a reshape adding or dropping unit dims) of a plain tensor. */
static inline int bg_dnnl_operand(bg_dnnl_module *m, bg_dnnl_region *r, bg_dnnl_tensor *t, int ndims,
                           const dnnl_dim_t *dims, dnnl_memory_t *out)
{
    if (t->memory == NULL) return bg_dnnl_fail(m->env, t->spec->name, "read before it is written");
    if (t->spec->flexible) {
        *out = t->memory;
        return 0;
    }
    dnnl_memory_desc_t md;
    BG_DNNL_TRY(m, t->spec->name, bg_dnnl_plain_md(&md, ndims, dims));
    int rc = 0;
    if (dnnl_memory_desc_equal(md, bg_dnnl_md_of(t->memory)))
        *out = t->memory;
    else
        rc = bg_dnnl_view(m, r, t, md, out);
    dnnl_memory_desc_destroy(md);
    return rc;
}

/* The memory a primitive reads t from, in layout `want`: t's own when the layouts agree, a
 * view when t is plain and `want` is a reshape of it, else a reorder into a temporary. */
static inline int bg_dnnl_read(bg_dnnl_module *m, bg_dnnl_region *r, bg_dnnl_tensor *t,
                        const_dnnl_memory_desc_t want, dnnl_memory_t *out, const char *what)
{
    if (t->memory == NULL) return bg_dnnl_fail(m->env, t->spec->name, "read before it is written");
    const_dnnl_memory_desc_t have = bg_dnnl_md_of(t->memory);
    if (dnnl_memory_desc_equal(have, want)) {
        *out = t->memory;
        return 0;
    }
    if (!t->spec->flexible && bg_dnnl_is_dense(want)
        && dnnl_memory_desc_get_size(want) == dnnl_memory_desc_get_size(have))
        return bg_dnnl_view(m, r, t, want, out);
    if (t->copy != NULL && dnnl_memory_desc_equal(bg_dnnl_md_of(t->copy), want)) {
        *out = t->copy; /* a tensor is written once: the copy made for an earlier reader holds */
        return 0;
    }
    if (bg_dnnl_reordered(m, r, t->memory, want, out, what) != 0) return -1;
    if (t->copy == NULL) t->copy = *out;
    return 0;
}

/* The memory a primitive writes t into when it produces layout `chosen`. A flexible t takes
 * `chosen` (in its arena space when that is large enough); a plain t is written directly, or
 * through a temporary that *then (else NULL) must be reordered into t after the primitive. */
static inline int bg_dnnl_write(bg_dnnl_module *m, bg_dnnl_region *r, bg_dnnl_tensor *t,
                         const_dnnl_memory_desc_t chosen, dnnl_memory_t *out, dnnl_memory_t *then,
                         const char *what)
{
    *then = NULL;
    if (t->spec->flexible) {
        if (t->memory != NULL) return bg_dnnl_fail(m->env, t->spec->name, "written twice");
        void *data = dnnl_memory_desc_get_size(chosen) <= t->spec->bytes
                         ? (void *)(m->env->scratch + t->spec->offset)
                         : DNNL_MEMORY_ALLOCATE;
        if (bg_dnnl_memory(m, chosen, data, &t->memory, what) != 0) return -1;
        *out = t->memory;
        return 0;
    }
    const_dnnl_memory_desc_t have = bg_dnnl_md_of(t->memory);
    if (dnnl_memory_desc_equal(have, chosen)) {
        *out = t->memory;
        return 0;
    }
    if (bg_dnnl_is_dense(chosen)
        && dnnl_memory_desc_get_size(chosen) == dnnl_memory_desc_get_size(have))
        return bg_dnnl_view(m, r, t, chosen, out);
    *then = t->memory;
    return bg_dnnl_memory(m, chosen, DNNL_MEMORY_ALLOCATE, out, what);
}

/* bg_dnnl_write for a flexible t kept in the module's activation layout although the
 * primitive writes `chosen`: the primitive writes a temporary *out, which a reorder step
 * copies into t (*then). */
static inline int bg_dnnl_write_converted(bg_dnnl_module *m, bg_dnnl_region *r, bg_dnnl_tensor *t,
                                          const_dnnl_memory_desc_t chosen, dnnl_memory_t *out,
                                          dnnl_memory_t *then, const char *what)
{
    dnnl_memory_desc_t md;
    dnnl_memory_t none;
    BG_DNNL_TRY(m, what, bg_dnnl_activation_md(m, &md, t->spec->ndims, t->spec->dims));
    int rc = bg_dnnl_write(m, r, t, md, then, &none, what);
    dnnl_memory_desc_destroy(md);
    if (rc != 0) return rc;
    return bg_dnnl_memory(m, chosen, DNNL_MEMORY_ALLOCATE, out, what);
}

/* A constant (weights at env->weights + offset, or a static array) as a pointer. */
static inline const float *bg_dnnl_const_data(const bg_dnnl_module *m, const float *array, long offset)
{
    if (array != NULL) return array;
    return offset >= 0 ? (const float *)(m->env->weights + offset) : NULL;
}

/* Constant weights `data`, plain in layout `plain`, in layout `want`, made once now. With
 * `scale`, element i is first multiplied by scale[(i / inner) % channels] (a folded
 * BatchNormalization or Gemm's alpha); `data` must then be dense. */
static inline int bg_dnnl_constant(bg_dnnl_module *m, const_dnnl_memory_desc_t want,
                            const_dnnl_memory_desc_t plain, const float *data, const float *scale,
                            long channels, long inner, dnnl_memory_t *out, const char *what)
{
    float *scaled = NULL;
    if (scale != NULL) {
        size_t count = dnnl_memory_desc_get_size(plain) / sizeof(float);
        scaled = (float *)malloc(count * sizeof(float));
        if (scaled == NULL) return bg_dnnl_fail(m->env, what, "out of memory");
        for (size_t i = 0; i < count; ++i) scaled[i] = data[i] * scale[(i / inner) % channels];
        data = scaled;
    } else if (dnnl_memory_desc_equal(plain, want)) {
        return bg_dnnl_memory(m, want, (void *)data, out, what); /* used in place */
    }
    dnnl_memory_t source = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_status_t status = dnnl_memory_create(&source, plain, m->engine, (void *)data);
    if (status == dnnl_success)
        status = dnnl_reorder_primitive_desc_create(&pd, plain, m->engine, want, m->engine, NULL);
    if (status == dnnl_success) status = dnnl_primitive_create(&reorder, pd);
    void *bytes = status == dnnl_success ? bg_dnnl_constant_bytes(m, want) : NULL;
    int rc = 0;
    if (status == dnnl_success)
        rc = bytes != NULL ? bg_dnnl_memory(m, want, bytes, out, what)
                           : bg_dnnl_fail(m->env, what, "out of memory");
    if (status == dnnl_success && rc == 0) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, source}, {DNNL_ARG_TO, *out}};
        status = dnnl_primitive_execute(reorder, m->stream, 2, args);
        if (status == dnnl_success) status = dnnl_stream_wait(m->stream);
    }
    if (reorder) dnnl_primitive_destroy(reorder);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (source) dnnl_memory_destroy(source);
    free(scaled);
    if (rc != 0) return rc;
    BG_DNNL_TRY(m, what, status);
    return 0;
}

/* One fused step of a group, as a oneDNN post-op. */
enum bg_dnnl_post_kind { BG_DNNL_ELTWISE, BG_DNNL_BINARY, BG_DNNL_SUM };

typedef struct bg_dnnl_post {
    int kind;           /* enum bg_dnnl_post_kind */
    int alg;            /* dnnl_alg_kind_t of ELTWISE / BINARY */
    float alpha, beta;  /* ELTWISE parameters */
    int tensor;         /* BINARY / SUM: the region tensor it reads, or -1 for a constant */
    const float *array; /* BINARY constant: a static array, or NULL for env->weights + offset */
    long offset;
    int ndims;          /* BINARY: the operand's dims, broadcast (1) where it is */
    dnnl_dim_t dims[DNNL_MAX_NDIMS];
    int in_place;       /* SUM: nothing reads the tensor afterwards, so the primitive may
                           accumulate into its bytes instead of a copy of them */
} bg_dnnl_post;

/* Everything a primitive needs besides its own arguments. */
typedef struct bg_dnnl_extras {
    dnnl_primitive_attr_t attr;
    int nargs;
    dnnl_exec_arg_t args[BG_DNNL_MAX_ARGS / 2]; /* post-op operands */
    dnnl_memory_t sum;                          /* SUM: the tensor to copy into dst first */
    int sum_tensor, sum_in_place;               /* SUM: its region tensor; may dst take it? */
} bg_dnnl_extras;

/* A flexible dst that may take over the bytes of the SUM residual it accumulates onto: when
 * nothing reads the residual afterwards and the layouts agree, dst becomes that memory and
 * the residual copy is not needed (x->sum is cleared). Returns 1 when it did. */
static inline int bg_dnnl_sum_in_place(bg_dnnl_region *r, bg_dnnl_tensor *dst,
                                       const_dnnl_memory_desc_t chosen, bg_dnnl_extras *x)
{
    if (x->sum == NULL || !x->sum_in_place || !dst->spec->flexible || dst->memory != NULL)
        return 0;
    bg_dnnl_tensor *residual = &r->tensors[x->sum_tensor];
    if (!residual->spec->flexible || residual->memory != x->sum
        || !dnnl_memory_desc_equal(bg_dnnl_md_of(x->sum), chosen))
        return 0;
    dst->memory = x->sum;
    x->sum = NULL;
    return 1;
}

/* The attribute of a primitive with post-ops `posts`: user scratchpad, the module's fpmath
 * mode, and each post-op's operand memory. */
static inline int bg_dnnl_attr(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_post *posts,
                        int nposts, bg_dnnl_extras *x, const char *what)
{
    memset(x, 0, sizeof *x);
    dnnl_post_ops_t ops;
    BG_DNNL_TRY(m, what, dnnl_primitive_attr_create(&x->attr));
    BG_DNNL_TRY(m, what, dnnl_primitive_attr_set_scratchpad_mode(x->attr, dnnl_scratchpad_mode_user));
    BG_DNNL_TRY(m, what, dnnl_primitive_attr_set_fpmath_mode(x->attr, m->fpmath));
    BG_DNNL_TRY(m, what, dnnl_post_ops_create(&ops));
    dnnl_status_t status = dnnl_success;
    int rc = 0;
    for (int i = 0; i < nposts && status == dnnl_success && rc == 0; ++i) {
        const bg_dnnl_post *p = &posts[i];
        dnnl_memory_t operand = NULL;
        if (p->kind == BG_DNNL_ELTWISE) {
            status = dnnl_post_ops_append_eltwise(ops, (dnnl_alg_kind_t)p->alg, p->alpha, p->beta);
            continue;
        }
        if (p->tensor >= 0) {
            rc = bg_dnnl_operand(m, r, &r->tensors[p->tensor], p->ndims, p->dims, &operand);
        } else {
            dnnl_memory_desc_t md;
            status = bg_dnnl_plain_md(&md, p->ndims, p->dims);
            if (status != dnnl_success) break;
            void *data = (void *)bg_dnnl_const_data(m, p->array, p->offset);
            rc = bg_dnnl_memory(m, md, data, &operand, what);
            dnnl_memory_desc_destroy(md);
        }
        if (rc != 0) break;
        if (p->kind == BG_DNNL_SUM) {
            status = dnnl_post_ops_append_sum(ops, 1.0f, 0, dnnl_data_type_undef);
            x->sum = operand;
            x->sum_tensor = p->tensor;
            x->sum_in_place = p->in_place;
            continue;
        }
        status = dnnl_post_ops_append_binary(ops, (dnnl_alg_kind_t)p->alg, bg_dnnl_md_of(operand));
        x->args[x->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1,
                                                operand};
    }
    if (status == dnnl_success && rc == 0)
        status = dnnl_primitive_attr_set_post_ops(x->attr, ops);
    dnnl_post_ops_destroy(ops);
    if (rc != 0 || status != dnnl_success) {
        dnnl_primitive_attr_destroy(x->attr);
        x->attr = NULL;
    }
    if (rc != 0) return rc;
    BG_DNNL_TRY(m, what, status);
    return 0;
}

/* Create the primitive of `pd` (destroyed here, as is x->attr) and append its steps: the
 * residual copy of a SUM post-op into `dst`, the primitive with `args` plus the post-op
 * operands and the scratchpad, then the reorder of `dst` into `then` when there is one. */
static inline int bg_dnnl_finish(bg_dnnl_module *m, bg_dnnl_region *r, dnnl_primitive_desc_t pd,
                          bg_dnnl_extras *x, dnnl_exec_arg_t *args, int nargs, dnnl_memory_t dst,
                          dnnl_memory_t then, const char *what)
{
    dnnl_primitive_t primitive = NULL;
    const_dnnl_memory_desc_t pad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t pad_bytes = pad ? dnnl_memory_desc_get_size(pad) : 0;
    dnnl_memory_t scratchpad = NULL;
    int rc = 0;
    if (pad_bytes > 0) {
        rc = bg_dnnl_memory(m, pad, DNNL_MEMORY_NONE, &scratchpad, what);
        if (rc == 0 && bg_dnnl_grow((void **)&m->scratchpads, m->nscratchpads,
                                    &m->scratchpad_capacity, sizeof *m->scratchpads) != 0)
            rc = bg_dnnl_fail(m->env, what, "out of memory");
        if (rc == 0) m->scratchpads[m->nscratchpads++] = scratchpad;
        if (pad_bytes > m->scratchpad_bytes) m->scratchpad_bytes = pad_bytes;
    }
    dnnl_status_t status = rc == 0 ? dnnl_primitive_create(&primitive, pd) : dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(x->attr);
    if (rc != 0) return rc;
    BG_DNNL_TRY(m, what, status);
    for (int i = 0; i < x->nargs; ++i) args[nargs++] = x->args[i];
    if (scratchpad != NULL) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratchpad};
    if (x->sum != NULL && bg_dnnl_reorder(m, r, x->sum, dst, what) != 0) {
        dnnl_primitive_destroy(primitive);
        return -1;
    }
    if (bg_dnnl_add_step(m, r, primitive, args, nargs, what) != 0) return -1;
    return then != NULL ? bg_dnnl_reorder(m, r, dst, then, what) : 0;
}

#endif
