/* The onednn backend's single-input primitives (part of bg_onednn_ops.h: include that
 * instead): pooling, eltwise, binary with a constant or second operand, softmax, layer
 * normalization, LRN, channel shuffle and resampling, each a `make` function for the
 * primitive descriptor that bg_dnnl_unary creates and records.
 */
#ifndef BG_ONEDNN_OPS_H
#error "include bg_onednn_ops.h, not bg_onednn_unary.h"
#endif
#ifndef BG_ONEDNN_UNARY_H
#define BG_ONEDNN_UNARY_H

/* The primitives below read their input in the layout it has and write `any` (pooling,
 * eltwise, binary) or plain (softmax, layer normalization). `make` creates the primitive
 * descriptor from (spec, src md, dst md, attr). */
typedef dnnl_status_t (*bg_dnnl_make_pd)(bg_dnnl_module *m, const void *spec,
                                         const_dnnl_memory_desc_t src, const_dnnl_memory_desc_t dst,
                                         const_dnnl_primitive_attr_t attr,
                                         dnnl_primitive_desc_t *pd);

typedef struct bg_dnnl_unary_spec {
    int src, dst;
    int plain;                         /* dst plain (else the layout the primitive picks) */
    int channels_last;                 /* a pooling after a first layer (bg_dnnl_conv_mds):
                                        * dst channels-last in such a module, not blocked */
    int ndims;                         /* > 0: view src and dst (plain) with these dims */
    dnnl_dim_t dims[DNNL_MAX_NDIMS];
} bg_dnnl_unary_spec;

/* src -> dst with `extra` arguments (a binary's second input, a norm's scale and shift). */
static inline int bg_dnnl_unary(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_unary_spec *u,
                         bg_dnnl_make_pd make, const void *spec, const dnnl_exec_arg_t *extra,
                         int nextra, const bg_dnnl_post *posts, int nposts, const char *what)
{
    bg_dnnl_tensor *src = &r->tensors[u->src], *dst = &r->tensors[u->dst];
    dnnl_memory_desc_t dst_md = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_t src_mem, dst_mem, then = NULL;
    bg_dnnl_extras x;
    if (u->ndims > 0 && bg_dnnl_operand(m, r, src, u->ndims, u->dims, &src_mem) != 0) return -1;
    if (u->ndims == 0) {
        if (src->memory == NULL) return bg_dnnl_fail(m->env, src->spec->name, "read before written");
        src_mem = src->memory;
    }
    if (bg_dnnl_attr(m, r, posts, nposts, &x, what) != 0) return -1;
    int rc = -1;
    int ndims = u->ndims > 0 ? u->ndims : dst->spec->ndims;
    const dnnl_dim_t *dims = u->ndims > 0 ? u->dims : dst->spec->dims;
    dnnl_status_t s = u->plain ? bg_dnnl_plain_md(&dst_md, ndims, dims)
                               : bg_dnnl_any_md(&dst_md, ndims, dims);
    if (s == dnnl_success) s = make(m, spec, bg_dnnl_md_of(src_mem), dst_md, x.attr, &pd);
    if (s != dnnl_success) {
        bg_dnnl_fail(m->env, what, bg_dnnl_status_name(s));
        goto done;
    }
    const_dnnl_memory_desc_t src_want = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const_dnnl_memory_desc_t src_given = bg_dnnl_md_of(src_mem);
    if (!dnnl_memory_desc_equal(src_want, src_given) /* make chose a layout (a pool) */
        && !(bg_dnnl_is_dense(src_want) && bg_dnnl_is_dense(src_given))) {
        if (bg_dnnl_reordered(m, r, src_mem, src_want, &src_mem, what) != 0) goto done;
    }
    if (u->ndims > 0) {
        if (bg_dnnl_view(m, r, dst, dst_md, &dst_mem) != 0) goto done;
    } else {
        const_dnnl_memory_desc_t chosen = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        int convert = u->channels_last && m->layout == BG_DNNL_CHANNELS_LAST
                      && dst->spec->flexible && bg_dnnl_is_blocked(chosen);
        if ((convert ? bg_dnnl_write_converted : bg_dnnl_write)(m, r, dst, chosen, &dst_mem, &then,
                                                                what) != 0)
            goto done;
    }
    dnnl_exec_arg_t args[BG_DNNL_MAX_ARGS] = {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_DST, dst_mem}};
    for (int i = 0; i < nextra; ++i) args[2 + i] = extra[i];
    rc = bg_dnnl_finish(m, r, pd, &x, args, 2 + nextra, dst_mem, then, what);
    pd = NULL;
    x.attr = NULL;
