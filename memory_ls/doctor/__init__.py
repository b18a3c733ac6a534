"""``memory-ls doctor``: checks of this install and one workspace, each with its fix.

Each check is a plain function of one ``Env`` (the workspace, its settings, ``--online``) that
returns one ``Check``; ``runner`` runs them in order and renders text or JSON. Doctor reads and
never writes (indexes are opened read-only, the team database gets SELECTs); the engine never
imports this package. The modules import what they inspect inside the checks, so that
``memory-ls --help`` stays fast.
"""

from .check import FAIL, OK, WARN, Check, Env
from .runner import render_json, render_text, run_checks

__all__ = ["FAIL", "OK", "WARN", "Check", "Env", "render_json", "render_text", "run_checks"]
