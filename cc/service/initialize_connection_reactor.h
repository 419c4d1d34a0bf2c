// InitializeConnectionReactor: the server side of one InitializeConnection
// call, dm-reverb's in-process hand-over of a table (docs/wire-protocol.md,
// "InitializeConnection"; the handle: cc/core/local_table.h).
//
//  - A peer that is neither localhost nor in-process (its gRPC peer string
//    contains neither ":127.0.0.1:" nor "::1" and is not "unknown" or
//    empty) gets no answer: the call ends with OK.
//  - The first request: if its `pid` is not this process's, or it lacks
//    this libreverb's identity (a dm-reverb client, which could not use our
//    Table), the answer is address 0 and the call ends with OK. Otherwise
//    an unknown `table_name` ends it with NOT_FOUND; a known one, or none
//    (our client asks so for all tables at once), is answered with the
//    address of a new LocalTableHandle of the table and all the others.
//  - The second request must say `ownership_transferred` (the client has
//    copied the table out), else the call ends with INTERNAL; then it ends
//    with OK. The handle is freed when the call ends, however it ends.
//
// Made by ReverbServiceImpl::InitializeConnection; the service must outlive
// it. Deletes itself when the call is done.
#ifndef REVERB_CC_SERVICE_INITIALIZE_CONNECTION_REACTOR_H_
#define REVERB_CC_SERVICE_INITIALIZE_CONNECTION_REACTOR_H_

#include <memory>
#include <string>

#include "cc/core/local_table.h"
#include "cc/support/export.h"
#include "grpcpp/support/server_callback.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {

class ReverbServiceImpl;

class REVERB_EXPORT InitializeConnectionReactor
    : public grpc::ServerBidiReactor<InitializeConnectionRequest,
                                     InitializeConnectionResponse> {
 public:
  // `peer`: the call's grpc::ServerContext::peer().
  InitializeConnectionReactor(const ReverbServiceImpl* service,
                              const std::string& peer);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

  // Whether dm-reverb serves `peer` (see above).
  static bool IsLocalhostOrInProcess(const std::string& peer);

 private:
  const ReverbServiceImpl* const service_;
  InitializeConnectionRequest request_;
  InitializeConnectionResponse response_;
  // Handed out by the first answer; freed by OnDone.
  std::unique_ptr<LocalTableHandle> handle_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_INITIALIZE_CONNECTION_REACTOR_H_
