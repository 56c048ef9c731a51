/* bg_kernels_linked.h — bg_kernels.h's entry points (every BG_API function) in kernels
 * objects compiled once per toolchain and ISA level, which every library built with it links,
 * instead of a copy compiled into each module (rules/c.yaml `shared_kernels`). The copies
 * were most of a small model's build: 8 of the 8.1 s of a one-Conv module at -O3, once per
 * ISA level.
 *
 *  - The kernels objects, one per family of entry points below (bg_kernels_<family>.c,
 *    BG_KERNELS_LIBRARY naming the family's list), compile the static entry points as usual
 *    and export each under its link name, an alias:
 *        bg_conv2d  ->  bg_conv2d__<BG_KERNELS_ID><BG_ISA_SUFFIX>   (hidden visibility)
 *  - A module (BG_KERNELS_LINKED) declares the link names, typed after the static entry
 *    points (__typeof__: no second copy of a signature to drift), and from here on spells
 *    each entry point as its link name. Its static copies are never called, so the compiler
 *    drops them before optimising anything: parsing them is all they cost.
 *
 * BG_KERNELS_ID is a digest of buildgen's kernels, set by the build on both compiles: two
 * libraries built by different versions, linked statically into one program, keep their own
 * copies rather than one taking the other's. BG_ISA_SUFFIX is the ISA level of a module
 * compiled once per level (buildgen_abi.h). tests/backends/c/test_c_kernels_linked.py checks
 * that the families and the #defines below name every BG_API function of the headers.
 *
 * Four families, not one object: they compile in parallel, and a build compiles and links
 * only the families its modules call (the codegen of a module lists them in a ninja dyndep
 * file: buildgen/ninja/shared_modules.py). A model of MatMuls and elementwise ops compiles
 * the GEMM family, a fraction of the convolution's code. The convolution runs on the GEMM's
 * blocked kernels (bg__gemm_run): its family object links the GEMM family's instead of
 * compiling its own (BG_KERNELS_LINKS_GEMM), so a model with both compiles each once.
 */
#ifndef BG_KERNELS_LINKED_H
#define BG_KERNELS_LINKED_H

#ifndef BG_KERNELS_ID
#define BG_KERNELS_ID k
#endif
#ifdef BG_ISA_SUFFIX
#define BG__KERNEL_ISA BG_ISA_SUFFIX
#else
#define BG__KERNEL_ISA
#endif
#define BG__KERNEL_PASTE2(name, id, isa) name##__##id##isa
#define BG__KERNEL_PASTE(name, id, isa) BG__KERNEL_PASTE2(name, id, isa)
#define BG__KERNEL_NAME(name) BG__KERNEL_PASTE(name, BG_KERNELS_ID, BG__KERNEL_ISA)
#define BG__KERNEL_STR2(x) #x
#define BG__KERNEL_STR(x) BG__KERNEL_STR2(x)

#define BG_KERNELS_THREADS(X) \
    X(bg_parallel) \
    X(bg_threads_wanted) \
    X(bg_threadpool_destroy) \
    X(bg_threadpool_create)

#define BG_KERNELS_GEMM(X) \
    X(bg_sgemm_workspace_bytes) \
    X(bg_sgemm) \
    X(bg_sgemm_packed_b_bytes) \
    X(bg_sgemm_pack_b) \
    X(bg_sgemm_prepacked) \
    X(bg_sgemm_packed_a_bytes) \
    X(bg_sgemm_pack_a) \
    X(bg__gemv) \
    X(bg__gemm_run)

#define BG_KERNELS_CONV(X) \
    X(bg_conv2d_workspace_bytes) \
    X(bg_conv2d) \
    X(bg_conv2d_packed_bytes) \
    X(bg_conv2d_pack_weights) \
    X(bg_conv2d_prepacked) \
    X(bg_batchnorm_fold_bytes) \
    X(bg_batchnorm_fold)

#define BG_KERNELS_POOL(X) \
    X(bg_maxpool2d) \
    X(bg_avgpool2d) \
    X(bg_maxpool3d) \
    X(bg_avgpool3d)

#define BG_KERNEL_ENTRY_POINTS(X) \
    BG_KERNELS_THREADS(X) BG_KERNELS_GEMM(X) BG_KERNELS_CONV(X) BG_KERNELS_POOL(X)

