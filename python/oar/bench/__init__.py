"""Benchmarks of the Python front end; run `python -m oar.bench`."""