done:
    return bg_dnnl_release(pd, x.attr, dst_md, rc);
}

typedef struct bg_dnnl_pool_spec {
    int alg, spatial; /* dnnl_pooling_max / _avg_include_padding / _avg_exclude_padding */
    dnnl_dims_t strides, kernel, dilation, pad_l, pad_r; /* per spatial dim; dilation from 0 */
} bg_dnnl_pool_spec;

static inline dnnl_status_t bg_dnnl_pool_pd(bg_dnnl_module *m, const bg_dnnl_pool_spec *p,
                                             const_dnnl_memory_desc_t src,
                                             const_dnnl_memory_desc_t dst,
                                             const_dnnl_primitive_attr_t attr,
                                             dnnl_primitive_desc_t *pd)
{
    return dnnl_pooling_forward_primitive_desc_create(
        pd, m->engine, dnnl_forward_inference, (dnnl_alg_kind_t)p->alg, src, dst, p->strides,
        p->kernel, p->dilation, p->pad_l, p->pad_r, attr);
}

/* oneDNN pools plain NC(D)HW memory with generic code (simple_nchw, ~2-4 ns an element: the
 * global max pool over magika's [1, 512, 508] took 0.5-1 ms) and the channel-blocked and
 * channels-last layouts with jit kernels (20 us, after a 70 us reorder). So a pool that would
 * read a plain tensor with generic code reads it in the first layout a jit kernel takes,
 * unless the target asked for plain layouts; bg_dnnl_unary adds the reorder. */
static inline dnnl_status_t bg_dnnl_make_pool(bg_dnnl_module *m, const void *spec,
                                       const_dnnl_memory_desc_t src, const_dnnl_memory_desc_t dst,
                                       const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd)
{
    const bg_dnnl_pool_spec *p = (const bg_dnnl_pool_spec *)spec;
    dnnl_status_t s = bg_dnnl_pool_pd(m, p, src, dst, attr, pd);
    if (s != dnnl_success || bg_dnnl_impl_is(*pd, "jit") || m->layout == BG_DNNL_PLAIN
        || !bg_dnnl_is_dense(src) || p->spatial < 1 || p->spatial > 3)
        return s;
    static const dnnl_format_tag_t blocked[3][3] = {
        {dnnl_nCw16c, dnnl_nCw8c, dnnl_nwc},
        {dnnl_nChw16c, dnnl_nChw8c, dnnl_nhwc},
        {dnnl_nCdhw16c, dnnl_nCdhw8c, dnnl_ndhwc},
    };
    const int ndims = p->spatial + 2;
    const dnnl_dims_t *dims = NULL;
    dnnl_memory_desc_query(src, dnnl_query_dims, &dims);
    for (int i = m->layout == BG_DNNL_CHANNELS_LAST ? 2 : 0; i < 3; ++i) {
        dnnl_memory_desc_t md = NULL;
        dnnl_primitive_desc_t tried = NULL;
        if (dnnl_memory_desc_create_with_tag(&md, ndims, *dims, dnnl_f32,
                                             blocked[p->spatial - 1][i]) != dnnl_success)
            continue;
        const dnnl_status_t t = bg_dnnl_pool_pd(m, p, md, dst, attr, &tried);
        dnnl_memory_desc_destroy(md);
        if (t == dnnl_success && bg_dnnl_impl_is(tried, "jit")) {
            dnnl_primitive_desc_destroy(*pd);
            *pd = tried;
            break;
        }
        if (t == dnnl_success) dnnl_primitive_desc_destroy(tried);
    }
    return dnnl_success;
}

typedef struct bg_dnnl_eltwise_spec { int alg; float alpha, beta; } bg_dnnl_eltwise_spec;

