"""Tests of search's operators: operators, operators_mix, operators_plugin, caches."""
