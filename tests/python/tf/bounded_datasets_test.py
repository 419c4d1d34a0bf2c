"""The datasets and TFClient in the bounded-calls matrix (no server, a
server frozen after the client connected, one frozen before:
../bounded_matrix.py): each call ends within its bound.

Their clients are made by the op library, with the keepalive of
REVERB_KEEPALIVE_MS, set here for the whole process.
"""

import os
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
# pylint: disable=g-import-not-at-top,wrong-import-position
import bounded_matrix
from bounded_matrix import Cell, SCENARIOS

import reverb
from reverb import errors

tf = pytest.importorskip('tensorflow')

os.environ['REVERB_KEEPALIVE_MS'] = str(bounded_matrix.KEEPALIVE_MS)
_TIMEOUT_MS = int(bounded_matrix.TIMEOUT_S * 1000)
# The op library reports UNAVAILABLE as tf.errors.UnavailableError.
_TF_FAILED = tf.errors.UnavailableError


def _dataset(dataset_class, shape):
  def make(address):
    return dataset_class(
        address, 'table', dtypes=(tf.float32,),
        shapes=(tf.TensorShape(shape),), max_in_flight_samples_per_worker=1)

  def prepare(client, connected):
    address = client.server_address
    if connected:
      # One sample in flight: the call takes those queued and prefetched
      # (far fewer than 100), then waits.
      iterator = iter(make(address))
      next(iterator)
      return lambda: [next(iterator) for _ in range(100)]
    return lambda: next(iter(make(address)))
  return prepare


def _from_table_signature(**kwargs):
  def prepare(client, connected):
    del connected  # A client of its own.
    return lambda: reverb.TrajectoryDataset.from_table_signature(
        client.server_address, 'table', 1, **kwargs)
  return prepare


def _tf_client(call):
  def prepare(client, connected):
    tf_client = reverb.TFClient(client.server_address)
    if connected:
      tf_client.update_priorities('table', [1], [1.0])
    return lambda: call(tf_client)
  return prepare


CELLS = [
    Cell('TrajectoryDataset next', _dataset(reverb.TrajectoryDataset, [1, 3]),
         expected={s: _TF_FAILED for s in SCENARIOS}),
    Cell('TimestepDataset next', _dataset(reverb.TimestepDataset, [3]),
         expected={s: _TF_FAILED for s in SCENARIOS}),
    Cell('TrajectoryDataset.from_table_signature', _from_table_signature()),
    # Its client pings (REVERB_KEEPALIVE_MS): on a frozen connection the
    # keepalive may end it first.
    Cell('TrajectoryDataset.from_table_signature(timeout)',
         _from_table_signature(
             get_signature_timeout_secs=bounded_matrix.TIMEOUT_S),
         timeout=True,
         expected={'frozen_after': (errors.DeadlineExceededError,
                                    RuntimeError)}),
    Cell('TFClient.sample',
         _tf_client(lambda c: c.sample('table', [tf.float32])),
         expected={s: _TF_FAILED for s in SCENARIOS}),
    Cell('TFClient.insert',
         _tf_client(lambda c: c.insert(
             [tf.constant(np.zeros([3], np.float32))], tf.constant(['table']),
             tf.constant([1.0], tf.float64))),
         expected={s: _TF_FAILED for s in SCENARIOS}),
    Cell('TFClient.update_priorities',
         _tf_client(lambda c: c.update_priorities('table', [1], [1.0])),
         expected={s: _TF_FAILED for s in SCENARIOS}),
]


@pytest.fixture(name='matrix', scope='module')
def matrix_fixture():
  with bounded_matrix.run_matrix(CELLS) as outcomes:
    yield outcomes


@pytest.mark.parametrize('scenario', SCENARIOS)
@pytest.mark.parametrize('cell', CELLS, ids=[c.name for c in CELLS])
def test_call_ends_within_its_bound(matrix, cell, scenario):
  assert scenario in matrix, 'the scenario did not run'
  bounded_matrix.check(matrix[scenario][cell.name], cell, scenario)
