#include "reliableq/push_result.h"

namespace reliableq {

const char* PushOutcomeName(PushOutcome outcome) {
  switch (outcome) {
    case PushOutcome::kAccepted: return "accepted";
    case PushOutcome::kReplicated: return "replicated";
    case PushOutcome::kNotConfirmed: return "not confirmed";
    case PushOutcome::kSpooled: return "spooled";
    case PushOutcome::kRefused: return "refused";
    case PushOutcome::kDuplicate: return "duplicate";
  }
  return "unknown";
}

}  // namespace reliableq
