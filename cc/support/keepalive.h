// Keepalive: how quickly a peer that stops answering is found out, on the
// client's channels (cc/client/connection.h) and on the server
// (cc/service/server.h).
//
// Each side sends an HTTP/2 ping once the connection has been quiet for the
// keepalive interval K, calls or no calls, and drops the connection if the
// ping is not answered within K more: the calls on it then fail (UNAVAILABLE
// on the client; the server's reactors are cancelled and free what they
// hold). A peer that froze, or a network that was cut, is so found within
// about 2 K. The server lets clients ping as often as every
// kMinPingInterval.
//
// K is REVERB_KEEPALIVE_MS (milliseconds; 0 turns the pings off) if the
// environment sets it, else kDefaultKeepalive. A dm-reverb server, which
// refuses pings more frequent than every 5 minutes on a connection that
// carries no data, needs K of at least 300000 (or 0) on the clients that
// wait on it for long.
#ifndef REVERB_CC_SUPPORT_KEEPALIVE_H_
#define REVERB_CC_SUPPORT_KEEPALIVE_H_

#include "absl/time/time.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

inline constexpr absl::Duration kDefaultKeepalive = absl::Seconds(10);
inline constexpr absl::Duration kMinPingInterval = absl::Milliseconds(250);

// REVERB_KEEPALIVE_MS, else kDefaultKeepalive; InfiniteDuration() for 0
// (no pings). A value that is not a non-negative integer is ignored (with a
// message on stderr).
REVERB_EXPORT absl::Duration KeepaliveFromEnvironment();

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_KEEPALIVE_H_
