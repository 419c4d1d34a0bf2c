// Writes the seed corpora of the fuzz targets, fuzz/corpus/<target>/, from
// libreverb's own encoders: valid inputs of each parser, small, covering
// its main paths (every wire type, compressed and string tensors, delta
// encoding, zlib files, nested signatures). Run by fuzz/make_seeds.sh; the
// output is checked in, so that a change of an encoder shows as a change of
// the corpus.
//
// Usage: fuzz_make_seeds <corpus directory>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cc/checkpointing/checkpointer.h"
#include "cc/checkpointing/record_io.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/prioritized.h"
#include "cc/support/varint.h"
#include "cc/tensor/compression.h"
#include "cc/wire/chunk_rows.h"
#include "cc/wire/insert_request.h"
#include "grpcpp/support/slice.h"
#include "reverb/cc/reverb_service.pb.h"
#include "snappy.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

namespace fs = std::filesystem;
using testing::MakeStrings;
using testing::MakeTensor;

fs::path root;

void Write(const std::string& target, const std::string& name,
           const std::string& bytes) {
  fs::create_directories(root / target);
  std::ofstream(root / target / name, std::ios::binary) << bytes;
}

tensorflow::TensorProto Compressed(const Tensor& tensor) {
  tensorflow::TensorProto proto;
  CompressTensorAsProto(tensor, &proto).IgnoreError();  // Valid tensors.
  return proto;
}

std::vector<Tensor> SampleTensors() {
  std::vector<int32_t> steps(24);
  for (int i = 0; i < 24; ++i) steps[i] = i * i;
  return {
      MakeTensor<float>(tensorflow::DT_FLOAT, {2, 3}, {1, 2, 3, 4, 5, 6}),
      MakeTensor<int32_t>(tensorflow::DT_INT32, {6, 4}, steps),
      MakeTensor<uint8_t>(tensorflow::DT_UINT8, {2, 2, 2},
                          {0, 0, 0, 0, 7, 7, 7, 7}),
      MakeTensor<double>(tensorflow::DT_DOUBLE, {}, {2.5}),
      MakeStrings({2}, {"ab", "cde"}),
  };
}

// A chunk of two steps of a float and a string column (`delta`: an int32
// column, delta encoded, instead of the strings).
std::shared_ptr<ChunkData> MakeChunk(uint64_t key, bool delta) {
  auto chunk = std::make_shared<ChunkData>();
  chunk->set_chunk_key(key);
  chunk->mutable_sequence_range()->set_episode_id(5);
  chunk->mutable_sequence_range()->set_start(10);
  chunk->mutable_sequence_range()->set_end(11);
  Tensor second =
      delta ? MakeTensor<int32_t>(tensorflow::DT_INT32, {2, 2}, {1, 2, 3, 4})
            : MakeStrings({2}, {"x", "yz"});
  if (delta) DeltaEncode(&second, /*encode=*/true);
  chunk->set_delta_encoded(delta);
  *chunk->mutable_data()->add_tensors() = Compressed(
      MakeTensor<float>(tensorflow::DT_FLOAT, {2, 3}, {1, 2, 3, 4, 5, 6}));
  *chunk->mutable_data()->add_tensors() = Compressed(second);
  chunk->set_data_tensors_len(2);
  chunk->set_data_uncompressed_size(40);
  return chunk;
}

// An item of `table` over rows [1, 2) of chunk 1 and [0, 2) of chunk 2,
// column by column.
PrioritizedItem MakeItem(uint64_t key, const std::string& table) {
  PrioritizedItem item;
  item.set_key(key);
  item.set_table(table);
  item.set_priority(1.5);
  for (int index = 0; index < 2; ++index) {
    auto* column = item.mutable_flat_trajectory()->add_columns();
    auto* first = column->add_chunk_slices();
    first->set_chunk_key(1);
    first->set_offset(1);
    first->set_length(1);
    first->set_index(index);
    auto* second = column->add_chunk_slices();
    second->set_chunk_key(2);
    second->set_offset(0);
    second->set_length(2);
    second->set_index(index);
  }
  auto* squeezed = item.mutable_flat_trajectory()->add_columns();
  squeezed->set_squeeze(true);
  auto* slice = squeezed->add_chunk_slices();
  slice->set_chunk_key(1);
  slice->set_offset(0);
  slice->set_length(1);
  slice->set_index(0);
  return item;
}

