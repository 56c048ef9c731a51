/* One helper per primitive kind for the onednn backend's modules (see bg_onednn.h): each
 * creates its primitive from a constant spec the generator wrote, at create time, and
 * records the steps a run executes. Tensors are indices into the region's tensor table.
 */
#ifndef BG_ONEDNN_OPS_H
#define BG_ONEDNN_OPS_H

#include "bg_onednn_layout.h"

/* A row-major md of `dims` whose last two dims are stored swapped when `transposed`. */
static inline dnnl_status_t bg_dnnl_matrix_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
                                       int transposed)
{
    dnnl_dims_t stored, strides;
    memcpy(stored, dims, (size_t)ndims * sizeof *dims);
    if (transposed) {
        stored[ndims - 2] = dims[ndims - 1];
        stored[ndims - 1] = dims[ndims - 2];
    }
    bg_dnnl_dense_strides(ndims, stored, strides);
    if (transposed) {
        dnnl_dim_t swap = strides[ndims - 2];
        strides[ndims - 2] = strides[ndims - 1];
        strides[ndims - 1] = swap;
    }
    dnnl_dims_t shape;
    memcpy(shape, dims, (size_t)ndims * sizeof *dims);
    return dnnl_memory_desc_create_with_strides(md, ndims, shape, dnnl_f32, strides);
}

/* Whether oneDNN implements `pd` with the code whose name starts with `kind` ("ref", "jit"). */
static inline int bg_dnnl_impl_is(const_dnnl_primitive_desc_t pd, const char *kind)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success) return 0;
    return impl != NULL && strncmp(impl, kind, strlen(kind)) == 0;
}

typedef struct bg_dnnl_conv_spec {
    int src, dst;
    int ndims; /* of the weights: [O, I, k...], or [G, O/G, I/G, k...] when grouped */
    dnnl_dim_t weights_dims[DNNL_MAX_NDIMS];
    long weights;              /* offset in env->weights */
    const float *bias;         /* a static array (a folded BatchNormalization's shift), or */
    long bias_offset;          /* the bias in env->weights; -1 (and bias NULL): none */
    const float *scale;        /* per output channel (a folded BatchNormalization), or NULL */
    long out_channels, inner;  /* weight element i belongs to channel (i / inner) % out_channels */
    int spatial;
    dnnl_dims_t strides, dilates, pad_l, pad_r; /* per spatial dim; dilates count from 0 */
} bg_dnnl_conv_spec;

