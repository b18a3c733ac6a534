"""The team index: a folder's memory in PostgreSQL + pgvector, shared by every machine of a
team, with the folder's own SQLite index as its fallback.

``route.py`` is the one seam the engine sees (``TeamRoute``, chosen once when a folder's engine
is built); ``index.py`` keeps the team index in step and reads it (``TeamIndex``);
``unsaved.py`` searches an editor's unsaved text beside it; ``removals.py`` remembers the
deletions the team index has not heard of yet. Everything here needs psycopg: import it only
for a team folder.
"""
