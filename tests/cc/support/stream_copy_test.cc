#include "cc/support/stream_copy.h"

#include <cstddef>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

TEST(StreamCopyTest, CopiesEveryByteAtAnyAlignmentAndSize) {
  const std::vector<size_t> sizes = {0,
                                     1,
                                     100,
                                     kMinStreamCopyBytes - 1,
                                     kMinStreamCopyBytes,
                                     kMinStreamCopyBytes + 13,
                                     (size_t{1} << 20) + 7};
  for (size_t size : sizes) {
    std::string source(size + 16, '\0');
    for (size_t i = 0; i < source.size(); ++i) {
      source[i] = static_cast<char>(i * 131 + size);
    }
    for (size_t src_offset : {0, 3}) {
      for (size_t dst_offset = 0; dst_offset < 17; ++dst_offset) {
        std::string out(size + 32, '#');
        StreamCopy(out.data() + dst_offset, source.data() + src_offset, size);
        ASSERT_EQ(out.substr(dst_offset, size), source.substr(src_offset, size))
            << size << " bytes to offset " << dst_offset;
        // Nothing outside the range is touched.
        ASSERT_EQ(out.substr(0, dst_offset), std::string(dst_offset, '#'));
        ASSERT_EQ(out.substr(dst_offset + size),
                  std::string(out.size() - dst_offset - size, '#'));
      }
    }
  }
}

}  // namespace
}  // namespace deepmind::reverb
