"""Tests of forge/shell/."""
