"""Tests of search's commands as printed: cli, console, suggest, carried, launchers, the torch-free inference path."""
