"""Slow, obviously-correct twins of pysched's numba kernels, one module per kernel family.

Each twin spells its kernel's rules out in plain Python, one element at a time; the tests run
kernel and twin on small hand-made and random inputs and compare everything they return.
"""
