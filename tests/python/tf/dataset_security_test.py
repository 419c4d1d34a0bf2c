"""The datasets and TFClient over TLS with an auth token, and over a unix
socket with a token (docs/concepts.md, "Security"): the kernels make their
own clients from the address, with the credentials the Python objects were
given; without them they are refused with the server's status.

Addresses are spelled 127.0.0.1:PORT here (other tests use localhost:PORT),
so that the credentials registered for them never meet another test's
server on a reused port.
"""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import reverb

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tls_certs  # pylint: disable=g-import-not-at-top,wrong-import-position

pytestmark = pytest.mark.skipif(not tls_certs.available(),
                                reason='needs the openssl command')

_TOKEN = 'tf-token-81be'


@pytest.fixture(name='certs', scope='module')
def certs_fixture(tmp_path_factory):
  return tls_certs.make(tmp_path_factory.mktemp('certs'))


def _tables():
  return [
      reverb.Table('fixed', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                   1000, reverb.rate_limiters.MinSize(1), max_times_sampled=1,
                   signature={'step': tf.TensorSpec([2], tf.int64)}),
      reverb.Table.queue('queue', 100),
  ]


def _fill(client):
  with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    for t in range(6):
      writer.append({'step': np.int64(t)})
      if t >= 1:
        writer.create_item('fixed', 1.0,
                           {'step': writer.history['step'][-2:]})


@pytest.fixture(name='secured')
def secured_fixture(certs):
  """(address, client TlsOptions) of a new server with TLS and a token (a
  new address, so that credentials registered by other tests for it do not
  apply)."""
  server = reverb.Server(_tables(), tls=reverb.TlsOptions(
      certificate_chain=certs.server_chain, private_key=certs.server_key),
                         auth_token=_TOKEN)
  address = f'127.0.0.1:{server.port}'
  tls = reverb.TlsOptions(root_certificates=certs.ca)
  yield address, tls
  server.stop()


def test_datasets_and_tf_client_over_tls_with_token(secured):
  address, tls = secured
  _fill(reverb.Client(address, tls=tls, auth_token=_TOKEN))
  dataset = reverb.TrajectoryDataset.from_table_signature(
      address, 'fixed', max_in_flight_samples_per_worker=2, max_samples=2,
      tls=tls, auth_token=_TOKEN)
  assert [s.data['step'].numpy().tolist() for s in dataset] == [[0, 1],
                                                                [1, 2]]
  client = reverb.TFClient(address, tls=tls, auth_token=_TOKEN)
  for value in (1.5, 2.5, 3.5):
    client.insert([tf.constant(value)], tf.constant(['queue']),
                  tf.constant([1.0], tf.float64))
  assert client.sample('queue', [tf.float32]).data[0].numpy() == 1.5
  timesteps = reverb.TimestepDataset(
      address, 'queue', dtypes=(tf.float32,), shapes=([],),
      max_in_flight_samples_per_worker=1, num_workers_per_iterator=1,
      max_samples=2, tls=tls, auth_token=_TOKEN)
  assert [float(s.data[0]) for s in timesteps] == [2.5, 3.5]
  iterator = reverb.ReplayIterator(address, 'fixed', 1, max_samples=1,
                                   tls=tls, auth_token=_TOKEN)
  assert next(iterator).data['step'].tolist() == [[2, 3]]


def test_wrong_token_is_refused_by_the_kernels(secured):
  address, tls = secured
  dataset = reverb.TrajectoryDataset(
      address, 'queue', dtypes=(tf.float32,), shapes=([],),
      max_in_flight_samples_per_worker=1, max_samples=1, tls=tls,
      auth_token='wrong')
  with pytest.raises(tf.errors.UnauthenticatedError, match='wrong auth token'):
    list(dataset)
  client = reverb.TFClient(address, tls=tls, auth_token='wrong')
  with pytest.raises(tf.errors.UnauthenticatedError, match='wrong auth token'):
    client.insert([tf.constant(1.0)], tf.constant(['queue']),
                  tf.constant([1.0], tf.float64))


def test_tf_client_with_new_credentials_for_an_address_uses_them(secured):
  # Eager mode caches the ops' kernels, so the second TFClient's calls run
  # on the kernels of the first one's: those make a new client once the
  # credentials of the address changed.
  address, tls = secured
  wrong = reverb.TFClient(address, tls=tls, auth_token='wrong')
  args = ([tf.constant(1.0)], tf.constant(['queue']),
          tf.constant([1.0], tf.float64))
  with pytest.raises(tf.errors.UnauthenticatedError, match='wrong auth token'):
    wrong.insert(*args)
  right = reverb.TFClient(address, tls=tls, auth_token=_TOKEN)
  right.insert(*args)
  assert right.sample('queue', [tf.float32]).data[0].numpy() == 1.0
  # The latest registration wins for the address: the first TFClient's
  # calls now carry the right token too.
  wrong.insert(*args)
  assert reverb.Client(address, tls=tls, auth_token=_TOKEN).server_info(
      timeout=10)['queue'].current_size == 1


def test_credentials_need_string_addresses(secured):
  address, tls = secured
  with pytest.raises(ValueError, match='string'):
    reverb.TFClient(tf.constant(address), tls=tls)


def test_token_over_unix_socket(tmp_path):
  path = tmp_path / 'secured.sock'
  server = reverb.Server(_tables(), port=None, unix_socket_path=path,
                         auth_token=_TOKEN)
  try:
    address = f'unix:{path}'
    _fill(reverb.Client(address, auth_token=_TOKEN))
    dataset = reverb.TrajectoryDataset.from_table_signature(
        address, 'fixed', max_in_flight_samples_per_worker=2, max_samples=1,
        auth_token=_TOKEN)
    assert [s.data['step'].numpy().tolist() for s in dataset] == [[0, 1]]
  finally:
    server.stop()
