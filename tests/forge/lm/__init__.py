"""Tests of forge/lm/."""
