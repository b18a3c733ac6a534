"""``memory-ls setup <agent>``: what an agent needs to use memory-ls (its MCP server entry with the
executable's absolute path, its session-end hook, its transcript root) and, with ``--write``,
merging that into the agent's own config file after showing the diff.

One module per config format: ``claude_code``, ``claude_desktop``, ``cursor``, ``codex``,
``openclaw``; ``change`` holds the planned change of one file and writes it (backup, then an
atomic rename); ``command`` is the CLI glue.
"""
