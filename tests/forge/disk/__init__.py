"""Tests of forge/disk/."""
