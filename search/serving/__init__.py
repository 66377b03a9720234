"""Serving searches: prefill/decode pool co-search (LLMShare, paper 003) and the `forge-serve` CLI."""
