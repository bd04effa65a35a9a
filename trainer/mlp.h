// A multi-layer perceptron on the CPU: linear layers with ReLU between
// them, forward and backward with OpenBLAS sgemm. All parameters live in
// one flat buffer and all gradients in another, so that gradient buckets
// are plain ranges of memory.
#ifndef RINGMASTER_TRAINER_MLP_H_
#define RINGMASTER_TRAINER_MLP_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace ringmaster {

// One parameter tensor (a weight matrix or a bias) inside the flat buffers.
struct ParamSpan {
  size_t offset = 0;  // in floats
  size_t size = 0;    // in floats
};

// Not thread-safe; one per rank.
class Mlp {
 public:
  // Layer widths: input, hidden..., classes. Weights are Kaiming-uniform
  // from `seed` (the same on every rank), biases zero.
  Mlp(std::vector<int> widths, uint64_t seed);

  const std::vector<int>& widths() const { return widths_; }
  int layers() const { return static_cast<int>(widths_.size()) - 1; }

  // Parameters in memory order: W0, b0, W1, b1, ... W is [in x out]
  // row-major; b is [out].
  const std::vector<ParamSpan>& param_spans() const { return spans_; }
  // Its own parameters, which it computes with unless told otherwise.
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  // Computes with `params` (as many floats, kept by the caller) from now
  // on; nullptr: with its own again.
  void ComputeWith(const float* params) { computed_with_ = params; }
  // The parameters Forward and Backward use.
  const float* weights() const {
    return computed_with_ != nullptr ? computed_with_ : params_.data();
  }
  float* grads() { return grads_; }
  // Moves the gradient buffer to `buffer` (size floats, owned by the
  // caller, e.g. memory shared with the other ranks on this host).
  void UseGradientBuffer(float* buffer);

  // Computes logits [rows x classes] for `x` [rows x input], keeping the
  // activations the next Backward needs. Returns a pointer into the model.
  const float* Forward(const float* x, int rows);

  // Back-propagates `dlogits` [rows x classes] (the gradient of the loss
  // with respect to the logits of the last Forward). With `accumulate`
  // the gradients are added to those already in grads(). `on_ready(p)` is
  // called as soon as parameter p's gradient is final and the pass will no
  // longer read p itself, last layer first.
  void Backward(const float* dlogits, bool accumulate,
                const std::function<void(int param)>& on_ready);

 private:
  std::vector<int> widths_;
  std::vector<ParamSpan> spans_;
  std::vector<float> params_;
  const float* computed_with_ = nullptr;
  std::vector<float> owned_grads_;
  float* grads_ = nullptr;
  // activations_[l]: input of layer l ([rows x widths_[l]]); the last one
  // holds the logits. activations_[0] points at the caller's input.
  const float* input_ = nullptr;
  std::vector<std::vector<float>> activations_;
  std::vector<float> delta_, next_delta_;
  int rows_ = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_MLP_H_