static inline int bg_dnnl_conv(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_conv_spec *c,
                        const bg_dnnl_post *posts, int nposts, const char *what)
{
    bg_dnnl_tensor *src = &r->tensors[c->src], *dst = &r->tensors[c->dst];
    dnnl_memory_desc_t src_md = NULL, wei_md = NULL, wei_plain = NULL, bias_md = NULL;
    dnnl_memory_desc_t dst_md = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_t src_mem, wei_mem, bias_mem = NULL, dst_mem, then;
    bg_dnnl_extras x;
    long out_channels = c->weights_dims[0] * (c->ndims == c->spatial + 3 ? c->weights_dims[1] : 1);
    const float *bias = bg_dnnl_const_data(m, c->bias, c->bias_offset);
    if (bg_dnnl_attr(m, r, posts, nposts, &x, what) != 0) return -1;
    int rc = -1;
    dnnl_status_t s = bg_dnnl_any_md(&wei_md, c->ndims, c->weights_dims);
    if (s == dnnl_success) s = bg_dnnl_plain_md(&wei_plain, c->ndims, c->weights_dims);
    if (s == dnnl_success && bias) s = bg_dnnl_plain_md(&bias_md, 1, &out_channels);
    /* Activations in the module's layout (a flexible input in the one its producer wrote),
     * unless only a reference kernel takes that: then in the layouts oneDNN picks. */
    for (int attempt = 0; attempt < 2 && s == dnnl_success; ++attempt) {
        if (src_md) dnnl_memory_desc_destroy(src_md);
        if (dst_md) dnnl_memory_desc_destroy(dst_md);
        src_md = dst_md = NULL;
        if (attempt == 1)
            s = bg_dnnl_any_md(&src_md, src->spec->ndims, src->spec->dims);
        else if (src->spec->flexible && src->memory != NULL)
            s = dnnl_memory_desc_clone(&src_md, bg_dnnl_md_of(src->memory));
        else
            s = bg_dnnl_activation_md(m, &src_md, src->spec->ndims, src->spec->dims);
        if (s == dnnl_success && attempt == 1)
            s = bg_dnnl_any_md(&dst_md, dst->spec->ndims, dst->spec->dims);
        else if (s == dnnl_success)
            s = bg_dnnl_activation_md(m, &dst_md, dst->spec->ndims, dst->spec->dims);
        if (pd) dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        if (s == dnnl_success)
            s = dnnl_convolution_forward_primitive_desc_create(
                &pd, m->engine, dnnl_forward_inference, dnnl_convolution_auto, src_md, wei_md,
                bias_md, dst_md, c->strides, c->dilates, c->pad_l, c->pad_r, x.attr);
        if (s == dnnl_success && !bg_dnnl_impl_is(pd, "ref")) break;
    }
    if (s != dnnl_success) {
        bg_dnnl_fail(m->env, what, bg_dnnl_status_name(s));
        goto done;
    }
    if (bg_dnnl_read(m, r, src, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), &src_mem,
                     what) != 0
        || bg_dnnl_constant(m, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                            wei_plain, bg_dnnl_const_data(m, NULL, c->weights), c->scale,
                            c->out_channels, c->inner, &wei_mem, what) != 0
        || (bias && bg_dnnl_memory(m, bias_md, (void *)bias, &bias_mem, what) != 0))
        goto done;
    const_dnnl_memory_desc_t chosen = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    then = NULL;
    if (bg_dnnl_sum_in_place(r, dst, chosen, &x)) {
        dst_mem = dst->memory;
    } else if (x.sum_in_place && dst->spec->flexible) {
        /* Planned to share the residual's bytes, but their layouts differ: own bytes. */
        if (bg_dnnl_memory(m, chosen, DNNL_MEMORY_ALLOCATE, &dst->memory, what) != 0) goto done;
        dst_mem = dst->memory;
    } else if (bg_dnnl_write(m, r, dst, chosen, &dst_mem, &then, what) != 0) {
        goto done;
    }
    dnnl_exec_arg_t args[BG_DNNL_MAX_ARGS] = {
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}};
    int nargs = 3;
    if (bias_mem) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bias_mem};
    rc = bg_dnnl_finish(m, r, pd, &x, args, nargs, dst_mem, then, what);
    pd = NULL;
    x.attr = NULL;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (x.attr) dnnl_primitive_attr_destroy(x.attr);
    dnnl_memory_desc_t mds[] = {src_md, wei_md, wei_plain, bias_md, dst_md};
    for (int i = 0; i < 5; ++i)
        if (mds[i]) dnnl_memory_desc_destroy(mds[i]);
    return rc;
}

typedef struct bg_dnnl_matmul_spec {
    /* inner_product: a 2-D product with constant weights and no batch runs as oneDNN's inner
     * product, whose AVX2/AVX-512 kernels (brgemm) read weights blocked once at create;
     * matmul's AVX2 kernel packs them on every call. */
    int inner_product;
    int src, dst, ndims; /* every operand is viewed with `ndims` dims (leading 1s added) */
    dnnl_dim_t src_dims[DNNL_MAX_NDIMS], weights_dims[DNNL_MAX_NDIMS], dst_dims[DNNL_MAX_NDIMS];
    int transpose_src, transpose_weights; /* Gemm transA / transB: stored as the transpose */
    int weights_tensor;                   /* a region tensor, or -1: constant weights ... */
    long weights;                         /* ... at env->weights + weights */
    const float *scale;                   /* constant weights times scale[(i / inner) % channels] */
    long channels, inner;
    const float *bias;                    /* a static array, or the bias in env->weights; */
    long bias_offset;                     /* NULL and -1: none */
    dnnl_dim_t bias_dims[DNNL_MAX_NDIMS];
} bg_dnnl_matmul_spec;

