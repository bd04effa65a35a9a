#include "coordinator/core/history_fold.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

bool IsFold(const v1::StateChange& change) { return change.reason() == v1::HISTORY_FOLDED; }

// The `period` entries from `a` are the same changes as those from `b`,
// and none of them is a fold.
bool SameRound(const History& history, int a, int b, int period) {
  for (int i = 0; i < period; ++i) {
    const v1::StateChange& x = history.Get(a + i);
    const v1::StateChange& y = history.Get(b + i);
    if (IsFold(x) || IsFold(y) || x.state() != y.state() || x.reason() != y.reason()) return false;
  }
  return true;
}

// The fold counts the round that ends with `last` too.
void Count(const v1::StateChange& last, v1::StateChange* fold) {
  fold->set_folds(fold->folds() + 1);
  fold->set_state(last.state());
  fold->set_time_unix_ms(last.time_unix_ms());
  fold->set_attempt(last.attempt());
  const int period = fold->fold_period();
  fold->set_message(absl::StrCat("the ", period == 1 ? "change" : absl::StrCat(period, " changes"),
                                 " before this came ", fold->folds(),
                                 fold->folds() == 1 ? " more time" : " more times"));
}

}  // namespace

int AppendToHistory(const v1::StateChange& change, History* history) {
  *history->Add() = change;
  const int n = history->size();
  for (int period = 1; period <= kMaxFoldPeriod; ++period) {
    const int latest = n - period;  // the round that `change` ends
    const int before = latest - period;
    if (before < 0 || !SameRound(*history, before, latest, period)) continue;
    if (before >= 1 && IsFold(history->Get(before - 1)) &&
        history->Get(before - 1).fold_period() == period) {
      // A fold of these changes, then a round, then this round: the
      // fold counts the round, which goes.
      Count(history->Get(latest - 1), history->Mutable(before - 1));
      history->DeleteSubrange(before, period);
      return before - 1;
    }
    const int first = before - period;
    if (first < 0 || !SameRound(*history, first, before, period)) continue;
    // Three rounds in a row: the middle one becomes a fold.
    v1::StateChange fold;
    fold.set_reason(v1::HISTORY_FOLDED);
    fold.set_fold_period(period);
    fold.set_first_folded_unix_ms(history->Get(before).time_unix_ms());
    Count(history->Get(latest - 1), &fold);
    *history->Mutable(before) = std::move(fold);
    history->DeleteSubrange(before + 1, period - 1);
    return before;
  }
  return n - 1;
}

}  // namespace ringmaster
