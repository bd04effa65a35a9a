#include "trainer/mlp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace ringmaster {

Mlp::Mlp(std::vector<int> widths, uint64_t seed) : widths_(std::move(widths)) {
  size_t offset = 0;
  for (int l = 0; l < layers(); ++l) {
    const size_t w = static_cast<size_t>(widths_[l]) * widths_[l + 1];
    spans_.push_back({offset, w});
    offset += w;
    spans_.push_back({offset, static_cast<size_t>(widths_[l + 1])});
    offset += widths_[l + 1];
  }
  params_.assign(offset, 0.0f);
  owned_grads_.assign(offset, 0.0f);
  grads_ = owned_grads_.data();
  std::mt19937_64 rng(seed);
  for (int l = 0; l < layers(); ++l) {
    // PyTorch's nn.Linear default: U(-1/sqrt(in), 1/sqrt(in)).
    const float bound = 1.0f / std::sqrt(static_cast<float>(widths_[l]));
    std::uniform_real_distribution<float> uniform(-bound, bound);
    const ParamSpan& w = spans_[2 * l];
    for (size_t i = 0; i < w.size; ++i) params_[w.offset + i] = uniform(rng);
  }
  activations_.resize(layers());
}

void Mlp::UseGradientBuffer(float* buffer) {
  std::copy(grads_, grads_ + params_.size(), buffer);
  grads_ = buffer;
  owned_grads_.clear();
  owned_grads_.shrink_to_fit();
}

const float* Mlp::Forward(const float* x, int rows) {
  rows_ = rows;
  input_ = x;
  const float* in = x;
  for (int l = 0; l < layers(); ++l) {
    const int n_in = widths_[l], n_out = widths_[l + 1];
    std::vector<float>& out = activations_[l];
    out.resize(static_cast<size_t>(rows) * n_out);
    const float* w = weights() + spans_[2 * l].offset;
    const float* b = weights() + spans_[2 * l + 1].offset;
    // out = in * W, then bias and ReLU in one pass over the output.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n_out, n_in, 1.0f, in, n_in, w,
                n_out, 0.0f, out.data(), n_out);
    const bool relu = l + 1 < layers();
    for (int r = 0; r < rows; ++r) {
      float* o = out.data() + static_cast<size_t>(r) * n_out;
      if (relu) {
        for (int j = 0; j < n_out; ++j) o[j] = std::max(o[j] + b[j], 0.0f);
      } else {
        for (int j = 0; j < n_out; ++j) o[j] += b[j];
      }
    }
    in = out.data();
  }
  return activations_.back().data();
}

void Mlp::Backward(const float* dlogits, bool accumulate,
                   const std::function<void(int param)>& on_ready) {
  const int rows = rows_;
  const float beta = accumulate ? 1.0f : 0.0f;
  delta_.assign(dlogits, dlogits + static_cast<size_t>(rows) * widths_.back());
  for (int l = layers() - 1; l >= 0; --l) {
    const int n_in = widths_[l], n_out = widths_[l + 1];
    const float* in = l == 0 ? input_ : activations_[l - 1].data();
    float* dw = grads_ + spans_[2 * l].offset;
    float* db = grads_ + spans_[2 * l + 1].offset;
    // dW = in^T * delta; db = column sums of delta.
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_in, n_out, rows, 1.0f, in, n_in,
                delta_.data(), n_out, beta, dw, n_out);
    if (!accumulate) std::fill(db, db + n_out, 0.0f);
    for (int r = 0; r < rows; ++r) {
      const float* d = delta_.data() + static_cast<size_t>(r) * n_out;
      for (int j = 0; j < n_out; ++j) db[j] += d[j];
    }
    if (l > 0) {
      // delta_prev = delta * W^T, before W may change (below).
      const float* w = weights() + spans_[2 * l].offset;
      next_delta_.resize(static_cast<size_t>(rows) * n_in);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n_in, n_out, 1.0f, delta_.data(),
                  n_out, w, n_out, 0.0f, next_delta_.data(), n_in);
    }
    // The layer's gradients are final and its weights are no longer read
    // by this pass: its bucket may be reduced, and even applied, while the
    // rest of the backward pass runs.
    if (on_ready) {
      on_ready(2 * l + 1);
      on_ready(2 * l);
    }
    if (l == 0) break;
    // Mask by ReLU'(pre-activation of l-1).
    const float* act = activations_[l - 1].data();  // post-ReLU
    float* d = next_delta_.data();
    for (size_t i = 0; i < next_delta_.size(); ++i) d[i] = act[i] > 0.0f ? d[i] : 0.0f;
    delta_.swap(next_delta_);
  }
}

}  // namespace ringmaster
