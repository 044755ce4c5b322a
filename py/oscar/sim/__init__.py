"""The research simulator (``oscar-sim``): 2-bit KV cache methods, OSCAR's and baselines',
simulated in PyTorch and scored against the unquantised model (:mod:`oscar.sim.simulate`).

Nothing in the product imports this package; calibration scores its candidates with
:mod:`oscar.calib.simcache`, which this simulator runs too.
"""
from .simulate import main

__all__ = ["main"]
