"""Tests of forge/spaces/."""
