"""Saving an agent session as a memory note: ``writer`` (the note, its slug, the file) and
``hooks`` (session save's input: a transcript, stdin, or an agent hook's payload).

Reading transcripts stays on the floors below, where the indexer and search reach it:
``sources/sessions.py`` and ``sources/formats/`` (parsing and rendering), ``index/transcripts.py``
(indexing a growing transcript), and ``roots.py`` (the ``sessions.roots`` folders), which
``workspace.py`` reads. This package imports them; nothing below imports it.
"""