std::string Flat(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  buffer.Dump(&slices).IgnoreError();
  std::string bytes;
  for (const auto& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

void InsertRequests() {
  const std::vector<std::shared_ptr<const ChunkData>> chunks = {
      MakeChunk(1, false), MakeChunk(2, true)};
  InsertStreamRequest items;
  *items.add_items() = MakeItem(7, "a");
  items.add_keep_chunk_keys(2);
  const std::string full = Flat(EncodeInsertRequest(items, chunks));
  Write("insert_request", "chunks_items_keys", full);
  Write("insert_request", "chunk_only",
        Flat(EncodeInsertRequest(InsertStreamRequest(), {chunks[0]})));
  Write("insert_request", "items_only", items.SerializeAsString());
  Write("wire_reader", "insert_request", full);
  Write("wire_reader", "item", MakeItem(7, "a").SerializeAsString());
  std::string every_type;  // Varint, fixed64, length-delimited, fixed32.
  PutTag(1, kVarint, &every_type);
  PutVarint64(UINT64_MAX, &every_type);
  PutTag(2, kFixed64, &every_type);
  every_type.append(8, '\x01');
  PutTag(3, kLengthDelimited, &every_type);
  PutVarint64(3, &every_type);
  every_type.append("abc");
  PutTag(536870911, kFixed32, &every_type);
  every_type.append(4, '\x02');
  Write("wire_reader", "every_type", every_type);
  Write("chunk", "strings", chunks[0]->SerializeAsString());
  Write("chunk", "delta", chunks[1]->SerializeAsString());
  Write("chunk", "test_util",
        testing::MakeChunkData(3, 1, 4).SerializeAsString());
}

void SampleResponses() {
  SampleStreamResponse whole;
  auto* entry = whole.add_entries();
  entry->mutable_info()->set_probability(0.5);
  entry->mutable_info()->set_table_size(3);
  *entry->mutable_info()->mutable_item() = MakeItem(7, "a");
  *entry->add_data() = *MakeChunk(1, false);
  *entry->add_data() = *MakeChunk(2, false);
  entry->set_end_of_sequence(true);
  Write("sample_response", "one_entry", whole.SerializeAsString());
  // The same sample in two entries, then a sample of one int32 step.
  SampleStreamResponse split;
  auto* first = split.add_entries();
  *first->mutable_info() = entry->info();
  *first->add_data() = *MakeChunk(1, true);
  auto* second = split.add_entries();
  *second->add_data() = *MakeChunk(2, true);
  second->set_end_of_sequence(true);
  const TableItem int32_item = testing::MakeInt32Item(9, 1.0, 42);
  auto* third = split.add_entries();
  *third->mutable_info()->mutable_item() = int32_item.item;
  *third->add_data() = int32_item.chunks[0]->ToProto();
  third->set_end_of_sequence(true);
  Write("sample_response", "split_entries", split.SerializeAsString());
  // A sample of one step of 5,000 int32 (incompressible: stored as it is),
  // whose chunk a client leaves where it was received.
  std::vector<int32_t> values(5000);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<int32_t>(i * 2654435761u);
  }
  ChunkData large;
  large.set_chunk_key(11);
  large.mutable_sequence_range()->set_episode_id(1);
  CompressTensorAsProto(
      testing::MakeTensor<int32_t>(tensorflow::DT_INT32, {1, 5000}, values),
      large.mutable_data()->add_tensors())
      .IgnoreError();  // A valid tensor: cannot fail.
  large.set_data_tensors_len(1);
  large.set_data_uncompressed_size(4 * values.size());
  SampleStreamResponse apart;
  auto* sample = apart.add_entries();
  *sample->mutable_info()->mutable_item() =
      testing::MakeItem(12, 1.0, {std::make_shared<Chunk>(large)}).item;
  *sample->add_data() = large;
  sample->set_end_of_sequence(true);
  Write("sample_response", "large_chunk", apart.SerializeAsString());
  // Row 2 of a chunk of four such rows, sent trimmed (chunk_rows.h).
  std::vector<int32_t> rows(4 * values.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<int32_t>(i * 2654435761u);
  }
  ChunkData four = large;
  four.set_chunk_key(13);
  four.mutable_sequence_range()->set_end(3);
  four.mutable_data()->clear_tensors();
  CompressTensorAsProto(
      testing::MakeTensor<int32_t>(tensorflow::DT_INT32, {4, 5000}, rows),
      four.mutable_data()->add_tensors())
      .IgnoreError();  // A valid tensor: cannot fail.
  four.set_data_uncompressed_size(4 * rows.size());
  const std::optional<absl::Cord> trimmed =
      TrimChunk(Chunk(four), RowRange{2, 1});
  SampleStreamResponse trim;
  auto* row = trim.add_entries();
  auto* slice = row->mutable_info()
                    ->mutable_item()
                    ->mutable_flat_trajectory()
                    ->add_columns()
                    ->add_chunk_slices();
  slice->set_chunk_key(13);
  slice->set_offset(2);
  slice->set_length(1);
  if (trimmed.has_value()) {
    row->add_data()->ParseFromString(std::string(*trimmed));
  }
  row->set_end_of_sequence(true);
  Write("sample_response", "trimmed_chunk", trim.SerializeAsString());
}

void Tensors() {
  int i = 0;
  for (const Tensor& tensor : SampleTensors()) {
    Write("tensor", "tensor_" + std::to_string(i++),
          Compressed(tensor).SerializeAsString());
  }
  tensorflow::TensorProto string_val;  // As TensorFlow may write strings.
  string_val.set_dtype(tensorflow::DT_STRING);
  string_val.mutable_tensor_shape()->add_dim()->set_size(2);
  string_val.add_string_val("p");
  string_val.add_string_val("qr");
  Write("tensor", "string_val", string_val.SerializeAsString());
}

void Snappy() {
  std::string runs(300, 'a');
  runs += std::string(200, 'b');
  std::string pixels;
  for (int i = 0; i < 100; ++i) pixels += "\x10\x20\x30\x40";
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"runs", runs},
      {"pixels", pixels},
      {"random", testing::RandomBytes(200, 1)},
      {"text", "replay buffers replay experience; buffers of experience"},
      {"empty", ""}};
  for (const auto& [name, input] : inputs) {
    std::string compressed;
    snappy::Compress(input.data(), input.size(), &compressed);
    Write("snappy", name, compressed);
  }
}