static inline int bg_dnnl_matmul(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_matmul_spec *c,
                          const bg_dnnl_post *posts, int nposts, const char *what)
{
    const int n = c->ndims;
    dnnl_memory_desc_t src_md = NULL, wei_md = NULL, wei_plain = NULL, bias_md = NULL;
    dnnl_memory_desc_t dst_md = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_t src_mem, wei_mem, bias_mem = NULL, dst_mem;
    bg_dnnl_extras x;
    const float *bias = bg_dnnl_const_data(m, c->bias, c->bias_offset);
    if (bg_dnnl_attr(m, r, posts, nposts, &x, what) != 0) return -1;
    int rc = -1;
    /* The inner product wants weights as [N, K]: the transpose of matmul's [K, N]. */
    const dnnl_dims_t ip_dims = {c->weights_dims[1], c->weights_dims[0]};
    dnnl_status_t s = bg_dnnl_matrix_md(&src_md, n, c->src_dims, c->transpose_src);
    if (s == dnnl_success && c->inner_product)
        s = bg_dnnl_matrix_md(&wei_plain, 2, ip_dims, !c->transpose_weights);
    else if (s == dnnl_success)
        s = bg_dnnl_matrix_md(&wei_plain, n, c->weights_dims, c->transpose_weights);
    if (s == dnnl_success && c->weights_tensor < 0)
        s = bg_dnnl_any_md(&wei_md, n, c->inner_product ? ip_dims : c->weights_dims);
    if (s == dnnl_success && c->weights_tensor >= 0) s = dnnl_memory_desc_clone(&wei_md, wei_plain);
    if (s == dnnl_success && bias && c->inner_product)
        s = bg_dnnl_plain_md(&bias_md, 1, &c->bias_dims[n - 1]);
    else if (s == dnnl_success && bias)
        s = bg_dnnl_plain_md(&bias_md, n, c->bias_dims);
    if (s == dnnl_success) s = bg_dnnl_plain_md(&dst_md, n, c->dst_dims);
    if (s == dnnl_success && c->inner_product)
        s = dnnl_inner_product_forward_primitive_desc_create(
            &pd, m->engine, dnnl_forward_inference, src_md, wei_md, bias_md, dst_md, x.attr);
    else if (s == dnnl_success)
        s = dnnl_matmul_primitive_desc_create(&pd, m->engine, src_md, wei_md, bias_md, dst_md,
                                              x.attr);
    if (s != dnnl_success) {
        bg_dnnl_fail(m->env, what, bg_dnnl_status_name(s));
        goto done;
    }
    if (bg_dnnl_view(m, r, &r->tensors[c->src], src_md, &src_mem) != 0
        || bg_dnnl_view(m, r, &r->tensors[c->dst], dst_md, &dst_mem) != 0
        || (bias && bg_dnnl_memory(m, bias_md, (void *)bias, &bias_mem, what) != 0))
        goto done;
    if (c->weights_tensor >= 0) {
        if (bg_dnnl_view(m, r, &r->tensors[c->weights_tensor], wei_plain, &wei_mem) != 0) goto done;
    } else if (bg_dnnl_constant(m, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                                wei_plain, bg_dnnl_const_data(m, NULL, c->weights), c->scale,
                                c->channels, c->inner, &wei_mem, what) != 0) {
        goto done;
    }
    dnnl_exec_arg_t args[BG_DNNL_MAX_ARGS] = {
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}};
    int nargs = 3;
    if (bias_mem) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bias_mem};
    rc = bg_dnnl_finish(m, r, pd, &x, args, nargs, dst_mem, NULL, what);
    pd = NULL;
    x.attr = NULL;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (x.attr) dnnl_primitive_attr_destroy(x.attr);
    dnnl_memory_desc_t mds[] = {src_md, wei_md, wei_plain, bias_md, dst_md};
    for (int i = 0; i < 5; ++i)
        if (mds[i]) dnnl_memory_desc_destroy(mds[i]);
    return rc;
}

