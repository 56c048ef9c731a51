/* One helper per primitive kind for the onednn backend's modules (see bg_onednn.h): each
 * creates its primitive from a constant spec the generator wrote, at create time, and
 * records the steps a run executes. Tensors are indices into the region's tensor table.
 * Here: convolution and matmul; bg_onednn_unary.h has the single-input primitives and
 * bg_onednn_pieces.h Concat and Split (both included at the end).
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
    return strncmp(bg_dnnl_impl_name(pd), kind, strlen(kind)) == 0;
}

/* oneDNN 3.x ranks its brgemm 1x1 convolution first on AVX2 CPUs. In a model, where a
 * layer reads what the previous one has just written and its weights come from memory, its
 * older jit_1x1 kernel is faster for float32 on AVX2 (Zen 3, ResNet-50's and SqueezeNet's
 * 1x1 layers: 5-22% at 1 thread, 10-30% at 2; docs/performance.md): it is taken where oneDNN
 * offers it for the same layouts and post-ops. AVX-512 CPUs rank other kernels first. */
#define BG_DNNL_1X1_RANKED_FIRST "brgconv_1x1:avx2"
#ifndef BG_DNNL_1X1_PREFERRED /* a test names a kernel oneDNN lacks: its first choice stays */
#define BG_DNNL_1X1_PREFERRED "jit_1x1:avx2"
#endif

/* Moves `pd` on through oneDNN's ranked implementations to the one named `name`: 1 when
 * found; 0 when not, and `pd` is then spent (past its last implementation). */
static inline int bg_dnnl_move_to_impl(dnnl_primitive_desc_t pd, const char *name)
{
    while (dnnl_primitive_desc_next_impl(pd) == dnnl_success)
        if (strcmp(bg_dnnl_impl_name(pd), name) == 0) return 1;
    return 0;
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
    int first_layer;           /* reads the model's few-channel input: see bg_dnnl_conv_mds */
} bg_dnnl_conv_spec;

/* The convolution's descriptor for these layouts: oneDNN's first choice, or
 * BG_DNNL_1X1_PREFERRED where that is BG_DNNL_1X1_RANKED_FIRST and oneDNN offers it. */
static inline dnnl_status_t bg_dnnl_conv_pd(dnnl_primitive_desc_t *pd, bg_dnnl_module *m,
                                            const bg_dnnl_conv_spec *c,
                                            const_dnnl_memory_desc_t src_md,
                                            const_dnnl_memory_desc_t wei_md,
                                            const_dnnl_memory_desc_t bias_md,
                                            const_dnnl_memory_desc_t dst_md,
                                            const_dnnl_primitive_attr_t attr)
{
    for (int prefer = 1;; prefer = 0) {
        dnnl_status_t s = dnnl_convolution_forward_primitive_desc_create(
            pd, m->engine, dnnl_forward_inference, dnnl_convolution_auto, src_md, wei_md,
            bias_md, dst_md, c->strides, c->dilates, c->pad_l, c->pad_r, attr);
        if (s != dnnl_success || !prefer || !bg_dnnl_impl_is(*pd, BG_DNNL_1X1_RANKED_FIRST)
            || bg_dnnl_move_to_impl(*pd, BG_DNNL_1X1_PREFERRED))
            return s;
        /* Not offered, and the walk spent *pd (a clone cannot walk): created again as ranked. */
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
    }
}

/* A convolution's activation layouts, tried in this order (`attempt`) until one has a
 * kernel better than oneDNN's reference one:
 *   first layer  (spec.first_layer, in a channels-last module) the model's plain input of
 *                few channels (an image's RGB) read as ONNX lays it out, the output in the
 *                layout oneDNN picks. oneDNN's direct kernel for this reads NCHW and writes
 *                channel blocks, where a channels-last kernel needs the input reordered
 *                first: SqueezeNet's 3x3 stem (AVX-512, 1 thread) takes 0.30 ms so, against
 *                0.37 ms plus 0.05 ms of reorder. Its readers are poolings, which write
 *                channels-last again (bg_dnnl_unary_spec.channels_last): a mixed
 *                blocked-to-channels-last kernel is reference code in oneDNN;
 *   module       the module's layout (a flexible input in the one its producer wrote);
 *   oneDNN's     the layouts oneDNN picks for both.
 * dnnl_not_required: this attempt does not apply to the convolution. */
#define BG_DNNL_CONV_ATTEMPTS 3

static inline dnnl_status_t bg_dnnl_conv_mds(const bg_dnnl_module *m, const bg_dnnl_conv_spec *c,
                                             const bg_dnnl_tensor *src, const bg_dnnl_tensor *dst,
                                             int attempt,
                                             dnnl_memory_desc_t *src_md, dnnl_memory_desc_t *dst_md)
{
    const bg_dnnl_tensor_spec *x = src->spec, *y = dst->spec;
    dnnl_status_t s;
    if (attempt == 0) {
        if (!c->first_layer || m->layout != BG_DNNL_CHANNELS_LAST || x->flexible || !y->flexible)
            return dnnl_not_required;
        s = bg_dnnl_plain_md(src_md, x->ndims, x->dims);
    } else if (attempt == 1) {
        s = x->flexible && src->memory != NULL
                ? dnnl_memory_desc_clone(src_md, bg_dnnl_md_of(src->memory))
                : bg_dnnl_activation_md(m, src_md, x->ndims, x->dims);
        if (s == dnnl_success) return bg_dnnl_activation_md(m, dst_md, y->ndims, y->dims);
        return s;
    } else {
        s = bg_dnnl_any_md(src_md, x->ndims, x->dims);
    }
    return s == dnnl_success ? bg_dnnl_any_md(dst_md, y->ndims, y->dims) : s;
}

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
    /* The layouts of bg_dnnl_conv_mds, in order, until one has more than a reference kernel. */
    for (int attempt = 0; attempt < BG_DNNL_CONV_ATTEMPTS && s == dnnl_success; ++attempt) {
        if (src_md) dnnl_memory_desc_destroy(src_md);
        if (dst_md) dnnl_memory_desc_destroy(dst_md);
        src_md = dst_md = NULL;
        s = bg_dnnl_conv_mds(m, c, src, dst, attempt, &src_md, &dst_md);
        if (s == dnnl_not_required) {
            s = dnnl_success;
            continue;
        }
        if (pd) dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        if (s == dnnl_success) s = bg_dnnl_conv_pd(&pd, m, c, src_md, wei_md, bias_md, dst_md, x.attr);
        if (s == dnnl_success && !bg_dnnl_impl_is(pd, "ref")) break;
        if (attempt == 0) s = dnnl_success; /* no first-layer kernel for it: the next layouts */
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

/* Pooling, eltwise, binary, softmax, layer normalization, LRN, shuffle and resampling: one
 * input, one output, through bg_dnnl_unary. */
#include "bg_onednn_unary.h"
/* Concat and Split, which move pieces of tensors between layouts without arithmetic. */
#include "bg_onednn_pieces.h"

#endif
