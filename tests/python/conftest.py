"""Shared helpers for the Python tests."""

import pytest

import reverb
from reverb.cc import schema_pb2
from reverb import tf_protos


def make_item(key: int, priority: float = 1.0, episode: int = 1,
              table: str = 'table'):
  """(serialized PrioritizedItem, [serialized ChunkData]) of a one-step item
  whose chunk holds the float32 value `key`."""
  chunk = schema_pb2.ChunkData(chunk_key=key + 1_000_000, data_tensors_len=1)
  chunk.sequence_range.episode_id = episode
  tensor = chunk.data.tensors.add(dtype=tf_protos.DT_FLOAT)
  tensor.tensor_shape.dim.add(size=1)
  tensor.float_val.append(float(key))
  item = schema_pb2.PrioritizedItem(key=key, table=table, priority=priority)
  item.flat_trajectory.columns.add().chunk_slices.add(
      chunk_key=chunk.chunk_key, offset=0, length=1, index=0)
  return item.SerializeToString(), [chunk.SerializeToString()]


@pytest.fixture(name='make_item')
def make_item_fixture():
  return make_item


@pytest.fixture(name='without_tensorflow_specs')
def without_tensorflow_specs_fixture(monkeypatch):
  """Specs are made as in a process without TensorFlow (`reverb.specs`),
  even when TensorFlow is installed or other tests of the run imported it."""
  from reverb import structured_value  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(structured_value, '_tf_spec_classes', lambda: None)
  monkeypatch.setattr(structured_value, '_load_tensorflow', lambda: None)


@pytest.fixture(name='needs_sharded_client')
def needs_sharded_client_fixture():
  """Skips the test unless `reverb.Client` takes a list of addresses."""
  try:
    reverb.Client(['localhost:1', 'localhost:2'])
  except TypeError:
    pytest.skip('needs reverb.Client over a list of addresses')


@pytest.fixture(name='transport', params=['in_process', 'grpc'])
def transport_fixture(request, monkeypatch):
  """Runs the test twice: clients made in it take the in-process path to a
  server in this process ('in_process', the default), or gRPC
  (REVERB_IN_PROCESS=0, as a server elsewhere)."""
  if request.param == 'grpc':
    monkeypatch.setenv('REVERB_IN_PROCESS', '0')
  else:
    monkeypatch.delenv('REVERB_IN_PROCESS', raising=False)
  return request.param
