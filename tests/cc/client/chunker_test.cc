#include "cc/client/chunker.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cc/tensor/compression.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

Tensor Float(float value) {
  Tensor t;
  t.dtype = tensorflow::DT_FLOAT;
  t.shape = {2};
  float values[2] = {value, -value};
  t.bytes.assign(reinterpret_cast<const char*>(values), sizeof(values));
  return t;
}

std::shared_ptr<Chunker> MakeChunker(int max_chunk_length, int keep) {
  return std::make_shared<Chunker>(
      0, std::make_shared<ConstantChunkerOptions>(max_chunk_length, keep));
}

TEST(ChunkerTest, FinalizesAtMaxChunkLengthAndAttachesTheChunk) {
  auto chunker = MakeChunker(2, 4);
  auto a = *chunker->Append(Float(1), 7, 0);
  EXPECT_FALSE(a->IsReady());
  auto b = *chunker->Append(Float(2), 7, 1);
  ASSERT_TRUE(a->IsReady() && b->IsReady());
  EXPECT_EQ(a->GetChunk(), b->GetChunk());
  EXPECT_EQ(a->chunk_key(), b->chunk_key());
  EXPECT_EQ(b->offset(), 1);
  const ChunkData& chunk = *a->GetChunk();
  EXPECT_EQ(chunk.chunk_key(), a->chunk_key());
  EXPECT_EQ(chunk.data_tensors_len(), 1);
  EXPECT_EQ(chunk.sequence_range().episode_id(), 7);
  EXPECT_EQ(chunk.sequence_range().start(), 0);
  EXPECT_EQ(chunk.sequence_range().end(), 1);
  EXPECT_FALSE(chunk.sequence_range().sparse());
  auto column = *DecompressTensorFromProto(chunk.data().tensors(0));
  EXPECT_EQ(column.shape, (std::vector<int64_t>{2, 2}));
  // The next chunk gets another key.
  auto c = *chunker->Append(Float(3), 7, 2);
  EXPECT_NE(c->chunk_key(), a->chunk_key());
  EXPECT_EQ(c->offset(), 0);
}

TEST(ChunkerTest, CellDataFromBufferAndChunk) {
  auto chunker = MakeChunker(2, 4);
  auto a = *chunker->Append(Float(5), 1, 0);
  auto buffered = a->GetData();
  ASSERT_TRUE(buffered.ok());
  EXPECT_EQ(buffered->bytes, Float(5).bytes);
  ASSERT_TRUE(chunker->Flush().ok());
  ASSERT_TRUE(a->IsReady());
  EXPECT_EQ(a->GetData()->bytes, Float(5).bytes);
}

TEST(ChunkerTest, LargeRowsBufferedBecomeTheirChunkAsPlainRowsWould) {
  // Large incompressible rows are buffered after room for the stored
  // stream's header (CompressTensorAsProto): readable before the chunk is
  // made, and the chunk is the one their stacked rows compress to. Two
  // rows of the chunk's four fill it only partly: under 2 MiB, their
  // header is a byte shorter than the room kept for four.
  std::mt19937 random(7);
  std::vector<Tensor> rows;
  for (int i = 0; i < 4; ++i) {
    Tensor row;
    row.dtype = tensorflow::DT_UINT8;
    row.shape = {600 << 10};
    row.bytes.resize(600 << 10);
    for (char& c : row.bytes) c = static_cast<char>(random());
    rows.push_back(std::move(row));
  }
  for (int count : {4, 2}) {
    SCOPED_TRACE(count);
    auto chunker = MakeChunker(4, 4);
    std::vector<std::shared_ptr<CellRef>> refs;
    Tensor stacked;
    for (int i = 0; i < count; ++i) {
      refs.push_back(*chunker->Append(rows[i], 1, i));
      if (i + 1 < 4) {
        auto buffered = refs[i]->GetData();
        ASSERT_TRUE(buffered.ok()) << buffered.status();
        EXPECT_EQ(buffered->bytes, rows[i].bytes);
      }
      stacked.bytes += rows[i].bytes;
    }
    ASSERT_TRUE(chunker->Flush().ok());
    ASSERT_TRUE(refs[0]->IsReady());
    stacked.dtype = tensorflow::DT_UINT8;
    stacked.shape = {count, 600 << 10};
    tensorflow::TensorProto expected;
    ASSERT_TRUE(CompressTensorAsProto(stacked, &expected).ok());
    const ChunkData& chunk = *refs[0]->GetChunk();
    EXPECT_EQ(chunk.data().tensors(0).SerializeAsString(),
              expected.SerializeAsString());
    EXPECT_EQ(chunk.data_uncompressed_size(), stacked.bytes.size());
    for (int i = 0; i < count; ++i) {
      EXPECT_EQ(refs[i]->GetData()->bytes, rows[i].bytes);
    }
  }
}

