"""The fixed C++ of every cudnn module: the cuDNN check macro and the helpers that build a
convolution (descriptors, then the algorithm) or a pooling at create and free them.

The algorithm of a convolution is chosen at create, on the GPU the model runs on: the one
the tuning records name (the spec's `algo`) when it runs there within the limit, else by
BG_ALGORITHMS: cuDNN's heuristics (cudnnGetConvolutionForwardAlgorithm_v7, which runs
nothing), or with the target's `algorithm_search: benchmark` cuDNN's measurements
(cudnnFindConvolutionForwardAlgorithm, which times each algorithm on the GPU): the first
algorithm in cuDNN's ranking that runs in the module's math mode with a workspace within
BG_WORKSPACE_LIMIT. The scratch reserves that limit, since a workspace size is only known on
the GPU; a smaller limit excludes the algorithms that need more.
"""

CHECK = r"""
#define BG_CUDNN(name, call) do { cudnnStatus_t s_ = (call); \
    if (s_ != CUDNN_STATUS_SUCCESS) return bg_fail(env, name, where, cudnnGetErrorString(s_)); \
} while (0)
"""

TENSOR_HELPERS = r"""
static int bg_tensor(bg_env *env, cudnnTensorDescriptor_t *d, int n, int c, int h, int w,
                     const char *where)
{
    BG_CUDNN("cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(d));
    BG_CUDNN("cudnnSetTensor4dDescriptor",
             cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    return 0;
}
"""

CONV_DESCRIPTORS = r"""
/* A 2-D convolution: input n x c x h x w, k filters of (c / groups) x r x s, output
 * n x k x p x q; symmetric pads. `algo`: a cudnnConvolutionFwdAlgo_t the tuning records
 * chose (buildgen tune --backend cudnn), tried first at create; -1 = none recorded. */
typedef struct bg_conv_spec {
    int n, c, h, w, k, r, s, p, q, groups;
    int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
    int algo;
} bg_conv_spec;

typedef struct bg_conv {
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t algo;
    size_t workspace;
    const float *weights; /* what the convolution reads: the weights blob, or `folded` */
    float *folded;        /* the weights scaled by a folded BatchNormalization, or NULL */
    const float *bias_data;
} bg_conv;

/* The descriptors of one convolution, in the module's math mode. */
static int bg_conv_describe(bg_env *env, bg_conv *c, const bg_conv_spec *sp, const char *where)
{
    if (bg_tensor(env, &c->x, sp->n, sp->c, sp->h, sp->w, where) != 0) return -1;
    if (bg_tensor(env, &c->y, sp->n, sp->k, sp->p, sp->q, where) != 0) return -1;
    if (bg_tensor(env, &c->bias, 1, sp->k, 1, 1, where) != 0) return -1;
    BG_CUDNN("cudnnCreateFilterDescriptor", cudnnCreateFilterDescriptor(&c->w));
    BG_CUDNN("cudnnSetFilter4dDescriptor", cudnnSetFilter4dDescriptor(
        c->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, sp->k, sp->c / sp->groups, sp->r, sp->s));
    BG_CUDNN("cudnnCreateConvolutionDescriptor", cudnnCreateConvolutionDescriptor(&c->conv));
    BG_CUDNN("cudnnSetConvolution2dDescriptor", cudnnSetConvolution2dDescriptor(
        c->conv, sp->pad_h, sp->pad_w, sp->stride_h, sp->stride_w, sp->dilation_h,
        sp->dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    BG_CUDNN("cudnnSetConvolutionGroupCount", cudnnSetConvolutionGroupCount(c->conv, sp->groups));
    BG_CUDNN("cudnnSetConvolutionMathType", cudnnSetConvolutionMathType(c->conv, BG_MATH));
    int n = 0, k = 0, p = 0, q = 0;
    BG_CUDNN("cudnnGetConvolution2dForwardOutputDim",
             cudnnGetConvolution2dForwardOutputDim(c->conv, c->x, c->w, &n, &k, &p, &q));
    if (n != sp->n || k != sp->k || p != sp->p || q != sp->q)
        return bg_fail(env, "cudnnGetConvolution2dForwardOutputDim", where,
                       "cuDNN's output shape differs from the model's");
    return 0;
}

/* 0 and its workspace in *bytes if `algo` runs this convolution in math mode `math` within
 * BG_WORKSPACE_LIMIT; -1 if not (the math mode is left set either way). */
static int bg_conv_fits(cudnnHandle_t h, bg_conv *c, cudnnConvolutionFwdAlgo_t algo,
                        cudnnMathType_t math, size_t *bytes)
{
    *bytes = 0;
    if (cudnnSetConvolutionMathType(c->conv, math) != CUDNN_STATUS_SUCCESS ||
        cudnnGetConvolutionForwardWorkspaceSize(h, c->x, c->w, c->conv, c->y, algo, bytes)
            != CUDNN_STATUS_SUCCESS)
        return -1;
    return *bytes <= BG_WORKSPACE_LIMIT ? 0 : -1;
}

static void bg_conv_destroy(bg_conv *c)
{
    if (c->x != NULL) cudnnDestroyTensorDescriptor(c->x);
    if (c->y != NULL) cudnnDestroyTensorDescriptor(c->y);
    if (c->bias != NULL) cudnnDestroyTensorDescriptor(c->bias);
    if (c->w != NULL) cudnnDestroyFilterDescriptor(c->w);
    if (c->conv != NULL) cudnnDestroyConvolutionDescriptor(c->conv);
    if (c->folded != NULL) cudaFree(c->folded);
}
"""

