"""Studies built on the evaluation: each declares its grid of sandbox runs and its measure,
and runs through :func:`pysched.evaluation.runner.evaluate` (on the sweep machinery where it
is long).

* :mod:`.ablation`: which rule of the model decides a policy's result against a baseline.
"""
