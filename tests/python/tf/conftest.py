"""TensorFlow tests: a pytest process of their own (.ci/test runs them
apart), because once TensorFlow is imported signatures decode to TF specs,
which would change what the other tests see."""

import importlib.util

import pytest

if importlib.util.find_spec('tensorflow') is None:
  collect_ignore_glob = ['*_test.py']


@pytest.fixture(name='tf', scope='session')
def tf_fixture():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf
