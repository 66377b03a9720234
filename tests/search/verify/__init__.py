"""Tests of forge-verify: verify, picks, race."""
