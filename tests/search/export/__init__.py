"""Tests of forge-export: export, hf_export, evaluated."""
