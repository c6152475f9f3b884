"""One thread policy for every ONNX Runtime session the kit opens (stages' checks and the report's
timings alike), so a latency a stage measures and the one the report prints mean the same thing."""
from __future__ import annotations

from pathlib import Path

from shrinkbert.core.errors import ShrinkbertError


def ort_session(model_file: str | Path, threads: int | None = None, spin: bool = False, flush_denormals: bool = False,
                config: dict[str, str] | None = None):
    """A CPU InferenceSession: `threads` intra-op threads (0/None: ONNX Runtime's default, one per
    physical core), one inter-op thread, sequential execution, and spinning off unless `spin`
    (spinning worker threads slow the next PyTorch call in the same process: STACK.md; a session in a
    process of its own, as the report's timing workers hold it, is faster with ORT's default, on).
    A corrupt or truncated file is one clear ShrinkbertError. `flush_denormals`: ONNX Runtime flushes
    denormal floats to zero, as a bundle does (compress/bundle_files.open_session), on its threads and
    on the calling thread too: for a process of its own (the report's timing workers), never for one
    whose PyTorch must keep its floating-point settings. `config`: further session config entries
    (`session.dynamic_block_base`, ...), as `bench/ort_session_knobs.py` tries them."""
    import onnxruntime as ort

    from shrinkbert.core.verify import verify_artifact

    verify_artifact(Path(model_file).parent)
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = int(threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spin else "0")
    if flush_denormals:
        options.add_session_config_entry("session.set_denormal_as_zero", "1")
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    try:
        return ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # ORT raises its own Fail/InvalidProtobuf/InvalidGraph types
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ShrinkbertError(f"{model_file} is not a loadable ONNX model (corrupt or truncated?): {first[:300]}") from None


def graph_feed(encoded, input_names) -> dict:
    """A graph's inputs from a tokenizer's output, as int64: the token types it takes but the tokenizer did
    not write (MPNet's, RoBERTa's, for a BERT graph of such a teacher's student) are zeros, as in PyTorch."""
    import numpy as np

    feed = {}
    for name in input_names:
        if name in encoded:
            feed[name] = np.asarray(encoded[name], dtype=np.int64)
        elif name == "token_type_ids":
            feed[name] = np.zeros_like(np.asarray(encoded["input_ids"], dtype=np.int64))
        else:
            raise ShrinkbertError(f"the ONNX graph wants an input '{name}' that a tokenizer does not make")
    return feed
