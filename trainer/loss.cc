#include "trainer/loss.h"

#include <cmath>

namespace ringmaster {

LossResult SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int rows, int classes,
                               float* dlogits, float grad_scale) {
  LossResult result;
  const float scale = grad_scale / rows;
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<size_t>(r) * classes;
    int arg_max = 0;
    float max = z[0];
    for (int c = 1; c < classes; ++c) {
      if (z[c] > max) {
        max = z[c];
        arg_max = c;
      }
    }
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - max));
    const double log_sum = std::log(sum) + max;
    result.loss += log_sum - z[labels[r]];
    result.correct += arg_max == labels[r];
    if (dlogits != nullptr) {
      float* d = dlogits + static_cast<size_t>(r) * classes;
      for (int c = 0; c < classes; ++c) {
        const double p = std::exp(static_cast<double>(z[c]) - log_sum);
        d[c] = static_cast<float>((p - (c == labels[r] ? 1.0 : 0.0)) * scale);
      }
    }
  }
  result.loss /= rows;
  return result;
}

}  // namespace ringmaster
