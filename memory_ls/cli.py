"""memory-ls command line: serve | index | search | get | status | check | session | sessions |
mcp | setup | model | doctor | cache."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .agent_setup.command import add_parser as add_setup
from .check_commands import add_parser as add_check
from .doctor_commands import add_parser as add_doctor
from .model_commands import add_parser as add_model
from .progress_bar import ProgressBar
from .search.request import MODES
from .settings.docs import declared, option_help

if TYPE_CHECKING:
    from .engine import MemoryEngine
    from .search.results import SearchResponse

log = logging.getLogger("memory_ls")


def _workspace(given: str | None) -> Path:
    """The workspace folder, resolved; exit 2 (an error, as for bad options) when it is none:
    SystemExit with a message exits 1, which `search` uses for "no results"."""
    root = Path(given or ".").resolve()
    if not root.is_dir():
        print(f"memory-ls: workspace {root} is not a folder", file=sys.stderr)
        raise SystemExit(2)
    return root


def _engine(args: argparse.Namespace) -> MemoryEngine:
    from .engine import MemoryEngine

    root = _workspace(args.workspace)
    engine = MemoryEngine(root, index_path=args.index)
    for problem in engine.problems:
        print(f"memory-ls: settings: {problem}", file=sys.stderr)
    return engine


def cmd_index(args: argparse.Namespace) -> int:
    with _engine(args) as engine:
        if engine.provider is None and not args.json:
            print(f"memory-ls: {engine.provider_reason}", file=sys.stderr)
        report = engine.sync("cli", force=args.force, progress=ProgressBar())
        if args.json:
            print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
        else:
            print(
                f"{report.files} files: {report.indexed} indexed, {report.unchanged} unchanged, "
                f"{report.removed} removed, {report.embedded} chunks embedded "
                f"({report.cache_hits} from cache) in {report.duration_ms / 1000:.2f}s"
            )
            for s in report.skipped:
                print(f"  skipped: {s}")
        return 0


# The search options by the request field each one fills, to name them in an error.
SEARCH_OPTIONS = {"maxResults": "-n", "minScore": "--min-score", "query": "QUERY"}


def cmd_search(args: argparse.Namespace) -> int:
    from .index.schema import DatabaseError
    from .params import ParamError, parse_search

    # The same parser and bounds as memory/search: `-n 0`, `--min-score 5` or `nan` were taken
    # as given, and answered nothing, or one result, without saying why.
    wire = {"query": args.query, "maxResults": args.n, "minScore": args.min_score}
    wire |= {"sources": args.source, "pathPrefix": args.path, "mode": args.mode}
    wire |= {"explain": args.explain}
    try:
        req = parse_search(wire)
    except ParamError as exc:
        option = SEARCH_OPTIONS.get(exc.field, exc.field)
        print(f"memory-ls: {option}: {exc.message}", file=sys.stderr)
        return 2
    with _engine(args) as engine:
        # Keywords are synced first (cheap); embedding a large backlog is `memory-ls index`'s job,
        # so a search answers in milliseconds and scores not-yet-embedded chunks by keywords.
        try:
            # A team index that is slow (a table locked) must not hold the search for minutes.
            budget = max(1.0, engine.settings.sync.search_budget_ms / 1000)
            engine.sync("search", embed=args.embed, budget_s=budget)
        except (DatabaseError, OSError) as exc:  # a full disk: the index answers as it was
            print(
                f"memory-ls: the index could not be updated ({exc}); searching it as it is",
                file=sys.stderr,
            )
        resp = engine.search(req)
        if args.json:
            print(json.dumps(resp.to_json(engine.root), ensure_ascii=False, indent=2))
            return 0
        if resp.fallback_reason:
            print(f"({resp.mode} search: {resp.fallback_reason})", file=sys.stderr)
        if not resp.results:
            print(no_results_message(resp, engine.settings.query.min_score, args.min_score))
            pending = engine.status().get("pendingEmbeddings", 0) if resp.mode != "keyword" else 0
            if pending:  # searched by keywords only so far: say how to search by meaning
                print(
                    f"({pending} chunks have no vector yet: run `memory-ls index`, or search "
                    "with --embed, to search them by meaning)",
                    file=sys.stderr,
                )
            return 1
        from .search.explain_text import explained_hit, explained_search

        for plan in resp.explain or ():
            print(explained_search(plan))
        for hit in resp.results:
            team = "  (team: not on this machine)" if hit.remote else ""
            print(f"{hit.citation}  score {hit.score:.3f}{team}")
            if hit.explain is not None:
                print(f"  why: {explained_hit(hit.explain)}")
            for line in hit.snippet.splitlines()[:6]:
                print(f"    {line}")
            print()
        return 0


def no_results_message(resp: SearchResponse, default_min: float, asked: float | None) -> str:
    """Why a search came back empty, so a person knows to rephrase or lower minScore."""
    below = resp.why_empty()
    if below is None:
        return "no results: nothing in memory matches these words or this meaning"
    threshold = asked if asked is not None else default_min
    return (
        f"no results: {below['count']} candidate{'' if below['count'] == 1 else 's'} scored "
        f"below minScore {threshold:g} "
        f"(best {below['bestScore']:.2f}); rephrase, or lower it with --min-score"
    )


def cmd_get(args: argparse.Namespace) -> int:
    from .workspace import PathError

    with _engine(args) as engine:
        try:
            ex = engine.get(args.target, start=args.from_line, lines=args.lines)
        except (PathError, ValueError) as exc:
            print(f"memory-ls: {exc}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(ex.to_json(engine.root), ensure_ascii=False, indent=2))
        else:
            print(ex.text)
        return 0


def cmd_status(args: argparse.Namespace) -> int:
    from .status_text import print_status

    with _engine(args) as engine:
        st = engine.status()
        if args.json:
            print(json.dumps(st, ensure_ascii=False, indent=2))
            return 0
        print_status(st)
        return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from .server.app import run_server
    except ImportError as exc:
        print(f"memory-ls: the language server is not available: {exc}", file=sys.stderr)
        return 2
    return run_server(tcp=args.tcp) or 0


def cmd_session(args: argparse.Namespace) -> int:
    from .index.schema import DatabaseError
    from .params import MAX_SAVE_SESSION_MESSAGES
    from .sessions.hooks import InputError, session_input
    from .sessions.known import save_new

    # Checked as memory.saveSession checks `messages`: 0 or -3 wrote a note with no messages.
    if not 1 <= args.messages <= MAX_SAVE_SESSION_MESSAGES:
        bound = "least 1" if args.messages < 1 else f"most {MAX_SAVE_SESSION_MESSAGES}"
        print(f"memory-ls: --messages: must be at {bound}, got {args.messages}", file=sys.stderr)
        return 2
    try:
        found = session_input(
            args.transcript,
            hook=args.hook,
            count=args.messages,
            stdin=sys.stdin.buffer if sys.stdin else None,  # None: started with fd 0 closed
            key=args.key,
            source=args.source,
        )
    except InputError as exc:
        print(f"memory-ls: cannot save the session: {exc}", file=sys.stderr)
        return 2
    if found.session is None:
        print("memory-ls: the session has no messages: nothing saved", file=sys.stderr)
        return 0
    if args.workspace is None and found.cwd is not None:
        args.workspace = str(found.cwd)  # a hook's notes go to the agent's folder unless -w
    with _engine(args) as engine:
        check = None
        if args.skip_known:
            engine.sync("session-save", progress=ProgressBar())  # what memory holds now
            check = lambda text: engine.check_draft(text)[1]  # noqa: E731
        try:
            saved = save_new(engine.root, engine.settings, found.session, check)
        except OSError as exc:
            print(f"memory-ls: cannot save the session: {exc}", file=sys.stderr)
            return 2
        if saved.path is None:
            print(
                "memory-ls: memory already holds every message of the session: nothing saved",
                file=sys.stderr,
            )
            if args.json:
                print(json.dumps(saved.to_json(engine.root)))
            return 0
        path = saved.path
        # The new note is searchable at once (keyword side); vectors follow in this sync too.
        try:
            engine.sync("session-save", progress=ProgressBar())
        except (DatabaseError, OSError) as exc:  # a lock held too long: the note is saved
            # Exit 2 without the path (as it was) told a hook or a script that nothing was
            # saved, and saving again wrote the note twice (its -2 copy).
            print(
                f"memory-ls: saved, not indexed yet ({exc}): the next sync indexes it",
                file=sys.stderr,
            )
        rel = path.relative_to(engine.root).as_posix()
        if saved.known:
            print(f"memory-ls: left out {len(saved.known)} known message(s)", file=sys.stderr)
        print(json.dumps(saved.to_json(engine.root)) if args.json else rel)
        return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from .roots import KINDS, detect, snippet

    home = Path.home()
    parts = [snippet(found, home, kind) for kind in KINDS if (found := detect(home, kind))]
    if not parts:
        print(
            f"memory-ls: no agent transcript folders or memory folders under {home}",
            file=sys.stderr,
        )
        return 1
    sys.stdout.write("\n".join(parts))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from .mcp import TOKEN_ENV, HttpOptions, run
    except ImportError as exc:
        print(f"memory-ls: the MCP server is not available: {exc}", file=sys.stderr)
        return 2
    root = _workspace(args.workspace)
    given = {"host": args.host, "port": args.port, "token": args.token}
    if args.transport == "stdio" and any(v is not None for v in given.values()):
        print("memory-ls: --host, --port and --token need --transport http", file=sys.stderr)
        return 2
    given["token"] = args.token or os.environ.get(TOKEN_ENV) or None
    http = HttpOptions(**{k: v for k, v in given.items() if v is not None})
    return run(root, args.index, http if args.transport == "http" else None)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memory-ls", description=__doc__)
    p.add_argument("--version", action="version", version=f"memory-ls {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workspace", "-w", default=None, help="workspace folder (default: .)")
    common.add_argument("--index", default=None, help="index file (default: user cache folder)")
    common.add_argument("--json", action="store_true", help="print JSON")
    sub = p.add_subparsers(dest="cmd", required=True)
    _add_index_commands(sub, common)
    add_check(sub, common)
    _add_agent_commands(sub, common)
    add_setup(sub)
    add_model(sub)
    add_doctor(sub, common)
    return p


def _add_index_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """serve, index, search, get, status: the index and what reads it."""
    s = sub.add_parser("serve", help="run the language server (stdio)")
    s.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead (debugging)")
    s.add_argument("--stdio", action="store_true", help="stdio transport (the default)")
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("index", parents=[common], help="sync the index with the files")
    s.add_argument("--force", action="store_true", help="rebuild from scratch (safely)")
    s.set_defaults(func=cmd_index)

    s = sub.add_parser("search", parents=[common], help="hybrid search")
    s.add_argument(
        "query",
        help="what to look for; filters: file:, after:, before:, source:, +word, -word",
    )
    s.add_argument("-n", type=int, help=option_help("query.maxResults", "max results"))
    s.add_argument(
        "--min-score", type=float, help=option_help("query.minScore", "least score of the best hit")
    )
    s.add_argument(
        "--source",
        action="append",
        choices=declared("sources").spec.choices,
        help="only this source (repeat for both)",
    )
    s.add_argument("--path", default=None, help="only paths starting with this prefix")
    s.add_argument(
        "--mode", default="auto", choices=MODES, help="auto: hybrid when vectors are there"
    )
    s.add_argument("--embed", action="store_true", help="embed chunks still without vectors first")
    explain = "say why each hit ranks where it does, stage by stage"
    s.add_argument("--explain", action="store_true", help=explain)
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("get", parents=[common], help="print lines of a memory file")
    s.add_argument("target", help="path or citation (memory/x.md#L3-L9)")
    s.add_argument("--from", dest="from_line", type=int, default=None, help="first line, 1-based")
    s.add_argument("--lines", type=int, default=None, help="how many lines (default: to the end)")
    s.set_defaults(func=cmd_get)

    s = sub.add_parser("status", parents=[common], help="index and provider status")
    s.set_defaults(func=cmd_status)


def _add_agent_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """session save, sessions detect, mcp: what agents run."""
    s = sub.add_parser("session", help="agent sessions")
    ssub = s.add_subparsers(dest="session_cmd", required=True)
    m = ssub.add_parser(
        "save", parents=[common], help="save a transcript's last messages as a memory note"
    )
    m.add_argument(
        "transcript",
        nargs="?",
        default=None,
        help="session transcript (.jsonl), - for stdin; with --hook, Codex's notify payload",
    )
    m.add_argument(
        "--hook",
        action="store_true",
        help="read an agent hook's JSON payload: Claude Code's on stdin, Codex's as the argument"
        " (the workspace is the payload's cwd unless -w is given)",
    )
    m.add_argument("--messages", type=int, default=15, help="how many, 1-1000 (default 15)")
    m.add_argument("--source", default=None, help="where the session came from (e.g. telegram)")
    m.add_argument("--key", default=None, help="session key (default: from the transcript)")
    m.add_argument(
        "--skip-known",
        action="store_true",
        help="leave out the messages memory already holds (the duplicate check memory_check "
        "runs); write no note when it holds them all",
    )
    m.set_defaults(func=cmd_session)

    s = sub.add_parser(
        "sessions", help="agents' transcript and memory folders outside the workspace"
    )
    s.add_subparsers(dest="sessions_cmd", required=True).add_parser(
        "detect",
        help="print the sessions.roots and memory.roots TOML for the agents' transcript and "
        "memory folders found here (enables nothing)",
    )
    s.set_defaults(func=cmd_sessions)

    s = sub.add_parser("mcp", help="run the MCP server for agents (stdio, or streamable HTTP)")
    s.add_argument("--workspace", "-w", default=".", help="workspace folder (default: .)")
    s.add_argument("--index", default=None, help="index file (default: user cache folder)")
    s.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="how clients connect"
    )
    s.add_argument("--host", help="http: address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=int, help="http: port (default 8765; 0: any)")
    s.add_argument(
        "--token", help="http: bearer token (or MEMORY_LS_MCP_TOKEN); needed off loopback"
    )
    s.set_defaults(func=cmd_mcp)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="memory-ls: %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # a read-only folder, an index path that is a folder or a note
        print(f"memory-ls: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from .index.schema import DatabaseError

        if not isinstance(exc, DatabaseError):
            raise
        # A full disk, a lock held too long, a read-only or damaged index: one clear line.
        # The index is left as it was; `memory-ls index` recovers once the cause is gone.
        print(f"memory-ls: index error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