/* What a primitive's creation holds until bg_dnnl_finish takes the descriptor and the
 * attribute (NULL once it has); returns rc. */
static inline int bg_dnnl_release(dnnl_primitive_desc_t pd, dnnl_primitive_attr_t attr,
                                  dnnl_memory_desc_t md, int rc)
{
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (md) dnnl_memory_desc_destroy(md);
    return rc;
}

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
    } else if (bg_dnnl_write(m, r, dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
                             &dst_mem, &then, what) != 0) {
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

/* Concat: oneDNN's concat primitive reads each input in the layout it has and writes the
 * one it derives from them (a flexible dst: a blocked layout carries on to the Conv or
 * pooling after it), or plain. */
typedef struct bg_dnnl_concat_spec {
    int n, axis;
    const int *srcs; /* the inputs' tensors, in order */
    int dst;
} bg_dnnl_concat_spec;

static inline int bg_dnnl_concat(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_concat_spec *c,
                                 const char *what)
{
    const_dnnl_memory_desc_t mds[BG_DNNL_MAX_ARGS];
    dnnl_exec_arg_t args[BG_DNNL_MAX_ARGS];
    if (c->n + 8 > BG_DNNL_MAX_ARGS) return bg_dnnl_fail(m->env, what, "too many inputs");
    for (int i = 0; i < c->n; ++i) {
        const bg_dnnl_tensor *src = &r->tensors[c->srcs[i]];
        if (src->memory == NULL) return bg_dnnl_fail(m->env, src->spec->name, "read before written");
        mds[i] = bg_dnnl_md_of(src->memory);
        args[i] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + i, src->memory};
    }
    bg_dnnl_tensor *dst = &r->tensors[c->dst];
    dnnl_memory_desc_t dst_md = NULL; /* NULL: the layout oneDNN derives from the inputs */
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_t dst_mem, then = NULL;
    bg_dnnl_extras x;
    if (bg_dnnl_attr(m, r, NULL, 0, &x, what) != 0) return -1;
    int rc = -1;
    dnnl_status_t s = dnnl_success;
    if (!dst->spec->flexible) s = bg_dnnl_plain_md(&dst_md, dst->spec->ndims, dst->spec->dims);
    if (s == dnnl_success)
        s = dnnl_concat_primitive_desc_create(&pd, m->engine, dst_md, c->n, c->axis, mds, x.attr);
    if (s != dnnl_success) {
        bg_dnnl_fail(m->env, what, bg_dnnl_status_name(s));
        goto done;
    }
    if (bg_dnnl_write(m, r, dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), &dst_mem,
                      &then, what) != 0)
        goto done;
    args[c->n] = (dnnl_exec_arg_t){DNNL_ARG_DST, dst_mem};
    rc = bg_dnnl_finish(m, r, pd, &x, args, c->n + 1, dst_mem, then, what);
    pd = NULL;
    x.attr = NULL;
done:
    return bg_dnnl_release(pd, x.attr, dst_md, rc);
}

/* A dense md of dims (ndims, dims) laid out in the order of `like`'s (outer) strides, outermost
 * first: a slice of a channels-last tensor is channels-last, of a plain one plain. */
static inline dnnl_status_t bg_dnnl_same_order_md(dnnl_memory_desc_t *md, const_dnnl_memory_desc_t like,
                                                  int ndims, const dnnl_dim_t *dims)
{
    const dnnl_dims_t *strides = NULL;
    dnnl_status_t s = dnnl_memory_desc_query(like, dnnl_query_strides, &strides);
    if (s != dnnl_success) return s;
    int order[DNNL_MAX_NDIMS];
    for (int d = 0; d < ndims; ++d) {
        int at = d; /* insertion sort, widest stride first; ties keep the dims' order */
        while (at > 0 && (*strides)[order[at - 1]] < (*strides)[d]) {
            order[at] = order[at - 1];
            --at;
        }
        order[at] = d;
    }
    dnnl_dims_t shape, dense;
    dnnl_dim_t step = 1;
    for (int k = ndims - 1; k >= 0; --k) {
        dense[order[k]] = step;
        step *= dims[order[k]];
    }
    memcpy(shape, dims, (size_t)ndims * sizeof *dims);
    return dnnl_memory_desc_create_with_strides(md, ndims, shape, dnnl_f32, dense);
}

