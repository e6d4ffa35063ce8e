"""Benchmarks that print figures side by side with the naive alternative (not timed tests).

make bench        or        .venv/bin/python -m bench
"""
