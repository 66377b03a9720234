"""Genomes: what one architecture is, the files it is read from, and the label that pairs it with a loss.

genes (the gene registry: every gene, per layer or genome-wide, declared once) · genome (the typed frozen
genome, YAML/JSON, its stable id) · genome_checks (a field's value against its domain: `GenomeError`) ·
precision (numeric formats of weights, activations and the KV cache, and their loss penalty) · importers
(genome files: ours, LLMForge's label CSV and per-model YAML) · labels (the label format: genome + loss, JSONL).

May import forge.errors and forge.disk only: spaces, the model and every command are built on genomes.
"""
