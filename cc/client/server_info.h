// MergeServerInfo: the ServerInfo of several shards as one server holding
// all their items would report it.
//
// Tables are matched by name, in the order they first appear. For each, the
// first shard's settings (selectors, rate limiter settings, signature,
// max_times_sampled) are kept; max_size, current_size, num_episodes,
// num_deleted_episodes, num_unique_samples, priority_mass, the rate
// limiter's insert and sample counts and the worker times are summed;
// samples_blocked holds if it holds on every shard. tables_state_id combines
// the shards' ids, so it changes whenever one of them does.
#ifndef REVERB_CC_CLIENT_SERVER_INFO_H_
#define REVERB_CC_CLIENT_SERVER_INFO_H_

#include "absl/types/span.h"
#include "cc/support/export.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {

REVERB_EXPORT ServerInfoResponse
MergeServerInfo(absl::Span<const ServerInfoResponse> shards);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SERVER_INFO_H_