CONV_CREATE = r"""
static int bg_conv_create(bg_env *env, cudnnHandle_t h, bg_conv *c, const bg_conv_spec *sp,
                          const char *where)
{
    if (bg_conv_describe(env, c, sp, where) != 0) return -1;
    size_t bytes = 0;
    /* A recorded algorithm was measured on the tuning machine's GPU; one this GPU or this
     * cuDNN cannot run within the limit falls back to the ranking below. */
    if (sp->algo >= 0 &&
        bg_conv_fits(h, c, (cudnnConvolutionFwdAlgo_t)sp->algo, BG_MATH, &bytes) == 0) {
        c->algo = (cudnnConvolutionFwdAlgo_t)sp->algo;
        c->workspace = bytes;
        return 0;
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    BG_CUDNN("cudnnSetConvolutionMathType", cudnnSetConvolutionMathType(c->conv, BG_MATH));
    BG_CUDNN(BG_ALGORITHMS_NAME, BG_ALGORITHMS(
        h, c->x, c->w, c->conv, c->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf));
    for (int i = 0; i < found; ++i) {
        /* Never down-convert float32 to half; without TF32, plain FMA arithmetic only. */
        if (perf[i].status != CUDNN_STATUS_SUCCESS ||
            perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
            continue;
        cudnnMathType_t math = BG_MATH == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : perf[i].mathType;
        if (bg_conv_fits(h, c, perf[i].algo, math, &bytes) != 0)
            continue;
        c->algo = perf[i].algo;
        c->workspace = bytes;
        return 0;
    }
    return bg_fail(env, BG_ALGORITHMS_NAME, where,
                   "no algorithm runs within the workspace limit (raise workspace_limit_mb)");
}
"""

POOL_HELPERS = r"""
/* A 2-D pooling: n x c x h x w -> n x c x p x q, window r x s, symmetric pads. */
typedef struct bg_pool_spec {
    int n, c, h, w, p, q, r, s, pad_h, pad_w, stride_h, stride_w;
} bg_pool_spec;

typedef struct bg_pool {
    cudnnTensorDescriptor_t x, y;
    cudnnPoolingDescriptor_t pool;
} bg_pool;

static int bg_pool_create(bg_env *env, bg_pool *pl, cudnnPoolingMode_t mode,
                          const bg_pool_spec *sp, const char *where)
{
    if (bg_tensor(env, &pl->x, sp->n, sp->c, sp->h, sp->w, where) != 0) return -1;
    if (bg_tensor(env, &pl->y, sp->n, sp->c, sp->p, sp->q, where) != 0) return -1;
    BG_CUDNN("cudnnCreatePoolingDescriptor", cudnnCreatePoolingDescriptor(&pl->pool));
    BG_CUDNN("cudnnSetPooling2dDescriptor", cudnnSetPooling2dDescriptor(
        pl->pool, mode, CUDNN_PROPAGATE_NAN, sp->r, sp->s, sp->pad_h, sp->pad_w, sp->stride_h,
        sp->stride_w));
    int n = 0, c = 0, p = 0, q = 0;
    BG_CUDNN("cudnnGetPooling2dForwardOutputDim",
             cudnnGetPooling2dForwardOutputDim(pl->pool, pl->x, &n, &c, &p, &q));
    if (n != sp->n || c != sp->c || p != sp->p || q != sp->q)
        return bg_fail(env, "cudnnGetPooling2dForwardOutputDim", where,
                       "cuDNN's output shape differs from the model's");
    return 0;
}

static void bg_pool_destroy(bg_pool *pl)
{
    if (pl->x != NULL) cudnnDestroyTensorDescriptor(pl->x);
    if (pl->y != NULL) cudnnDestroyTensorDescriptor(pl->y);
    if (pl->pool != NULL) cudnnDestroyPoolingDescriptor(pl->pool);
}
"""

# Only in modules that fold a BatchNormalization into a convolution's weights.
SCALE_KERNEL = r"""
/* dst[i] = src[i] * scale[i / inner]: weights scaled per output channel, once at create. */
static __global__ void bg_scale_rows(float *dst, const float *src, const float *scale,
                                     size_t inner, size_t count)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) dst[i] = src[i] * scale[i / inner];
}
"""
