"""Tests of forge/genomes/."""
