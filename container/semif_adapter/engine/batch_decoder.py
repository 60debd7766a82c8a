"""llama_decode on one context: a batch of pieces (tokens of one or several sequences at their positions), cut into
the calls llama.cpp would make of it, each on the threads its core share grants, and the rows asked for read right
after each call. What to decode, and what the cache holds between calls, is the engine's (`kv_engine`)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import llama_cpp
import numpy as np

from .core_share import CoreShare
from .engine_rows import Piece, Row
from .llama_runtime import MAX_BRANCHES, PAD_SEQ, LlamaContext, LlamaRuntime

DECODE_ABORTED = 2  # llama_decode's return value when the abort callback said stop


class DecodeAbortedError(RuntimeError):
    """llama_decode stopped on request (a drain deadline), not by a fault."""


class BatchDecoder:
    """One context's batch and decode calls; callers serialise access to it."""

    def __init__(self, runtime: LlamaRuntime, context: LlamaContext, cores: CoreShare | None) -> None:
        self.runtime = runtime
        self.context = context
        self.cores = cores
        self._scratch = np.empty(runtime.vocab_size, dtype=np.float32)
        self._batch = llama_cpp.llama_batch_init(max(runtime.n_batch, 2), 0, MAX_BRANCHES)

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None

    def _windows(self, count: int) -> list[tuple[int, int]]:
        """The ubatches llama.cpp would make of `count` tokens sent in batch-sized calls, as calls of their own:
        the same tokens computed the same way (bit-identical numbers), but at most one ubatch of logits is ever
        held (a 262k vocabulary's logits are 1 MB per position: 255 options' answers at once would be over 1 GB)."""
        batch, ubatch = self.runtime.n_batch, self.runtime.n_ubatch
        return [(start, min(start + ubatch, call + batch, count))
                for call in range(0, count, batch) for start in range(call, min(call + batch, count), ubatch)]

    def _decode(self, pieces: list[Piece], *, last: bool = False,
                windows: list[tuple[int, int]] | None = None) -> dict[int, dict[int, Row]]:
        """llama_decode per ubatch of each batch-sized window; reads each call's requested rows right after it runs.

        Returns rows by piece tag, keyed by the token's absolute position (a piece split over calls keeps them).
        With `last`, its final call is the evaluation's last (`CoreShare.threads`).
        """
        batch = self._batch
        flat = [(p, i) for p in pieces for i in range(len(p.tokens))]
        found: dict[int, dict[int, Row]] = {}
        windows = windows or self._windows(len(flat))
        for start, end in windows:
            window = flat[start:end]
            for index, (piece, i) in enumerate(window):
                batch.token[index] = piece.tokens[i]
                batch.pos[index] = piece.start + i
                seqs = piece.sequences()
                batch.n_seq_id[index] = len(seqs)
                for slot, seq in enumerate(seqs):
                    batch.seq_id[index][slot] = seq
                batch.logits[index] = i in piece.reads
            batch.n_tokens = len(window)
            status = self._run(batch, last=last and (start, end) == windows[-1])
            if status == DECODE_ABORTED:
                raise DecodeAbortedError("llama_decode was aborted")
            if status != 0:
                raise RuntimeError(f"llama_decode failed with status {status}")
            for index, (piece, i) in enumerate(window):
                if i in piece.reads:
                    found.setdefault(piece.tag, {})[piece.start + i] = self._read(index, piece.reads[i])
                if piece.done and i == len(piece.tokens) - 1:
                    self._release(piece)
        return found

    def _release(self, piece: Piece) -> None:
        """Drop the decoded branches' own cells (a cell that other branches still share stays theirs): every later
        call's attention reads every cell in use, so 255 answers' branches kept side by side would cost more than
        the answers themselves. Where the next tokens land then follows from the plan alone (the same frees in the
        same order), so the numbers stay the plan's."""
        for seq in piece.done:
            if not llama_cpp.llama_memory_seq_rm(self.context.memory, seq, piece.release, -1):
                raise RuntimeError("llama.cpp could not drop a decoded branch")

    def _working(self) -> contextlib.AbstractContextManager[None]:
        return self.cores.working() if self.cores else contextlib.nullcontext()

    def _run(self, batch: llama_cpp.llama_batch, *, last: bool = False) -> int:
        """One llama_decode, on the threads the core share grants it (the context's own without one). A lone token
        gets a pad row (a copy in a sequence of its own, dropped after): flash attention computes a call's only row
        over 512+ cells in per-thread chunks, its numbers follow the thread count and differ from any longer call's."""
        lone = batch.n_tokens == 1
        if lone:
            batch.token[1], batch.pos[1], batch.n_seq_id[1], batch.logits[1] = batch.token[0], batch.pos[0], 1, False
            batch.seq_id[1][0] = PAD_SEQ
            batch.n_tokens = 2
        try:
            if self.cores is None:
                return int(llama_cpp.llama_decode(self.context.context, batch))
            with self.cores.threads(last=last) as threads:
                self.context.use_threads(threads)
                return int(llama_cpp.llama_decode(self.context.context, batch))
        finally:
            if lone:
                batch.n_tokens = 1
                llama_cpp.llama_memory_seq_rm(self.context.memory, PAD_SEQ, -1, -1)

    def _read(self, batch_index: int, ids: Sequence[int]) -> Row:
        row = self.context.logits_row(batch_index)
        peak = row.max()
        np.subtract(row, peak, out=self._scratch)
        np.exp(self._scratch, out=self._scratch)
        normalizer = float(peak) + float(np.log(self._scratch.sum(dtype=np.float64)))
        return Row(values=row[np.asarray(ids, dtype=np.int64)], log_normalizer=normalizer)
