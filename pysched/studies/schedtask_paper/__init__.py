"""The study beside the SchedTask paper (seed 000, section 6 and its appendix).

* :mod:`.study`: its grid (policies, variants and loads on the eight workloads) run as sweep
  points, and its summary;
* :mod:`.comparison`: the paper's published figures and the markdown setting ours beside them;
* :mod:`.plots`: Fig 7 and Table 4, ours beside the paper's.
"""