tensorflow::StructuredValue Spec(const std::string& name,
                                 tensorflow::DataType dtype,
                                 std::vector<int64_t> dims) {
  tensorflow::StructuredValue value;
  auto* spec = value.mutable_tensor_spec_value();
  spec->set_name(name);
  spec->set_dtype(dtype);
  for (int64_t dim : dims) spec->mutable_shape()->add_dim()->set_size(dim);
  return value;
}

void Signatures() {
  tensorflow::StructuredValue signature;
  auto& fields = *signature.mutable_dict_value()->mutable_fields();
  fields["obs"] = Spec("", tensorflow::DT_FLOAT, {-1, 84, 84});
  auto* tuple = fields["act"].mutable_tuple_value();
  *tuple->add_values() = Spec("a0", tensorflow::DT_INT32, {});
  *tuple->add_values() = Spec("", tensorflow::DT_STRING, {2});
  auto* named = fields["info"].mutable_named_tuple_value();
  named->set_name("Info");
  auto* pair = named->add_values();
  pair->set_key("step");
  *pair->mutable_value() = Spec("", tensorflow::DT_INT64, {});
  auto* bounded = fields["r"].mutable_bounded_tensor_spec_value();
  bounded->set_dtype(tensorflow::DT_DOUBLE);
  bounded->mutable_shape()->set_unknown_rank(true);
  *bounded->mutable_minimum() =
      Compressed(MakeTensor<double>(tensorflow::DT_DOUBLE, {}, {0.0}));
  Write("signature", "nest", signature.SerializeAsString());
  tensorflow::StructuredValue list;
  *list.mutable_list_value()->add_values() =
      Spec("x", tensorflow::DT_BOOL, {3});
  Write("signature", "list", list.SerializeAsString());
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// Files written by RecordWriter, as the record reader fuzzer takes them: a
// first byte 0 (the file as it is) or 1 (the fuzzer compresses it).
void Records(const fs::path& scratch) {
  for (int zlib_level : {-1, 6}) {
    const fs::path path = scratch / "records";
    auto writer = *RecordWriter::Create(path.string(), zlib_level);
    writer->Write("first").IgnoreError();
    writer->Write("").IgnoreError();
    writer->Write(std::string(300, 'r')).IgnoreError();
    writer->Close().IgnoreError();
    const std::string file = ReadFile(path);
    Write("record_reader", zlib_level < 0 ? "uncompressed" : "zlib",
          std::string(1, '\0') + file);
    if (zlib_level < 0) {
      Write("record_reader", "compressed_by_fuzzer",
            std::string(1, '\1') + file);
    }
  }
}

// A checkpoint saved by Checkpointer, as the checkpoint fuzzer takes it:
// every record of tables.tfrecord, items.tfrecord and chunks.tfrecord as a
// file byte (0, 1, 2), a varint32 length and the record.
void Checkpoint(const fs::path& scratch) {
  std::vector<std::shared_ptr<Table>> tables;
  for (const std::string name : {"a", "b"}) {
    tables.push_back(*Table::Create(
        name, std::make_unique<PrioritizedSelector>(0.8),
        std::make_unique<FifoSelector>(), 10, 0, *MinSizeRateLimiter(1)));
  }
  for (uint64_t key = 1; key <= 3; ++key) {
    TableItem item = testing::MakeInt32Item(key, key, 1);
    item.item.set_table(tables[key % 2]->name());
    tables[key % 2]->InsertOrAssign(std::move(item)).IgnoreError();
  }
  TableItem shared = testing::MakeInt32Item(4, 1.0, 2);
  shared.item.set_table("b");
  tables[1]->InsertOrAssign(shared).IgnoreError();
  const std::string path =
      *Checkpointer(scratch.string()).Save(tables, /*keep_latest=*/1);
  std::string input;
  int file = 0;
  for (const char* name : {Checkpointer::kTablesFile, Checkpointer::kItemsFile,
                           Checkpointer::kChunksFile}) {
    auto reader = *RecordReader::Open((fs::path(path) / name).string());
    for (auto record = reader->Read(); record.ok(); record = reader->Read()) {
      input.push_back(static_cast<char>(file));
      PutVarint32(static_cast<uint32_t>(record->size()), &input);
      input += *record;
    }
    ++file;
  }
  Write("checkpoint", "two_tables", input);
}

// Requests as Prometheus and other clients send them to the metrics port.
void HttpRequests() {
  Write("http_request", "prometheus_scrape",
        "GET /metrics HTTP/1.1\r\nHost: localhost:9100\r\n"
        "User-Agent: Prometheus/2.42.0\r\nAccept: "
        "application/openmetrics-text;version=1.0.0,text/plain;"
        "version=0.0.4;q=0.5\r\nAccept-Encoding: gzip\r\n"
        "X-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n");
  Write("http_request", "query_lf", "GET /metrics?name[]=x HTTP/1.0\n\n");
  Write("http_request", "post",
        "POST /other HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  Write("http_request", "incomplete", "GET /metrics HTTP/1.1\r\nHost: x\r\n");
}

}  // namespace
}  // namespace deepmind::reverb

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using namespace deepmind::reverb;  // NOLINT(build/namespaces)
  if (argc != 2) {
    std::fprintf(stderr, "Usage: %s <corpus directory>\n", argv[0]);
    return 2;
  }
  root = argv[1];
  const fs::path scratch = fs::temp_directory_path() /
                           ("reverb_seeds_" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  InsertRequests();
  SampleResponses();
  Tensors();
  Snappy();
  Signatures();
  Records(scratch);
  Checkpoint(scratch);
  HttpRequests();
  fs::remove_all(scratch);
  return 0;
}
