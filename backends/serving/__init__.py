"""Serving models: attention/FFN disaggregation (paper 001) and prefill/decode pools (paper 003, LLMShare)."""
