"""Tests of search's problem: objectives, constraints, the pymoo problem, evaluators, the user surrogate, rounding."""
