"""Hugging Face `transformers` code for exported Forge models (`forge-export format=hf`).

`modeling_forge.py` holds the transformers plumbing (config, cache, masks, generation) around forge.lm.model's
blocks, which it imports. `forge-export format=hf` writes it next to the weights with that import replaced by
forge/lm/model.py's own definitions (`search.hf_export.modeling_source`), so the exported file imports only torch
and transformers (tests check this), is loaded by `AutoModelForCausalLM.from_pretrained(dir,
trust_remote_code=True)`, and a gene's meaning is written once, in forge/lm/model.py.
"""
