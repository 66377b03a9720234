"""Shipped assets (baseline genomes, surrogate checkpoints, labels), installed as `forge_data`."""
