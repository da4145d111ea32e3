"""Studies built on the evaluation: each declares its grid of sandbox runs and its measure,
and runs through :func:`pysched.evaluation.runner.evaluate` (directly, :mod:`.grid`, or as
points of the sweep machinery where it is long).

* :mod:`.schedtask_paper`: the SchedTask paper's section 6 and appendix beside ours
  (``pysched study schedtask-paper``, ``make evaluate-paper``);
* :mod:`.seed001_hrrs`, :mod:`.seed002_dvfs`, :mod:`.seed003_cache_fair`: the other seeds'
  experiments (``pysched seeds``, :mod:`.seeds`; notebooks 05-07);
* :mod:`.ablation`: which rule of the model decides a policy's result against a baseline
  (``pysched ablate``).
"""
