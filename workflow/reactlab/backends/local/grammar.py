"""Grammar-constrained decoding for local models, with xgrammar.

A decoding mode says which token sequences the model may produce on a turn; xgrammar turns
a grammar into a per-token mask over the vocabulary, applied to the logits before the
greedy choice. The grammars are built from the *same* tool schemas the model reads in its
system prompt (:func:`reactlab.backends.local.hermes_tools`), in the Hermes text format the
prompt asks for (``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``, with
``json.dumps``' default separators). The schemas are not tightened: xgrammar's
``strict_mode`` is off, so a property the schema does not name is as allowed as the schema
allows it (tightening would be a separate, named defence).

Modes (:data:`MODES`):

* ``free`` -- no grammar: today's decoding.
* ``structural`` -- free text until the model itself writes ``<tool_call>``; from there the
  call must be well formed (xgrammar's built-in ``qwen_3`` structural tag, the Hermes/Qwen
  format, reasoning disabled).
* ``union`` -- the turn is either one well-formed call or free text that does not open
  with ``<``.
* ``forced`` -- a call is required (exactly one well-formed call, nothing else) until a
  tool result without error has arrived; after that the turn is free.
* ``forced_scored`` -- as ``forced``, but the program chooses the tool by the model's
  log-probability of each *whole* tool name (greedy masking compares first tokens only),
  writes ``<tool_call>\\n{"name": "<tool>", "arguments": `` itself (the trace records that
  prefix) and constrains the rest to that tool's arguments.

On engine ``llama_cpp`` the same modes (but ``forced_scored``, which scores with
transformers) run with one of two grammar backends (the backend's ``grammar_backend``):
``xgrammar``, the very grammars above whose token bitmask is applied to llama.cpp's logits
(:meth:`reactlab.backends.local.llama.LlamaCppModel.generate` adapts the processor), or
``llama_cpp``, llama.cpp's own GBNF grammar sampler on the equivalent GBNF (the call
object's grammar is llama-cpp-python's ``json_schema_to_gbnf`` of :func:`call_schema`;
``structural``'s trigger has no GBNF form, the config refuses it there).

xgrammar (and torch) are imported inside functions: importing this module is cheap.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, get_args

from reactlab.config.settings import CONSTRAINED_DECODINGS, Decoding
from reactlab.core.errors import DecodingError, InternalError

__all__ = [
    "CALL_PREFIX",
    "CALL_SUFFIX",
    "MODES",
    "DecodingError",
    "GrammarFactory",
    "GrammarSpec",
    "call_schema",
    "xgrammar_version",
]

log = logging.getLogger("reactlab.local")

#: The decoding modes (the settings' Literal, the schema's enum: a test checks they agree).
MODES: tuple[str, ...] = get_args(Decoding)
CONSTRAINED = CONSTRAINED_DECODINGS

CALL_PREFIX = "<tool_call>\n"
CALL_SUFFIX = "\n</tool_call>"
SEPARATORS = (", ", ": ")  # json.dumps defaults: what the prompt's example shows


def xgrammar_version() -> str:
    try:
        return importlib.metadata.version("xgrammar")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = tool.get("function", tool)
    return function


def call_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON schema of one call object: ``anyOf`` over the tools of
    ``{"name": <const>, "arguments": <that tool's parameters>}`` (name first, no other
    key); each tool's parameters schema is used as it is."""
    if not tools:
        raise DecodingError("a constrained decoding mode needs at least one tool")
    options = []
    for t in tools:
        fn = _function(t)
        options.append({"type": "object",
                        "properties": {"name": {"const": fn["name"]},
                                       "arguments": fn["parameters"]},
                        "required": ["name", "arguments"],
                        # the call format's own object: only these two keys (the tool's
                        # arguments schema is left as the model reads it)
                        "additionalProperties": False})
    return options[0] if len(options) == 1 else {"anyOf": options}


@dataclass(frozen=True)
class GrammarSpec:
    """A compiled grammar and what the trace says about it."""

    compiled: Any  # xgr.CompiledGrammar, or a llama_cpp.LlamaGrammar when native
    text: str  # the grammar's EBNF, as xgrammar prints it (or the GBNF given llama.cpp)
    native: bool = False  # llama.cpp's own grammar sampler applies it

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


