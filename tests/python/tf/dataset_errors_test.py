"""The errors of the datasets' constructors and `from_table_signature`,
word for word as dm-reverb's."""

import pytest

import reverb


@pytest.fixture(name='address', scope='module')
def address_fixture():
  def table(name, signature=None):
    return reverb.Table(name, reverb.selectors.Uniform(),
                        reverb.selectors.Fifo(), 10,
                        reverb.rate_limiters.MinSize(1), signature=signature)
  server = reverb.Server([table('c'), table('a'), table('empty', {}),
                          table('b')])
  yield f'localhost:{server.port}'
  server.stop()


@pytest.mark.parametrize('dataset_class',
                         ['TrajectoryDataset', 'TimestepDataset'])
def test_from_table_signature_of_missing_or_unsigned_tables(address,
                                                            dataset_class):
  dataset_class = getattr(reverb, dataset_class)
  with pytest.raises(ValueError) as e:
    dataset_class.from_table_signature(address, 'nope', 10)
  assert str(e.value) == (f'Server at {address} does not contain any table '
                          'named nope. Found: a, b, c, empty.')
  for table in ('a', 'empty'):
    with pytest.raises(ValueError) as e:
      dataset_class.from_table_signature(address, table, 10)
    assert str(e.value) == (
        f'Table {table} at {address} does not have a signature.')


@pytest.mark.parametrize('argument, value, message', [
    ('max_in_flight_samples_per_worker', 0,
     'max_in_flight_samples_per_worker (0) must be a positive integer'),
    ('num_workers_per_iterator', -2,
     'num_workers_per_iterator (-2) must be a positive integer or -1'),
    ('max_samples_per_stream', 0,
     'max_samples_per_stream (0) must be a positive integer or -1'),
    ('rate_limiter_timeout_ms', -2,
     'rate_limiter_timeout_ms (-2) must be an integer >= -1'),
    ('rate_limiter_timeout_ms', -2.5,
     'rate_limiter_timeout_ms (-2) must be an integer >= -1'),
    ('max_samples', -7, 'max_samples (-7) must be a positive integer or -1'),
])
def test_arguments_out_of_range(tf, address, argument, value, message):
  for dataset_class in (reverb.TrajectoryDataset, reverb.TimestepDataset):
    with pytest.raises(ValueError) as e:
      dataset_class(address, 'a', dtypes={'x': tf.float32},
                    shapes={'x': tf.TensorShape([2])},
                    **{'max_in_flight_samples_per_worker': 10,
                       argument: value})
    assert str(e.value) == message
