"""Tests of forge/runtime/."""