@dataclass
class GrammarFactory:
    """Builds and caches the grammars of one tokenizer (one compiler, one thread).

    ``compile_s`` accumulates compile times (for the benchmark; never reaches a trace).
    """

    tokenizer: Any
    vocab_size: int
    #: llama.cpp's own GBNF grammars instead of xgrammar's (engine llama_cpp)
    native: bool = False
    _compiler: Any = None
    _cache: dict[str, GrammarSpec] = field(default_factory=dict)
    compile_s: list[float] = field(default_factory=list)

    def compiler(self) -> Any:
        if self._compiler is None:
            import xgrammar as xgr  # lazy: heavy (xgrammar, torch)

            info = xgr.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=self.vocab_size)
            self._compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        return self._compiler

    def _compile(self, key: str, build: Any) -> GrammarSpec:
        if key not in self._cache:
            grammar = build()
            compiler = self.compiler()
            t0 = time.perf_counter()
            compiled = compiler.compile_grammar(grammar)
            dt = time.perf_counter() - t0
            self.compile_s.append(dt)
            log.info("compiled grammar %s in %.1f ms", key[:60], dt * 1000,
                     extra={"reactlab_timing": {"grammar_compile_s": dt}})
            self._cache[key] = GrammarSpec(compiled, str(grammar))
        return self._cache[key]

    # ------------------------------------------------------------------ the grammars

    @staticmethod
    def _json(schema: dict[str, Any]) -> Any:
        import xgrammar as xgr  # lazy: heavy (xgrammar, torch)

        try:
            return xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False,
                                                separators=SEPARATORS, strict_mode=False)
        except Exception as exc:
            raise DecodingError(f"cannot build a grammar from the tool schema: {exc}") from exc

    @classmethod
    def _call(cls, tools: list[dict[str, Any]]) -> Any:
        import xgrammar as xgr  # lazy: heavy (xgrammar, torch)

        return xgr.Grammar.concat(xgr.Grammar.from_ebnf(f"root ::= {json.dumps(CALL_PREFIX)}"),
                                  cls._json(call_schema(tools)),
                                  xgr.Grammar.from_ebnf(f"root ::= {json.dumps(CALL_SUFFIX)}"))

    def _native(self, key: str, gbnf: str) -> GrammarSpec:
        if key not in self._cache:
            from reactlab.backends.local.llama import llama_module  # lazy: optional engine

            self._cache[key] = GrammarSpec(
                llama_module().LlamaGrammar.from_string(gbnf, verbose=False), gbnf, True)
        return self._cache[key]

    def _no_native(self, mode: str) -> None:
        if self.native:
            raise DecodingError(f"{mode} has no llama.cpp grammar (grammar_backend llama_cpp)")

    def call(self, tools: list[dict[str, Any]]) -> GrammarSpec:
        """Exactly one well-formed call to one of ``tools``."""
        if self.native:
            return self._native("gbnf-call:" + json.dumps(tools, sort_keys=True),
                                gbnf_call(call_schema(tools)))
        return self._compile("call:" + json.dumps(tools, sort_keys=True),
                             lambda: self._call(tools))

    def union(self, tools: list[dict[str, Any]]) -> GrammarSpec:
        """One well-formed call, or free text that does not start with ``<``."""
        if self.native:
            return self._native("gbnf-union:" + json.dumps(tools, sort_keys=True),
                                gbnf_call(call_schema(tools), union=True))
        import xgrammar as xgr  # lazy: heavy (xgrammar, torch)

        return self._compile("union:" + json.dumps(tools, sort_keys=True),
                             lambda: xgr.Grammar.union(
                                 self._call(tools),
                                 xgr.Grammar.from_ebnf("root ::= [^<] [^]*")))

    def structural(self, tools: list[dict[str, Any]]) -> GrammarSpec:
        """Free text; a ``<tool_call>`` the model opens must be a well-formed call."""
        self._no_native("decoding 'structural'")
        import xgrammar as xgr  # lazy: heavy (xgrammar, torch)

        def build() -> Any:
            tag = xgr.get_model_structural_tag("qwen_3", tools=list(tools), tool_choice="auto",
                                               reasoning="disabled")
            return xgr.Grammar.from_structural_tag(tag)

        return self._compile("structural:" + json.dumps(tools, sort_keys=True), build)

    def arguments_tail(self, schema: dict[str, Any]) -> GrammarSpec:
        """The rest of a call after the program wrote ``{"name": "<tool>", "arguments": ``:
        the arguments object, then ``}`` and the closing tag."""
        self._no_native("decoding 'forced_scored'")
        import xgrammar as xgr  # lazy: heavy (xgrammar, torch)

        return self._compile("tail:" + json.dumps(schema, sort_keys=True),
                             lambda: xgr.Grammar.concat(
                                 self._json(schema),
                                 xgr.Grammar.from_ebnf(
                                     f"root ::= {json.dumps('}' + CALL_SUFFIX)}")))

    def json_object(self, schema: dict[str, Any]) -> GrammarSpec:
        """One JSON value of ``schema`` (plan-and-execute's extraction step)."""
        if self.native:
            return self._native("gbnf-json:" + json.dumps(schema, sort_keys=True),
                                gbnf_json(schema))
        return self._compile("json:" + json.dumps(schema, sort_keys=True),
                             lambda: self._json(schema))


