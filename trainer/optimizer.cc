#include "trainer/optimizer.h"

#include <cmath>

namespace ringmaster {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(double momentum, double weight_decay, size_t n)
      : momentum_(static_cast<float>(momentum)),
        weight_decay_(static_cast<float>(weight_decay)),
        velocity_(momentum > 0 ? n : 0, 0.0f) {}

  void BeginStep(float lr, float grad_scale) override {
    lr_ = lr;
    grad_scale_ = grad_scale;
    first_ = steps_ == 0;  // PyTorch: the first step takes the gradient as the buffer
    ++steps_;
  }

  void UpdateInto(size_t offset, size_t n, const float* grads, const OptimizerBuffers& b) override {
    const float* p = b.params + offset;
    float* p_out = b.params_out + offset;
    const float* g = grads + offset;
    if (momentum_ == 0) {
      for (size_t i = 0; i < n; ++i) {
        p_out[i] = p[i] - lr_ * (grad_scale_ * g[i] + weight_decay_ * p[i]);
      }
      return;
    }
    const float* v = b.state + offset;
    float* v_out = b.state_out + offset;
    const float keep = first_ ? 0.0f : momentum_;
    for (size_t i = 0; i < n; ++i) {
      const float velocity = keep * v[i] + grad_scale_ * g[i] + weight_decay_ * p[i];
      v_out[i] = velocity;
      p_out[i] = p[i] - lr_ * velocity;
    }
  }

  std::vector<float>* mutable_state() override { return &velocity_; }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

 private:
  const float momentum_;
  const float weight_decay_;
  std::vector<float> velocity_;
  int64_t steps_ = 0;
  float lr_ = 0, grad_scale_ = 1;
  bool first_ = true;
};

class AdamW final : public Optimizer {
 public:
  AdamW(const v1::TrainerSpec::Optimizer& spec, size_t n)
      : beta1_(spec.beta1() > 0 ? spec.beta1() : 0.9),
        beta2_(spec.beta2() > 0 ? spec.beta2() : 0.999),
        eps_(spec.eps() > 0 ? spec.eps() : 1e-8),
        weight_decay_(spec.weight_decay()),
        moments_(2 * n, 0.0f),
        n_(n) {}

  void BeginStep(float lr, float grad_scale) override {
    ++steps_;
    const double correction1 = 1 - std::pow(beta1_, static_cast<double>(steps_));
    const double correction2 = 1 - std::pow(beta2_, static_cast<double>(steps_));
    step_size_ = static_cast<float>(lr / correction1);
    inv_sqrt_c2_ = static_cast<float>(1 / std::sqrt(correction2));
    decay_ = static_cast<float>(1 - lr * weight_decay_);
    grad_scale_ = grad_scale;
  }

  void UpdateInto(size_t offset, size_t n, const float* grads, const OptimizerBuffers& b) override {
    const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_);
    const float eps = static_cast<float>(eps_);
    const float* p = b.params + offset;
    float* p_out = b.params_out + offset;
    const float* gr = grads + offset;
    const float* m = b.state + offset;
    const float* v = b.state + n_ + offset;
    float* m_out = b.state_out + offset;
    float* v_out = b.state_out + n_ + offset;
    for (size_t i = 0; i < n; ++i) {
      const float g = grad_scale_ * gr[i];
      const float m1 = b1 * m[i] + (1 - b1) * g;
      const float v1 = b2 * v[i] + (1 - b2) * g * g;
      m_out[i] = m1;
      v_out[i] = v1;
      p_out[i] = p[i] * decay_ - step_size_ * m1 / (std::sqrt(v1) * inv_sqrt_c2_ + eps);
    }
  }

  std::vector<float>* mutable_state() override { return &moments_; }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

 private:
  const double beta1_, beta2_, eps_, weight_decay_;
  std::vector<float> moments_;  // m then v
  const size_t n_;
  int64_t steps_ = 0;
  float step_size_ = 0, inv_sqrt_c2_ = 1, decay_ = 1, grad_scale_ = 1;
};

}  // namespace

std::unique_ptr<Optimizer> MakeOptimizer(const v1::TrainerSpec::Optimizer& spec, size_t n) {
  if (spec.type() == "sgd") return std::make_unique<Sgd>(spec.momentum(), spec.weight_decay(), n);
  return std::make_unique<AdamW>(spec, n);
}

double GradNorm(const float* grads, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(grads[i]) * grads[i];
  return std::sqrt(sum);
}

double ClipFactor(double norm, double max_norm) {
  // PyTorch's clip_grad_norm_: max_norm / (norm + 1e-6) when above.
  return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

}  // namespace ringmaster
