"""Stand-alone Hugging Face `transformers` code for exported Forge models (`forge-export format=hf`).

`modeling_forge.py` is copied next to the weights of every export and loaded by
`AutoModelForCausalLM.from_pretrained(dir, trust_remote_code=True)`, so it imports only torch and
transformers, never `forge` (tests check this). It is shipped as package data of the wheel.
"""
