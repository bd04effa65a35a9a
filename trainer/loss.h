// Softmax cross-entropy over logits, with its gradient.
#ifndef RINGMASTER_TRAINER_LOSS_H_
#define RINGMASTER_TRAINER_LOSS_H_

#include <cstdint>

namespace ringmaster {

struct LossResult {
  double loss = 0;      // mean over rows
  int64_t correct = 0;  // rows whose arg-max is the label
};

// `logits` [rows x classes]; labels in [0, classes). When `dlogits` is not
// null it receives d(mean loss)/d(logits) scaled by `grad_scale` (the
// trainer passes 1/accumulation steps).
LossResult SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int rows, int classes,
                               float* dlogits, float grad_scale = 1.0f);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_LOSS_H_
