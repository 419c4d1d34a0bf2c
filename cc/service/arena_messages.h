// ArenaMessages: a grpc::MessageAllocator that gives each unary call of the
// callback API its request and response on a protobuf arena of its own.
//
// Without one, gRPC parses a request onto the heap: one allocation per
// sub-message and string (MutatePriorities: one per KeyWithPriority, a
// thousand for a typical learner's call). On the arena they come from a few
// growing blocks, freed at once when the call ends (Release).
//
// Set with the generated SetMessageAllocatorFor_<Method>; the allocator
// must outlive the server. Thread-safe (it holds no state).
//
// (Arena::CreateMessage, not Arena::Create: the latter places a message on
// the arena but leaves its sub-messages on the heap.)
#ifndef REVERB_CC_SERVICE_ARENA_MESSAGES_H_
#define REVERB_CC_SERVICE_ARENA_MESSAGES_H_

#include "google/protobuf/arena.h"
#include "grpcpp/support/message_allocator.h"

namespace deepmind::reverb {

template <typename Request, typename Response>
class ArenaMessages final : public grpc::MessageAllocator<Request, Response> {
 public:
  // The arena's first block, and the largest it grows blocks to.
  static constexpr size_t kStartBlockBytes = 4 << 10;
  static constexpr size_t kMaxBlockBytes = 1 << 20;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return new Holder();
  }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options()) {
      this->set_request(
          google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(
          google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options() {
      google::protobuf::ArenaOptions options;
      options.start_block_size = kStartBlockBytes;
      options.max_block_size = kMaxBlockBytes;
      return options;
    }

    google::protobuf::Arena arena_;
  };
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_ARENA_MESSAGES_H_