#define BG__KERNEL_EXPORT(name) \
    extern __typeof__(name) BG__KERNEL_NAME(name) \
        __attribute__((alias(BG__KERNEL_STR(name)), visibility("hidden")));
#define BG__KERNEL_DECLARE(name) \
    extern __typeof__(name) BG__KERNEL_NAME(name) __attribute__((visibility("hidden")));

#endif /* BG_KERNELS_LINKED_H */

/* The rest is read twice, as bg_kernels.h includes this file at two points: after
 * bg_gemm.h in a family object that links the GEMM family (BG_KERNELS_LINKS_GEMM: the
 * convolution calls GEMM by its link names, so its object holds no second copy of the
 * GEMM), and at the end (BG__KERNELS_COMPLETE). Each block runs once. */

/* A module, or a family object linking GEMM: GEMM by its link names from here on. */
#if (defined(BG_KERNELS_LINKS_GEMM) || \
     (defined(BG__KERNELS_COMPLETE) && defined(BG_KERNELS_LINKED))) && \
    !defined(BG__GEMM_LINK_NAMES)
#define BG__GEMM_LINK_NAMES
BG_KERNELS_GEMM(BG__KERNEL_DECLARE)
#define bg_sgemm_workspace_bytes  BG__KERNEL_NAME(bg_sgemm_workspace_bytes)
#define bg_sgemm                  BG__KERNEL_NAME(bg_sgemm)
#define bg_sgemm_packed_b_bytes   BG__KERNEL_NAME(bg_sgemm_packed_b_bytes)
#define bg_sgemm_pack_b           BG__KERNEL_NAME(bg_sgemm_pack_b)
#define bg_sgemm_prepacked        BG__KERNEL_NAME(bg_sgemm_prepacked)
#define bg_sgemm_packed_a_bytes   BG__KERNEL_NAME(bg_sgemm_packed_a_bytes)
#define bg_sgemm_pack_a           BG__KERNEL_NAME(bg_sgemm_pack_a)
#define bg__gemv                  BG__KERNEL_NAME(bg__gemv)
#define bg__gemm_run              BG__KERNEL_NAME(bg__gemm_run)
#endif

#if defined(BG__KERNELS_COMPLETE) && !defined(BG__KERNELS_LINK_NAMES)
#define BG__KERNELS_LINK_NAMES
#if defined(BG_KERNELS_LIBRARY)
/* A family object: its entry points exported under their link names. */
BG_KERNELS_LIBRARY(BG__KERNEL_EXPORT)
#else
/* A module: every other family by its link names. */
BG_KERNELS_THREADS(BG__KERNEL_DECLARE)
BG_KERNELS_CONV(BG__KERNEL_DECLARE)
BG_KERNELS_POOL(BG__KERNEL_DECLARE)

#define bg_conv2d_workspace_bytes BG__KERNEL_NAME(bg_conv2d_workspace_bytes)
#define bg_conv2d                 BG__KERNEL_NAME(bg_conv2d)
#define bg_conv2d_packed_bytes    BG__KERNEL_NAME(bg_conv2d_packed_bytes)
#define bg_conv2d_pack_weights    BG__KERNEL_NAME(bg_conv2d_pack_weights)
#define bg_conv2d_prepacked       BG__KERNEL_NAME(bg_conv2d_prepacked)
#define bg_batchnorm_fold_bytes   BG__KERNEL_NAME(bg_batchnorm_fold_bytes)
#define bg_batchnorm_fold         BG__KERNEL_NAME(bg_batchnorm_fold)
#define bg_maxpool2d              BG__KERNEL_NAME(bg_maxpool2d)
#define bg_avgpool2d              BG__KERNEL_NAME(bg_avgpool2d)
#define bg_maxpool3d              BG__KERNEL_NAME(bg_maxpool3d)
#define bg_avgpool3d              BG__KERNEL_NAME(bg_avgpool3d)
#define bg_parallel               BG__KERNEL_NAME(bg_parallel)
#define bg_threads_wanted         BG__KERNEL_NAME(bg_threads_wanted)
#define bg_threadpool_destroy     BG__KERNEL_NAME(bg_threadpool_destroy)
#define bg_threadpool_create      BG__KERNEL_NAME(bg_threadpool_create)
#endif
#endif
