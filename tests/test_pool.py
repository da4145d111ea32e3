"""Worker processes of one command (:mod:`pysched._pool`)."""
from __future__ import annotations

import math
import os

import pytest

from pysched._pool import Jobs, default_jobs


def test_default_jobs_is_bounded_by_the_pieces_and_the_cores():
    assert default_jobs(0) == 1 and default_jobs(1) == 1
    assert default_jobs(100) == (os.cpu_count() or 1)
    assert default_jobs(3, asked=8) == 3 and default_jobs(5, asked=2) == 2


@pytest.mark.parametrize("jobs", [1, 2])
def test_every_piece_once_with_its_index(jobs):
    items = list(range(12))
    with Jobs(jobs) as pool:
        got = dict(pool.run(math.factorial, items))
    assert got == {i: math.factorial(i) for i in items}


def test_an_error_in_a_worker_is_raised_and_the_workers_are_gone():
    with pytest.raises(ValueError), Jobs(2) as pool:
        list(pool.run(math.factorial, [3, -1, 4]))
    assert pool._pool is None