TEST(ChunkerTest, SparseStepsAndEpisodeBoundaries) {
  auto chunker = MakeChunker(3, 3);
  auto a = *chunker->Append(Float(1), 1, 0);
  auto b = *chunker->Append(Float(2), 1, 2);  // Step 1 skipped.
  // A new episode finalizes the partial chunk first.
  auto c = *chunker->Append(Float(3), 2, 0);
  ASSERT_TRUE(a->IsReady());
  EXPECT_TRUE(a->GetChunk()->sequence_range().sparse());
  EXPECT_EQ(a->GetChunk()->sequence_range().end(), 2);
  EXPECT_FALSE(c->IsReady());
  EXPECT_NE(c->chunk_key(), b->chunk_key());
}

TEST(ChunkerTest, RejectsOtherDtypeShapeAndRepeatedSteps) {
  auto chunker = MakeChunker(2, 2);
  ASSERT_TRUE(chunker->Append(Float(1), 1, 0).ok());
  Tensor other = Float(1);
  other.dtype = tensorflow::DT_INT32;
  EXPECT_EQ(chunker->Append(other, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  other = Float(1);
  other.shape = {1, 2};
  EXPECT_EQ(chunker->Append(other, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chunker->Append(Float(1), 1, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ChunkerTest, KeepsTheLastRefsAlive) {
  auto chunker = MakeChunker(1, 2);
  std::weak_ptr<CellRef> first = *chunker->Append(Float(1), 1, 0);
  std::weak_ptr<CellRef> second = *chunker->Append(Float(2), 1, 1);
  std::weak_ptr<CellRef> third = *chunker->Append(Float(3), 1, 2);
  EXPECT_TRUE(first.expired());
  EXPECT_FALSE(second.expired());
  EXPECT_EQ(chunker->GetKeepKeys(),
            (std::vector<uint64_t>{second.lock()->chunk_key(),
                                   third.lock()->chunk_key()}));
  chunker->Reset();
  EXPECT_TRUE(second.expired() && third.expired());
  EXPECT_TRUE(chunker->GetKeepKeys().empty());
}

// Rows 0..n-1 of a [n, 2] float tensor, row t being Float(first + t).
Tensor FloatRows(int first, int n) {
  Tensor rows;
  rows.dtype = tensorflow::DT_FLOAT;
  rows.shape = {n, 2};
  for (int t = 0; t < n; ++t) rows.bytes += Float(first + t).bytes;
  return rows;
}

// Chunks as a reader sees them: (key-independent) serialized chunk per ref.
std::vector<std::string> ChunksOf(
    const std::vector<std::shared_ptr<CellRef>>& refs) {
  std::vector<std::string> chunks;
  for (const auto& ref : refs) {
    if (!ref->IsReady()) {
      chunks.push_back("buffered");
      continue;
    }
    ChunkData chunk = *ref->GetChunk();
    chunk.clear_chunk_key();
    chunks.push_back(
        absl::StrCat(ref->offset(), ":", chunk.SerializeAsString()));
  }
  return chunks;
}

TEST(ChunkerTest, AppendRowsMakesTheChunksOfAppends) {
  for (bool delta : {false, true}) {
    // Buffered steps first, so that rows complete a chunk, fill whole
    // ones, and leave some buffered.
    auto options = std::make_shared<ConstantChunkerOptions>(3, 10, delta);
    auto appended = std::make_shared<Chunker>(0, options);
    auto batched = std::make_shared<Chunker>(0, options);
    std::vector<std::shared_ptr<CellRef>> a, b;
    for (int t = 0; t < 2; ++t) {
      a.push_back(*appended->Append(Float(t), 4, t));
      b.push_back(*batched->Append(Float(t), 4, t));
    }
    for (int t = 2; t < 10; ++t) a.push_back(*appended->Append(Float(t), 4, t));
    auto rows = batched->AppendRows(FloatRows(2, 8), 4, 2);
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), 8);
    b.insert(b.end(), rows->begin(), rows->end());
    for (int t = 0; t < 10; ++t) {
      EXPECT_EQ(b[t]->episode_step(), t);
      EXPECT_EQ(b[t]->offset(), t % 3);
      EXPECT_EQ(b[t]->GetData()->bytes, Float(t).bytes) << t;
    }
    EXPECT_EQ(ChunksOf(a), ChunksOf(b)) << "delta " << delta;
    EXPECT_EQ(b[9]->GetChunk(), nullptr);
    EXPECT_EQ(appended->GetKeepKeys().size(), batched->GetKeepKeys().size());
  }
}

TEST(ChunkerTest, AppendRowsChecksLikeAppend) {
  auto chunker = MakeChunker(2, 4);
  ASSERT_TRUE(chunker->Append(Float(1), 1, 0).ok());
  Tensor other = FloatRows(0, 2);
  other.dtype = tensorflow::DT_INT32;
  EXPECT_EQ(chunker->AppendRows(other, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chunker->AppendRows(Float(1), 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);  // Rows of the wrong shape.
  EXPECT_EQ(chunker->AppendRows(FloatRows(0, 2), 1, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A scalar has no rows.
  Tensor scalar;
  scalar.dtype = tensorflow::DT_FLOAT;
  scalar.bytes = std::string(4, '\0');
  EXPECT_EQ(chunker->AppendRows(scalar, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(chunker->AppendRows(FloatRows(0, 0), 1, 1)->empty());
  // A new episode finalizes the buffered step first.
  auto refs = *chunker->AppendRows(FloatRows(5, 2), 2, 0);
  EXPECT_NE(refs[0]->chunk_key(), 0);
  EXPECT_EQ(refs[0]->GetChunk()->sequence_range().episode_id(), 2);
  EXPECT_EQ(refs[1]->GetData()->bytes, Float(6).bytes);
}

TEST(ChunkerTest, CellsDoNotKeepTheCallersMemory) {
  // Whether a cell is compressed at once (length 1, or rows filling whole
  // chunks), buffered, or delta-encoded later, what the caller's memory
  // holds after the call must not matter.
  for (int length : {1, 2}) {
    for (bool delta : {false, true}) {
      auto chunker = std::make_shared<Chunker>(
          0, std::make_shared<ConstantChunkerOptions>(length, 4, delta));
      Tensor step = Float(1);
      auto first = chunker->Append(step, 3, 0);
      ASSERT_TRUE(first.ok()) << first.status();
      step.bytes.assign(step.bytes.size(), '\x7f');
      Tensor rows = FloatRows(2, 3);
      auto more = chunker->AppendRows(rows, 3, 1);
      ASSERT_TRUE(more.ok()) << more.status();
      rows.bytes.assign(rows.bytes.size(), '\x7f');
      ASSERT_TRUE(chunker->Flush().ok());
      EXPECT_EQ((*first)->GetData()->bytes, Float(1).bytes)
          << length << " " << delta;
      for (int t = 0; t < 3; ++t) {
        EXPECT_EQ((*more)[t]->GetData()->bytes, Float(2 + t).bytes)
            << length << " " << delta << " " << t;
      }
    }
  }
}

TEST(ChunkerTest, ViewsMustHoldTheirElements) {
  auto chunker = MakeChunker(1, 1);
  Tensor step = Float(1);
  TensorView short_bytes = step;
  short_bytes.bytes.remove_suffix(1);
  EXPECT_EQ(chunker->Append(short_bytes, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  Tensor two_rows = FloatRows(0, 2);
  TensorView too_many_rows = two_rows;
  too_many_rows.shape[0] = 3;
  EXPECT_EQ(chunker->AppendRows(too_many_rows, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing was appended.
  EXPECT_TRUE(chunker->GetKeepKeys().empty());
  EXPECT_TRUE(chunker->Append(step, 1, 0).ok());
}

TEST(ChunkerTest, ConfigOnlyBetweenChunks) {
  auto chunker = MakeChunker(2, 2);
  ASSERT_TRUE(chunker->Append(Float(1), 1, 0).ok());
  EXPECT_EQ(chunker->ApplyConfig(std::make_shared<ConstantChunkerOptions>(1, 1))
                .code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(chunker->Flush().ok());
  EXPECT_TRUE(
      chunker->ApplyConfig(std::make_shared<ConstantChunkerOptions>(1, 1))
          .ok());
  EXPECT_EQ(chunker->ApplyConfig(std::make_shared<ConstantChunkerOptions>(3, 2))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// Scores the length `options` asks for once: chunks of `bytes_per_step`
// bytes a step, and items of one step of a chunk of incompressible steps of
// `step_bytes` each. Returns the length scored.
int ScoreOnce(AutoTunedChunkerOptions& options, int64_t bytes_per_step,
              int64_t step_bytes) {
  const int length = options.GetMaxChunkLength();
  for (int i = 0; i < AutoTunedChunkerOptions::kNumChunksToScore; ++i) {
    options.OnChunkFinalized(bytes_per_step * length, length);
  }
  std::mt19937 random(length);
  Tensor step;
  step.dtype = tensorflow::DT_UINT8;
  step.shape = {step_bytes};
  auto chunker = MakeChunker(length, length);
  std::vector<std::shared_ptr<CellRef>> refs;
  for (int s = 0; s < length; ++s) {
    step.bytes.resize(step_bytes);
    for (char& byte : step.bytes) byte = static_cast<char>(random());
    refs.push_back(*chunker->Append(step, 1, s));
  }
  for (int i = 0; i < AutoTunedChunkerOptions::kNumItemsToScore; ++i) {
    options.OnItemFinalized({refs.back()});
  }
  options.OnChunkFinalized(bytes_per_step * length, length);  // Scores.
  return length;
}

TEST(AutoTunedChunkerOptionsTest, GrowsWhileItPaysAndStaysInRange) {
  // Items of one step of a few bytes: the length grows from 1 (the fixed
  // cost of each chunk outweighs the few bytes items send more) and never
  // leaves [1, num_keep_alive_refs].
  AutoTunedChunkerOptions options(/*num_keep_alive_refs=*/6);
  EXPECT_EQ(options.GetMaxChunkLength(), 1);
  std::vector<int> lengths;
  for (int round = 0; round < 40; ++round) {
    lengths.push_back(ScoreOnce(options, 100, 8));
  }
  for (int length : lengths) {
    EXPECT_GE(length, 1);
    EXPECT_LE(length, 6);
  }
  EXPECT_GT(*std::max_element(lengths.begin(), lengths.end()), 1);
}

TEST(AutoTunedChunkerOptionsTest, AtABoundTheLengthStaysUntilTheCostRises) {
  // Items of one step of 4 KiB, incompressible: length 1 is cheapest (each
  // item sends its whole chunk), and once there the length stays (it moved
  // on to 3, 2 and 1 again when a tie at the bound, or a byte more for a
  // longer chunk key, turned it back). Much costlier chunks there (the
  // data changed) move it again.
  AutoTunedChunkerOptions options(/*num_keep_alive_refs=*/6);
  std::vector<int> lengths;
  for (int round = 0; round < 30; ++round) {
    lengths.push_back(ScoreOnce(options, 4096, 4096));
  }
  EXPECT_EQ(lengths[1], 3);  // The first move grows.
  EXPECT_EQ(std::vector<int>(lengths.end() - 20, lengths.end()),
            std::vector<int>(20, 1));
  ScoreOnce(options, 2 * 4096, 4096);
  EXPECT_EQ(options.GetMaxChunkLength(), 3);
}

TEST(AutoTunedChunkerOptionsTest, SmallStepsGetLongChunks) {
  // Items of one step of 4 bytes: bytes alone make length 1 the cheapest,
  // but each chunk costs kChunkCostBytes besides (writer and server handle
  // each), so the length grows, here up to num_keep_alive_refs, and stays.
  AutoTunedChunkerOptions options(/*num_keep_alive_refs=*/6);
  std::vector<int> lengths;
  for (int round = 0; round < 30; ++round) {
    lengths.push_back(ScoreOnce(options, 4, 4));
  }
  EXPECT_EQ(std::vector<int>(lengths.end() - 20, lengths.end()),
            std::vector<int>(20, 6));
}

TEST(AutoTunedChunkerOptionsTest, ItemsSentAfterLaterChunksDoNotMoveTheLength) {
  // A writer appends a batch of 32 steps, then makes an item of each step;
  // its thread sends them while the next batch is appended, whose chunks
  // may have another length. Items scored with the length of later chunks
  // made it drift (to 14 in this test, mean 9.3; in a real writer items of
  // 28 KB steps came to send 380 KB each). With incompressible steps and
  // items of one step, length 1 is cheapest (each item sends its whole
  // chunk): the length stays near it.
  auto options = std::make_shared<AutoTunedChunkerOptions>(32);
  auto chunker = std::make_shared<Chunker>(0, options);
  std::mt19937 random(7);
  Tensor step;
  step.dtype = tensorflow::DT_UINT8;
  step.shape = {1024};
  step.bytes.resize(1024);
  std::vector<std::shared_ptr<CellRef>> unsent;
  std::vector<int64_t> sent_lengths;
  int32_t t = 0;
  for (int batch = 0; batch < 300; ++batch) {
    for (int i = 0; i < 32; ++i, ++t) {
      for (char& byte : step.bytes) byte = static_cast<char>(random());
      auto ref = chunker->Append(step, 1, t);
      ASSERT_TRUE(ref.ok()) << ref.status();
      unsent.push_back(*std::move(ref));
    }
    // Items go in order once their chunk is there, the last batch's items
    // behind (the writer's thread sends them while the next batch comes).
    size_t ready = 0;
    while (ready + 32 < unsent.size() && unsent[ready]->IsReady()) {
      options->OnItemFinalized({unsent[ready]});
      if (batch >= 200) {
        sent_lengths.push_back(unsent[ready]
                                   ->GetChunk()
                                   ->data()
                                   .tensors(0)
                                   .tensor_shape()
                                   .dim(0)
                                   .size());
      }
      ++ready;
    }
    unsent.erase(unsent.begin(), unsent.begin() + ready);
  }
  ASSERT_FALSE(sent_lengths.empty());
  double mean = 0;
  for (int64_t length : sent_lengths) mean += length;
  mean /= sent_lengths.size();
  EXPECT_LE(*std::max_element(sent_lengths.begin(), sent_lengths.end()), 3);
  EXPECT_LE(mean, 2.5);
}

}  // namespace
}  // namespace deepmind::reverb
