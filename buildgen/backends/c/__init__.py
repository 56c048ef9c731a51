"""The `c` host backend: readable C11 modules calling the bg_kernels.h kernel library.

Conventions of the generated module (one per model, `c.c`):
  * a header comment names the model, the source ONNX file (its base name), the opset, every
    c region with its ops, and the scratch plan ("N bytes planned for M bytes of
    intermediates and workspaces");
  * it includes <math.h>, <stdint.h>, <string.h>, "buildgen_abi.h" and "bg_kernels.h"
    (compile with -I buildgen.resources.include_dir(), link with -lm);
  * one `static void k<n>_<ops>(...)` per kernel, numbered module-wide in execution order
    (`k3_conv_relu`, `k7_mul_add_sigmoid_mul`), preceded by a comment listing the ONNX nodes
    (op, name, input and output shapes) it implements. Parameters are `restrict` pointers
    (inputs const); shapes, strides and loop bounds are constants. Kernel-library parameter
    structs are file-scope constants `k<n>_<ops>_params`. A kernel that can fail (Gather with
    an index out of range) returns int;
  * per region `int M__c_<region>(bg_env *env, const void *const *in, void *const *out)`
    declares one named pointer per tensor it touches (sanitized ONNX names: inputs from in[],
    weights at env->weights + offset, outputs in out[], intermediates at scratch + offset,
    views as aliases), then calls the kernels in order, one commented line each;
  * M__c_scratch_bytes is the largest region's plan (regions run one at a time);
    M__c_create allocates nothing and checks the planned workspaces against the kernel
    library; M__c_destroy does nothing.
"""

from buildgen.backends.c.backend import CBackend, MemorySummary, RegionMemory

__all__ = ["CBackend", "MemorySummary", "RegionMemory"]
