"""reverb.rate_limiters: settings and validation (spec section 2.3)."""

import logging
import sys

import pytest

from reverb import rate_limiters


def settings(limiter):
  internal = limiter.internal_limiter
  return (internal.samples_per_insert, internal.min_size_to_sample,
          internal.min_diff, internal.max_diff)


def test_min_size():
  assert settings(rate_limiters.MinSize(3)) == (
      1.0, 3, -sys.float_info.max, sys.float_info.max)
  with pytest.raises(ValueError):
    rate_limiters.MinSize(0)


def test_sample_to_insert_ratio_with_scalar_error_buffer():
  limiter = rate_limiters.SampleToInsertRatio(
      samples_per_insert=2.0, min_size_to_sample=10, error_buffer=5.0)
  assert settings(limiter) == (2.0, 10, 15.0, 25.0)


def test_sample_to_insert_ratio_with_explicit_range():
  limiter = rate_limiters.SampleToInsertRatio(1.5, 4, (-3.0, 9.0))
  assert settings(limiter) == (1.5, 4, -3.0, 9.0)
  with pytest.raises(ValueError):
    rate_limiters.SampleToInsertRatio(1.5, 4, (1.0, 2.0, 3.0))


@pytest.mark.parametrize('spi, min_size, error_buffer', [
    (0.0, 10, 100.0),        # samples_per_insert must be > 0.
    (-1.0, 10, 100.0),
    (4.0, 10, 3.9),          # Buffer narrower than 2 * max(1, spi).
    (0.5, 10, 0.9),          # Buffer narrower than 2.
    (1.0, 10, (11.0, 20.0)),  # min_diff above spi * min_size.
    (1.0, 0, 10.0),          # min_size_to_sample must be >= 1.
])
def test_sample_to_insert_ratio_validation(spi, min_size, error_buffer):
  with pytest.raises(ValueError):
    rate_limiters.SampleToInsertRatio(spi, min_size, error_buffer)


def test_sample_to_insert_ratio_warns_about_possible_deadlock(caplog):
  with caplog.at_level(logging.WARNING):
    rate_limiters.SampleToInsertRatio(1.0, 100, (-10.0, 10.0))
  assert 'concurrently' in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    rate_limiters.SampleToInsertRatio(1.0, 100, 10.0)
  assert not caplog.text


def test_queue_and_stack():
  assert settings(rate_limiters.Queue(7)) == (1.0, 1, 0.0, 7.0)
  assert settings(rate_limiters.Stack(7)) == (1.0, 1, 0.0, 7.0)
  # As dm-reverb, size 0 is accepted; a negative size can never be met.
  assert settings(rate_limiters.Queue(0)) == (1.0, 1, 0.0, 0.0)
  with pytest.raises(ValueError):
    rate_limiters.Queue(-1)


def test_base_class_validates_and_is_instantiable():
  limiter = rate_limiters.RateLimiter(2.0, 3, -1.0, 1.0)
  assert settings(limiter) == (2.0, 3, -1.0, 1.0)
  assert 'samples_per_insert=2' in repr(limiter)
  for args in ((0.0, 1, 0.0, 1.0), (1.0, 0, 0.0, 1.0), (1.0, 1, 2.0, 1.0)):
    with pytest.raises(ValueError):
      rate_limiters.RateLimiter(*args)