static inline dnnl_status_t bg_dnnl_make_eltwise(bg_dnnl_module *m, const void *spec,
                                          const_dnnl_memory_desc_t src,
                                          const_dnnl_memory_desc_t dst,
                                          const_dnnl_primitive_attr_t attr,
                                          dnnl_primitive_desc_t *pd)
{
    const bg_dnnl_eltwise_spec *e = (const bg_dnnl_eltwise_spec *)spec;
    return dnnl_eltwise_forward_primitive_desc_create(pd, m->engine, dnnl_forward_inference,
                                                      (dnnl_alg_kind_t)e->alg, src, dst, e->alpha,
                                                      e->beta, attr);
}

/* A binary op whose second input is described by a post-op-like operand (tensor or
 * constant); make_binary reads its md from the memory bg_dnnl_binary prepared. */
typedef struct bg_dnnl_binary_spec {
    int alg;
    const_dnnl_memory_desc_t src1; /* set by bg_dnnl_binary */
} bg_dnnl_binary_spec;

static inline dnnl_status_t bg_dnnl_make_binary(bg_dnnl_module *m, const void *spec,
                                         const_dnnl_memory_desc_t src,
                                         const_dnnl_memory_desc_t dst,
                                         const_dnnl_primitive_attr_t attr,
                                         dnnl_primitive_desc_t *pd)
{
    const bg_dnnl_binary_spec *b = (const bg_dnnl_binary_spec *)spec;
    return dnnl_binary_primitive_desc_create(pd, m->engine, (dnnl_alg_kind_t)b->alg, src, b->src1,
                                             dst, attr);
}

/* dst = src (alg) operand, the operand given like a BINARY post-op. */
static inline int bg_dnnl_binary(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_unary_spec *u,
                          const bg_dnnl_post *operand, const bg_dnnl_post *posts, int nposts,
                          const char *what)
{
    dnnl_memory_t src1;
    if (operand->tensor >= 0) {
        if (bg_dnnl_operand(m, r, &r->tensors[operand->tensor], operand->ndims, operand->dims,
                            &src1) != 0)
            return -1;
    } else {
        dnnl_memory_desc_t md;
        BG_DNNL_TRY(m, what, bg_dnnl_plain_md(&md, operand->ndims, operand->dims));
        void *data = (void *)bg_dnnl_const_data(m, operand->array, operand->offset);
        int rc = bg_dnnl_memory(m, md, data, &src1, what);
        dnnl_memory_desc_destroy(md);
        if (rc != 0) return rc;
    }
    bg_dnnl_binary_spec spec = {operand->alg, bg_dnnl_md_of(src1)};
    dnnl_exec_arg_t extra[] = {{DNNL_ARG_SRC_1, src1}};
    return bg_dnnl_unary(m, r, u, bg_dnnl_make_binary, &spec, extra, 1, posts, nposts, what);
}

typedef struct bg_dnnl_softmax_spec { int alg, axis; } bg_dnnl_softmax_spec;

static inline dnnl_status_t bg_dnnl_make_softmax(bg_dnnl_module *m, const void *spec,
                                          const_dnnl_memory_desc_t src,
                                          const_dnnl_memory_desc_t dst,
                                          const_dnnl_primitive_attr_t attr,
                                          dnnl_primitive_desc_t *pd)
{
    const bg_dnnl_softmax_spec *s = (const bg_dnnl_softmax_spec *)spec;
    return dnnl_softmax_forward_primitive_desc_create(
        pd, m->engine, dnnl_forward_inference, (dnnl_alg_kind_t)s->alg, src, dst, s->axis, attr);
}

/* Layer normalization over the last dim of a [rows, cols] view. */
typedef struct bg_dnnl_lnorm_spec {
    float epsilon;
    long scale, shift; /* offsets in env->weights of [cols] arrays; -1: none */
} bg_dnnl_lnorm_spec;

