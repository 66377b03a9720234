"""Tests of a search's run: build, runner, runlog, state, ledger, run_files, tables, coevolution, python_objects."""
