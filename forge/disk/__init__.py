"""What Forge reads and writes: atomic writes, files a user names, writes kept inside a run folder, secrets masked.

io (atomic writes, YAML/JSON reading, the shared-data location) · files (a file the user names: every way it can
be wrong is one line) · confined (a link planted in a run folder never sends a write outside it) · redact (URL
passwords masked in everything written or printed) · run_folder (the run folder's layout: every file name a command
writes in its folder, spelled only there).

May import forge.errors and forge.moved (redact's old `MaskSecrets`, moved up to the command shell); every other part
writes through it.
"""