static inline dnnl_status_t bg_dnnl_make_lnorm(bg_dnnl_module *m, const void *spec,
                                        const_dnnl_memory_desc_t src, const_dnnl_memory_desc_t dst,
                                        const_dnnl_primitive_attr_t attr,
                                        dnnl_primitive_desc_t *pd)
{
    const bg_dnnl_lnorm_spec *n = (const bg_dnnl_lnorm_spec *)spec;
    unsigned flags = (n->scale >= 0 ? dnnl_use_scale : 0U) | (n->shift >= 0 ? dnnl_use_shift : 0U);
    return dnnl_layer_normalization_forward_primitive_desc_create(
        pd, m->engine, dnnl_forward_inference, src, dst, NULL, n->epsilon, flags, attr);
}

static inline int bg_dnnl_lnorm(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_unary_spec *u,
                         const bg_dnnl_lnorm_spec *n, const char *what)
{
    dnnl_exec_arg_t extra[2];
    int nextra = 0;
    dnnl_memory_desc_t md;
    dnnl_dim_t cols = u->dims[u->ndims - 1];
    BG_DNNL_TRY(m, what, bg_dnnl_plain_md(&md, 1, &cols));
    long offsets[2] = {n->scale, n->shift};
    int names[2] = {DNNL_ARG_SCALE, DNNL_ARG_SHIFT};
    for (int i = 0; i < 2; ++i) {
        dnnl_memory_t memory;
        if (offsets[i] < 0) continue;
        if (bg_dnnl_memory(m, md, (void *)(m->env->weights + offsets[i]), &memory, what) != 0) {
            dnnl_memory_desc_destroy(md);
            return -1;
        }
        extra[nextra++] = (dnnl_exec_arg_t){names[i], memory};
    }
    dnnl_memory_desc_destroy(md);
    return bg_dnnl_unary(m, r, u, bg_dnnl_make_lnorm, n, extra, nextra, NULL, 0, what);
}

/* LRN across channels: ONNX's LRN with an odd size (alpha is divided by the size, as in
 * ONNX; the window is centred on the channel). */
typedef struct bg_dnnl_lrn_spec { long size; float alpha, beta, bias; } bg_dnnl_lrn_spec;

static inline dnnl_status_t bg_dnnl_make_lrn(bg_dnnl_module *m, const void *spec,
                                      const_dnnl_memory_desc_t src, const_dnnl_memory_desc_t dst,
                                      const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd)
{
    const bg_dnnl_lrn_spec *l = (const bg_dnnl_lrn_spec *)spec;
    return dnnl_lrn_forward_primitive_desc_create(
        pd, m->engine, dnnl_forward_inference, dnnl_lrn_across_channels, src, dst, l->size,
        l->alpha, l->beta, l->bias, attr);
}

/* A channel shuffle along `axis`: oneDNN reads the axis as [size / group_size][group_size]
 * and writes it transposed (ONNX's Reshape-Transpose-Reshape into g groups is group_size
 * = channels / g); any layout in, the same out. */
typedef struct bg_dnnl_shuffle_spec { int axis; long group_size; } bg_dnnl_shuffle_spec;

static inline dnnl_status_t bg_dnnl_make_shuffle(bg_dnnl_module *m, const void *spec,
                                          const_dnnl_memory_desc_t src, const_dnnl_memory_desc_t dst,
                                          const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd)
{
    const bg_dnnl_shuffle_spec *s = (const bg_dnnl_shuffle_spec *)spec;
    return dnnl_shuffle_forward_primitive_desc_create(pd, m->engine, dnnl_forward_inference, src,
                                                      dst, s->axis, s->group_size, attr);
}

/* Resampling of dims 2 onward (nearest or linear); the scales are dst's dims over src's. */
typedef struct bg_dnnl_resampling_spec { int alg; } bg_dnnl_resampling_spec;

static inline dnnl_status_t bg_dnnl_make_resampling(bg_dnnl_module *m, const void *spec,
                                             const_dnnl_memory_desc_t src,
                                             const_dnnl_memory_desc_t dst,
                                             const_dnnl_primitive_attr_t attr,
                                             dnnl_primitive_desc_t *pd)
{
    const bg_dnnl_resampling_spec *s = (const bg_dnnl_resampling_spec *)spec;
    return dnnl_resampling_forward_primitive_desc_create(
        pd, m->engine, dnnl_forward_inference, (dnnl_alg_kind_t)s->alg, NULL, src, dst, attr);
}

#endif /* BG_ONEDNN_UNARY_H */
