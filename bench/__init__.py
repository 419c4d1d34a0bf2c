"""Reverb's benchmarks; `python -m bench` runs them all (see __main__.py)."""
