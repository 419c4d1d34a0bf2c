"""TrajectoryDataset and TimestepDataset return what was written: the steps
of ../sample_content_test.py (every numeric dtype, strings, compressed,
stored and delta-encoded chunks), over gRPC and in process."""

import importlib.util
import pathlib

import numpy as np
import pytest

import reverb

_SPEC = importlib.util.spec_from_file_location(
    'sample_content_test',
    pathlib.Path(__file__).resolve().parents[1] / 'sample_content_test.py')
content = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(content)

_LENGTHS = content.LENGTHS


@pytest.fixture(name='server', scope='module')
def server_fixture():
  server = content.filled_server()
  yield server
  server.stop()


@pytest.fixture(name='address', params=['grpc', 'in_process'])
def address_fixture(server, request, monkeypatch):
  return content.address_on(server, request.param, monkeypatch)


def _specs(tf, leading):
  dtypes = tuple(tf.as_dtype(np.asarray(c).dtype) for c in content.step(0))
  shapes = tuple(tf.TensorShape(leading + list(np.shape(c)))
                 for c in content.step(0))
  return dtypes, shapes


@pytest.mark.parametrize('table', sorted(_LENGTHS))
def test_trajectory_dataset_returns_the_steps(tf, address, table):
  dtypes, shapes = _specs(tf, [_LENGTHS[table]])
  dataset = reverb.TrajectoryDataset(
      address, table, dtypes=dtypes, shapes=shapes,
      max_in_flight_samples_per_worker=10, max_samples=14)
  batches = list(dataset.batch(5))
  assert [len(b.info.key) for b in batches] == [5, 5, 4]
  for batch in batches:
    columns = [c.numpy() for c in batch.data]
    content.check_steps(columns, columns[0][:, 0], batched=True)


@pytest.mark.parametrize('table', sorted(_LENGTHS))
def test_timestep_dataset_returns_the_steps(tf, address, table):
  dtypes, shapes = _specs(tf, [])
  dataset = reverb.TimestepDataset(
      address, table, dtypes=dtypes, shapes=shapes,
      max_in_flight_samples_per_worker=4, max_samples=4)
  count = 0
  for timestep in dataset:
    columns = [c.numpy()[np.newaxis] for c in timestep.data]
    content.check_steps(columns, columns[0][0])
    count += 1
  assert count == 4 * _LENGTHS[table]