def _digit_classes(node: Any) -> Any:
    """``schema`` with every ``pattern``'s ``\\d`` written ``[0-9]``: llama-cpp-python
    0.3.36's converter copies ``\\d`` into a GBNF literal (a date pattern then matches
    no date)."""
    if isinstance(node, dict):
        return {k: (v.replace("\\d", "[0-9]") if k == "pattern" and isinstance(v, str)
                    else _digit_classes(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_digit_classes(v) for v in node]
    return node


def gbnf_json(schema: dict[str, Any], root: str = "root") -> str:
    """llama.cpp's GBNF for one JSON value of ``schema`` (llama-cpp-python's
    ``json_schema_to_gbnf``), its top rule named ``root``."""
    from reactlab.backends.local.llama import llama_module  # lazy: optional engine

    llama_module()  # the install hint when llama-cpp-python is missing
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # lazy: optional engine

    try:
        text = json_schema_to_gbnf(json.dumps(_digit_classes(schema)))
    except Exception as exc:
        raise DecodingError(f"cannot build a GBNF grammar from the tool schema: {exc}") from exc
    if root == "root":
        return str(text)
    if re.search(r"(?<![\w-])root(?![\w-])(?! ::=)", text):
        raise DecodingError("the tool schema's GBNF refers to its own root rule")
    return re.sub(r"^root ::=", f"{root} ::=", str(text), flags=re.MULTILINE)


def gbnf_call(schema: dict[str, Any], union: bool = False) -> str:
    """GBNF of one Hermes call whose object is ``schema`` (``union``: or free text that
    does not start with ``<``), as :meth:`GrammarFactory.call` / ``union`` in xgrammar.
    llama.cpp's JSON rules allow an optional space around separators where xgrammar's
    write exactly ``json.dumps``' (the benchmark compares the tokens)."""
    head = f"tool-call ::= {json.dumps(CALL_PREFIX)} call-object {json.dumps(CALL_SUFFIX)}\n"
    top = "root ::= tool-call | [^<] .*\n" if union else "root ::= tool-call\n"
    return top + head + gbnf_json(schema, root="call-object")


def make_processor(spec: GrammarSpec) -> Any:
    """A new logits processor for one ``generate`` call (xgrammar matchers are single-use).

    Like ``xgrammar.contrib.hf.LogitsProcessor`` for a batch of one, but it keeps its
    matcher so that :meth:`finish` can tell whether the grammar completed, and it adds
    up the time it spends (``mask_s``, ``calls``) for the benchmark.
    """
    import transformers  # lazy: heavy (transformers)
    import xgrammar as xgr  # lazy: heavy (xgrammar, torch)

    class _Processor(transformers.LogitsProcessor):
        def __init__(self) -> None:
            self.matcher = xgr.GrammarMatcher(spec.compiled)
            self.bitmask = xgr.allocate_token_bitmask(1, spec.compiled.tokenizer_info.vocab_size)
            self.accepted = 0
            self.started = False
            self.mask_s = 0.0
            self.calls = 0

        def _accept(self, token: int) -> None:
            if not self.matcher.is_terminated() and not self.matcher.accept_token(token):
                raise InternalError(f"grammar rejected token {token} it had allowed")
            self.accepted += 1

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            t0 = time.perf_counter()
            if input_ids.shape[0] != 1:
                raise InternalError("constrained decoding runs one sequence at a time")
            if self.started:
                self._accept(int(input_ids[0, -1]))
            self.started = True
            if not self.matcher.is_terminated():
                self.matcher.fill_next_token_bitmask(self.bitmask, 0)
                xgr.apply_token_bitmask_inplace(scores, self.bitmask.to(scores.device))
            self.mask_s += time.perf_counter() - t0
            self.calls += 1
            return scores

        def finish(self, new_ids: list[int]) -> bool:
            """Feed the tokens ``generate`` produced after the last call; True when the
            grammar ended (its stop token accepted), False when it was cut short."""
            for token in new_ids[self.accepted:]:
                self._accept(token)
            return bool(self.matcher.is_terminated())

    return _Processor()


# ----------------------------------------------------------------------------- decoding


@dataclass(frozen=True)
class Prepared:
    """One turn, ready to generate: prompt ids (with any program-written prefix)."""

    ids: list[int]
    prefix: str
    grammar: GrammarSpec | None
    scores: dict[str, float] | None = None


@dataclass(frozen=True)
class Decoded:
    """A generated turn: the text (prefix included, stripped), token counts, the trace's
    ``decoding`` record."""

    text: str
    tokens_sent: int
    tokens_out: int
    record: dict[str, Any]


class Decoder:
    """A decoding mode bound to one model and one tool list (grammars compiled once)."""

    def __init__(self, mode: str, model: Any, tools: list[dict[str, Any]],
                 grammar_backend: str = "xgrammar") -> None:
        if mode not in MODES:
            raise DecodingError(f"unknown decoding mode {mode!r}; expected one of {MODES}")
        if mode in CONSTRAINED and not tools:
            raise DecodingError(f"decoding {mode!r} needs the tools to be sent "
                                "(agent.send_tools: true)")
        self.mode = mode
        self.model = model
        self.tools = tools
        self.factory = GrammarFactory(model.tokenizer, model.vocab_size,
                                      native=grammar_backend == "llama_cpp")

    def _ids(self, text: str) -> list[int]:
        return list(self.model.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prepare(self, messages: list[dict[str, Any]], required: bool) -> Prepared:
        """The prompt and grammar of the next turn; ``required``: no tool result without
        error has arrived yet (the forced modes then require a call)."""
        tools = self.tools
        grammar: GrammarSpec | None = None
        prefix = ""
        scores: dict[str, float] | None = None
        if self.mode == "structural":
            grammar = self.factory.structural(tools)
        elif self.mode == "union":
            grammar = self.factory.union(tools)
        elif self.mode == "forced" and required:
            grammar = self.factory.call(tools)
        elif self.mode == "forced_scored" and required:
            head = self.model.prompt_text(messages, tools) + CALL_PREFIX + '{"name": "'
            names = [_function(t)["name"] for t in tools]
            values = self.model.score(head, [f'{n}"' for n in names])
            scores = {n: round(v, 4) for n, v in zip(names, values, strict=True)}
            best = max(range(len(names)), key=lambda i: (values[i], -i))  # ties: first
            prefix = f'{CALL_PREFIX}{{"name": "{names[best]}", "arguments": '
            grammar = self.factory.arguments_tail(_function(tools[best])["parameters"])
        if prefix:
            ids = self._ids(self.model.prompt_text(messages, tools) + prefix)
        else:
            ids = self.model.prompt_ids(messages, tools)
        return Prepared(ids, prefix, grammar, scores)

    def generate(self, prep: Prepared, max_new_tokens: int) -> Decoded:
        gen, record = generate_with(self.model, prep.ids, max_new_tokens, self.mode,
                                    prep.grammar, prep.prefix)
        if prep.scores is not None:
            record["name_logprobs"] = prep.scores
        return Decoded((prep.prefix + gen.text).strip(), len(prep.ids), len(gen.new_ids),
                       record)


def generate_with(model: Any, ids: list[int], max_new_tokens: int, mode: str,
                  grammar: GrammarSpec | None, prefix: str = "") -> tuple[Any, dict[str, Any]]:
    """(Generation, trace ``decoding`` record) of one turn, masked by ``grammar`` if given.

    ``prefix`` is text the program already wrote at the end of ``ids`` (recorded only).
    A native grammar (llama.cpp's) goes to ``model.generate`` as its ``grammar``.
    """
    if grammar is not None and grammar.native:
        return _generate_native(model, ids, max_new_tokens, mode, grammar, prefix)
    processor = make_processor(grammar) if grammar is not None else None
    gen = model.generate(ids, max_new_tokens=max_new_tokens, logits_processor=processor)
    record: dict[str, Any] = {"mode": mode, "constrained": processor is not None}
    if processor is not None and grammar is not None:
        record.update({"grammar_sha256": grammar.sha256, "xgrammar": xgrammar_version(),
                       "prefix": prefix, "grammar_complete": processor.finish(gen.new_ids)})
        log.info("grammar mask: %d calls, %.2f ms", processor.calls, processor.mask_s * 1000,
                 extra={"reactlab_timing": {"mask_s": processor.mask_s,
                                            "mask_calls": processor.calls}})
    return gen, record


def _generate_native(model: Any, ids: list[int], max_new_tokens: int, mode: str,
                     grammar: GrammarSpec, prefix: str) -> tuple[Any, dict[str, Any]]:
    """One turn under llama.cpp's own grammar sampler; the grammar completed when the turn
    ended with EOS (llama.cpp allows EOS only where the grammar may end)."""
    gen = model.generate(ids, max_new_tokens=max_new_tokens, grammar=grammar.compiled)
    complete = bool(gen.new_ids) and gen.new_ids[-1] == model.eos_token_id
    record: dict[str, Any] = {"mode": mode, "constrained": True, "grammar_backend": "llama_cpp",
                              "grammar_sha256": grammar.sha256, "prefix": prefix,
                              "grammar_complete": complete}
    return gen, record
