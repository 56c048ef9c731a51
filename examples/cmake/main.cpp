// Run the compiled mlp once and print its outputs: one line "<name> <n>" per output, then
// its n values. The input is the fixed pattern x[i] = ((i % 17) - 8) / 8 (exact in float32),
// so a test can rebuild it and compare with onnxruntime.
#include <cstdio>
#include <memory>
#include <vector>

#include "mlp.h"

namespace {

struct Destroy {
    void operator()(mlp_model *m) const { mlp_destroy(m); }
};

}  // namespace

int main() {
    mlp_model *raw = nullptr;
    if (mlp_create(&raw) != 0) {
        std::fprintf(stderr, "mlp_create: %s\n", mlp_last_error(nullptr));
        return 1;
    }
    std::unique_ptr<mlp_model, Destroy> model(raw);

    // The library describes its own inputs and outputs: no sizes are hard-coded here.
    std::vector<std::vector<float>> inputs(mlp_num_inputs), outputs(mlp_num_outputs);
    std::vector<const void *> input_ptrs;
    std::vector<void *> output_ptrs;
    for (int i = 0; i < mlp_num_inputs; i++) {
        inputs[i].resize(mlp_input_bytes[i] / sizeof(float));
        for (size_t k = 0; k < inputs[i].size(); k++) {
            inputs[i][k] = static_cast<float>(static_cast<int>(k % 17) - 8) / 8.0f;
        }
        input_ptrs.push_back(inputs[i].data());
    }
    for (int i = 0; i < mlp_num_outputs; i++) {
        outputs[i].resize(mlp_output_bytes[i] / sizeof(float));
        output_ptrs.push_back(outputs[i].data());
    }

    if (mlp_run(model.get(), input_ptrs.data(), output_ptrs.data()) != 0) {
        std::fprintf(stderr, "mlp_run: %s\n", mlp_last_error(model.get()));
        return 1;
    }
    for (int i = 0; i < mlp_num_outputs; i++) {
        std::printf("%s %zu\n", mlp_output_names[i], outputs[i].size());
        for (size_t k = 0; k < outputs[i].size(); k++) {
            std::printf("%.9g%c", outputs[i][k], k + 1 == outputs[i].size() ? '\n' : ' ');
        }
    }
    return 0;
}
