"""Emacs + eglot headless against the real language server, with the manual's configuration.

``emacs --batch`` loads the first two ```elisp blocks of ``docs/guides/other-editors.md`` (the
eglot configuration and its settings) as they are printed, opens the note
``memory/2026-02-03-incident.md`` of a copy of ``examples/demo`` (its project must be the folder
above, the one holding ``MEMORY.md``), starts eglot with ``M-x eglot`` and then:

- asks for the definition of the citation ``memory/2026-01-10-api-design.md#L5-L9`` with ``M-.``
  (xref) and records the file and line it lands on;
- asks for the hover on that citation and for the headings ``M-x imenu`` lists;
- sends ``workspace/symbol`` through eglot's connection and through ``C-M-.``'s backend
  (``xref-backend-apropos``) and records what came back;
- sends ``memory/search`` without ``maxResults``, which the settings block limits to 3.

The elisp prints one ``MEMORY-LS-RESULT {json}`` line to stdout; each test reads one part.

Emacs and eglot come from Debian (``apt-get install emacs-nox elpa-eglot``: Emacs 28.2, eglot
1.9; from Emacs 29 on eglot is built in). Without them the tests are skipped, saying so, or fail
when ``CI`` is set (``.ci/run`` installs them). The server is the ``memory-ls`` of this Python
(``$MEMORY_LS_COMMAND`` overrides it), found on ``PATH`` as the documented ``"memory-ls"``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from repo_root import REPO

DEMO = REPO / "examples" / "demo"
PAGE = REPO / "docs" / "guides" / "other-editors.md"
API_KEYS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "VOYAGE_API_KEY", "MISTRAL_API_KEY")
MARK = "MEMORY-LS-RESULT "
HOW = "`apt-get install emacs-nox elpa-eglot` (Debian), or an Emacs 29+ with eglot built in"

# What the test plays after the documented configuration is loaded. Every step records its
# error instead of stopping, so a failure says which step broke.
DRIVER = r"""
(require 'eglot)  ; M-x eglot autoloads it; a batch Emacs loads no package autoloads
(require 'json)
(require 'xref)
(defvar memls-result nil)
(defvar memls-errors nil)
(defun memls-put (key value) (push (cons key value) memls-result))
(defmacro memls-step (name &rest body)
  `(condition-case err (progn ,@body)
     (error (push (format "%s: %S" ,name err) memls-errors))))
(defun memls-wait (pred seconds)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (funcall pred)))

(memls-step "find-file"
  (find-file (expand-file-name "memory/2026-02-03-incident.md" default-directory)))
(memls-put 'majorMode (symbol-name major-mode))
(memls-step "M-x eglot" (call-interactively #'eglot))
(memls-step "connect"  ; eglot waits 3 s for the server (eglot-sync-connect), then goes on
  (memls-put 'connected (and (not memls-errors) (memls-wait #'eglot-current-server 20) t)))
(memls-step "root"
  (memls-put 'root (expand-file-name
                    (project-root (eglot--project (eglot--current-server-or-lose))))))

;; (a) M-. on the citation in the incident note
(memls-step "M-."
  (goto-char (point-min))
  (search-forward "memory/2026-01-10-api-design.md#L5")
  (backward-char 5)
  (let ((from (current-buffer)))
    (call-interactively #'xref-find-definitions)
    (memls-put 'definition
               `((file . ,(and (not (eq (current-buffer) from)) buffer-file-name))
                 (line . ,(line-number-at-pos))))
    (switch-to-buffer from)))

;; hover on the same citation (what eldoc shows) and the headings imenu lists (documentSymbol)
(memls-step "hover"
  (goto-char (point-min))
  (search-forward "memory/2026-01-10-api-design.md#L5")
  (let ((hover (jsonrpc-request (eglot--current-server-or-lose) :textDocument/hover
                                (eglot--TextDocumentPositionParams))))
    (memls-put 'hover (format "%s" (plist-get (plist-get hover :contents) :value)))))
(memls-step "imenu"
  ;; eglot 1.9 groups the symbols by kind: (("String" ("heading" . pos) ...) ...)
  (memls-put 'imenu (mapcan (lambda (group) (mapcar #'car (cdr group)))
                            (funcall imenu-create-index-function))))

;; (b) workspace/symbol, raw and through C-M-.'s backend
(defun memls-symbols ()
  (append (jsonrpc-request (eglot--current-server-or-lose)
                           :workspace/symbol '(:query "token bucket"))
          nil))
(memls-step "workspace/symbol"
  (let (hits)
    ;; a first search in a folder never indexed may come before the first sync ends
    (memls-wait (lambda () (setq hits (memls-symbols))) 10)
    (memls-put 'symbols
               (mapcar (lambda (s)
                         `((name . ,(plist-get s :name))
                           (container . ,(plist-get s :containerName))
                           (uri . ,(plist-get (plist-get s :location) :uri))))
                       hits))))
(memls-step "C-M-."
  (memls-put 'apropos
             (mapcar (lambda (x)
                       (let ((loc (xref-item-location x)))
                         `((file . ,(xref-file-location-file loc))
                           (line . ,(xref-file-location-line loc)))))
                     (xref-backend-apropos 'eglot "token bucket"))))

;; the settings block: query.maxResults reaches the server through workspace/configuration
(memls-step "memory/search"
  (let ((res (jsonrpc-request (eglot--current-server-or-lose)
                              :memory/search '(:query "API"))))
    (memls-put 'searchCount (length (plist-get res :results)))))

(memls-step "shutdown" (eglot-shutdown (eglot--current-server-or-lose)))
(memls-put 'errors (reverse memls-errors))
(when memls-errors  ; what the server said (its stderr is in eglot's events buffer)
  (dolist (b (buffer-list))
    (when (string-match-p "EGLOT" (buffer-name b))
      (with-current-buffer b
        (memls-put 'log (buffer-substring-no-properties
                         (max (point-min) (- (point-max) 3000)) (point-max)))))))
;; on a line of its own: xref's prompt may have been printed without a newline
(princ (concat "\nMEMORY-LS-RESULT " (json-encode memls-result) "\n"))
(kill-emacs 0)
"""


def find_emacs() -> str | None:
    for c in (os.environ.get("MEMORY_LS_EMACS"), shutil.which("emacs")):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    return None


def find_server() -> str | None:
    here = Path(sys.executable).parent / ("memory-ls.exe" if os.name == "nt" else "memory-ls")
    for c in (os.environ.get("MEMORY_LS_COMMAND"), str(here)):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    return None


def elisp_blocks() -> list[str]:
    return re.findall(r"^```elisp\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def emacs_env(tmp: Path, server: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in API_KEYS}
    bindir = tmp / "bin"  # the documented "memory-ls" is this Python's, first on PATH
    bindir.mkdir(exist_ok=True)
    link = bindir / "memory-ls"
    if not link.exists():
        link.symlink_to(server)
    env.update(
        PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(tmp / "home"),  # no ~/.emacs.d of the user's
        XDG_CACHE_HOME=str(tmp / "cache"),  # the index stays in tmp
        XDG_CONFIG_HOME=str(tmp / "config"),
    )
    return env


def emacs_has_eglot(emacs: str, env: dict[str, str]) -> bool:
    probe = '(princ (if (require \'eglot nil t) "yes" "no"))'
    try:
        out = subprocess.run(
            [emacs, "--batch", "--eval", probe],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.strip().endswith("yes")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("emacs-eglot")
    (tmp / "home").mkdir()
    emacs, server = find_emacs(), find_server()
    assert server is not None, "the memory-ls executable is not installed"
    env = emacs_env(tmp, server)
    missing = None
    if emacs is None:
        missing = f"no emacs on PATH: {HOW}"
    elif not emacs_has_eglot(emacs, env):
        missing = f"{emacs} has no eglot: {HOW}"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"Emacs test in CI: {missing}")
        pytest.skip(missing)
    assert emacs is not None
    blocks = elisp_blocks()
    assert len(blocks) >= 2, f"{PAGE}: expected the eglot and settings ```elisp blocks"
    ws = tmp / "demo"
    shutil.copytree(DEMO, ws)
    init = tmp / "init.el"
    init.write_text(blocks[0] + "\n" + blocks[1], encoding="utf-8")
    driver = tmp / "driver.el"
    driver.write_text(DRIVER, encoding="utf-8")
    started = time.monotonic()
    proc = subprocess.run(
        [emacs, "--batch", "-l", str(init), "-l", str(driver)],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    seconds = time.monotonic() - started
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if not lines:
        pytest.fail(
            f"emacs printed no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    data = json.loads(lines[-1][len(MARK) :])
    data["errors"] = data.get("errors") or []  # json-encode writes an empty list as null
    data.update(workspace=ws, stderr=proc.stderr, seconds=seconds)
    return data


def test_eglot_starts_memory_ls_on_the_memory_folder(run: dict) -> None:
    assert run["errors"] == [], f"{run['errors']}\n{run.get('log')}\n{run['stderr'][-3000:]}"
    assert run["connected"] is True
    assert run["majorMode"] in ("markdown-mode", "gfm-mode", "text-mode")
    assert Path(run["root"]) == run["workspace"]
    assert run["seconds"] < 30


def test_m_dot_on_a_citation_lands_on_the_cited_line(run: dict) -> None:
    definition = run.get("definition")
    assert definition, f"no definition: {run['errors']}"
    cited = run["workspace"] / "memory" / "2026-01-10-api-design.md"
    assert definition["file"] and Path(definition["file"]) == cited, definition
    assert definition["line"] == 5, definition


def test_hover_and_imenu_work_through_eglot(run: dict) -> None:
    assert "token bucket per API key" in run.get("hover", ""), run.get("hover")
    assert run.get("imenu") == ["Incident: checkout latency spike"], run.get("imenu")


def test_workspace_symbol_through_eglot_finds_the_demo_note(run: dict) -> None:
    symbols = run.get("symbols")
    assert symbols, f"workspace/symbol found nothing: {run['errors']}"
    first = symbols[0]
    assert first["uri"].endswith("/memory/2026-01-10-api-design.md"), symbols
    assert first["container"].startswith("memory/2026-01-10-api-design.md#L"), symbols
    assert first["name"] == "API design review", symbols
    apropos = run.get("apropos")
    assert apropos, f"C-M-. found nothing: {run['errors']}"
    assert Path(apropos[0]["file"]) == run["workspace"] / "memory" / "2026-01-10-api-design.md"


def test_settings_reach_the_server_through_workspace_configuration(run: dict) -> None:
    # "API" has 4 hits in the demo; the documented settings ask for 3 at most
    assert run.get("searchCount") == 3, run
