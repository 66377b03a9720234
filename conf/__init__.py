"""Hydra configs of Forge, installed as the package `forge_conf` (see pyproject.toml)."""
