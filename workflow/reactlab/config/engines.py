"""What each engine of a local model backend can run (``engine``, ``grammar_backend``).

llama.cpp runs the GGUF file's own weights (no ``dtype``) and a constrained ``decoding``
in the modes its ``grammar_backend`` can express (:data:`LLAMA_CPP_DECODINGS`);
``grammar_backend`` is llama.cpp's option only (transformers masks with xgrammar).
"""

from __future__ import annotations

from collections.abc import Set
from typing import Literal

#: What applies a constrained decoding's grammar on engine llama_cpp: xgrammar's token
#: bitmask on llama.cpp's logits, or llama.cpp's own GBNF grammar sampler.
GrammarBackend = Literal["xgrammar", "llama_cpp"]
#: The modes each grammar backend runs on engine llama_cpp (forced_scored scores whole
#: tool names: transformers only; structural's trigger has no GBNF form).
LLAMA_CPP_DECODINGS: dict[str, frozenset[str]] = {
    "xgrammar": frozenset({"free", "structural", "union", "forced"}),
    "llama_cpp": frozenset({"free", "union", "forced"}),
}


def engine_refusal(engine: str, decoding: str, grammar_backend: str,
                   given: Set[str]) -> str | None:
    """Why a model backend's settings (``given``: the fields the config gave) cannot run
    on ``engine``, or None when they can."""
    if engine != "llama_cpp":
        if "grammar_backend" in given:
            return ("grammar_backend is an option of engine llama_cpp (transformers masks "
                    "with xgrammar)")
        return None
    if "dtype" in given:
        return "dtype is a transformers option; engine llama_cpp runs the GGUF file's own " \
               "(Q4_1) weights"
    allowed = LLAMA_CPP_DECODINGS[grammar_backend]
    if decoding not in allowed:
        return (f"decoding {decoding!r} does not run on engine llama_cpp with grammar_backend "
                f"{grammar_backend!r} (it runs: {', '.join(sorted(allowed))}); forced_scored "
                "runs on engine transformers only, structural with grammar_backend xgrammar "
                "only")
    return None