/* Split along `axis`: each output is its slice of the input, copied by a reorder from a view
 * (a submemory) of it, so a C2f block's halves (YOLOv8) stay in the layout the Conv before
 * wrote. A flexible output keeps the input's order of dims; a plain one is plain. A blocked
 * input, which a slice may cut mid-block, is first copied whole into its outer order. */
typedef struct bg_dnnl_split_spec {
    int src, axis, n;
    const int *dsts; /* the outputs' tensors, in order */
} bg_dnnl_split_spec;

static inline int bg_dnnl_split_one(bg_dnnl_module *m, bg_dnnl_region *r, bg_dnnl_tensor *src,
                                    dnnl_memory_t from, const dnnl_dim_t *offsets,
                                    bg_dnnl_tensor *dst, const char *what)
{
    dnnl_memory_desc_t view_md = NULL, dst_md = NULL;
    dnnl_memory_t view, out, then = NULL;
    void *data = NULL;
    int rc = -1;
    dnnl_status_t s = dnnl_memory_desc_create_submemory(&view_md, bg_dnnl_md_of(from),
                                                        dst->spec->dims, offsets);
    if (s == dnnl_success)
        s = dst->spec->flexible
                ? bg_dnnl_same_order_md(&dst_md, bg_dnnl_md_of(from), dst->spec->ndims, dst->spec->dims)
                : bg_dnnl_plain_md(&dst_md, dst->spec->ndims, dst->spec->dims);
    if (s != dnnl_success) {
        bg_dnnl_fail(m->env, what, bg_dnnl_status_name(s));
        goto done;
    }
    if (from == src->memory && src->spec->role != BG_DNNL_INTERNAL) {
        if (bg_dnnl_view(m, r, src, view_md, &view) != 0) goto done; /* bound at each run */
    } else {
        dnnl_memory_get_data_handle(from, &data);
        if (bg_dnnl_memory(m, view_md, data, &view, what) != 0) goto done;
    }
    if (bg_dnnl_write(m, r, dst, dst_md, &out, &then, what) != 0
        || bg_dnnl_reorder(m, r, view, out, what) != 0
        || (then != NULL && bg_dnnl_reorder(m, r, out, then, what) != 0))
        goto done;
    rc = 0;
done:
    dnnl_memory_desc_destroy(view_md);
    dnnl_memory_desc_destroy(dst_md);
    return rc;
}

static inline int bg_dnnl_split(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_split_spec *s,
                                const char *what)
{
    bg_dnnl_tensor *src = &r->tensors[s->src];
    if (src->memory == NULL) return bg_dnnl_fail(m->env, src->spec->name, "read before it is written");
    dnnl_memory_t from = src->memory;
    int nblks = 0;
    dnnl_memory_desc_query(bg_dnnl_md_of(from), dnnl_query_inner_nblks_s32, &nblks);
    if (nblks != 0) {
        dnnl_memory_desc_t flat;
        BG_DNNL_TRY(m, what, bg_dnnl_same_order_md(&flat, bg_dnnl_md_of(from), src->spec->ndims,
                                                   src->spec->dims));
        int rc = bg_dnnl_reordered(m, r, src->memory, flat, &from, what);
        dnnl_memory_desc_destroy(flat);
        if (rc != 0) return -1;
    }
    dnnl_dims_t offsets = {0};
    for (int i = 0; i < s->n; ++i) {
        bg_dnnl_tensor *dst = &r->tensors[s->dsts[i]];
        if (bg_dnnl_split_one(m, r, src, from, offsets, dst, what) != 0) return -1;
        offsets[s->axis] += dst->spec->dims[s->axis];
    }
    return 0;
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

#endif
