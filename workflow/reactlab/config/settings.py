"""Typed run settings: what a :class:`~reactlab.config.RunSpec` carries, validated once.

One frozen model per backend kind (the backend's ``mode``: :class:`SimulatedBackend`,
:class:`ScriptedBackend`, :class:`ModelBackend`, :class:`LiveBackend`), per script kind
(:class:`StepScript` plays scripted steps, :class:`StrategyScript` names the strategy of
a real model), and the agent settings and limits. The config builds them once, when it
builds the RunSpecs (:func:`reactlab.config.parse`); a job rebuilds them from its spec's
JSON. The rest of the package reads attributes, never string keys; where backend kinds
name one thing differently (the output-token cap: ``max_tokens``, a local model's
``max_new_tokens``), every kind has the one property that names it
(:attr:`_Backend.max_output_tokens`).

**Defaults and bounds live in the config schema** (``workflow/schemas/config.schema.yaml``,
``default:``, ``minimum:``/``maximum:``): the fields below take them from there
(:func:`reactlab.config.schema.schema_field`); nothing restates them. An optional field
left out of the config stays out of :meth:`Settings.to_dict` (a model remembers which
fields were given), so a run's JSON, and with it its config hash, is exactly the config
slice it was built from.

The provider is a name, not a closed enum: the built-in names are the schema's, and a
provider registered in code (:func:`reactlab.backends.registry.register`) is accepted
from then on; :func:`reactlab.config.validate_schema` checks it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import partial
from typing import Annotated, Any, ClassVar, Generic, Literal, Self, TypeVar, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ModelWrapValidatorHandler,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from reactlab.config.engines import GrammarBackend, engine_refusal
from reactlab.config.schema import schema_field
from reactlab.core.errors import ConfigError

Mode = Literal["simulated", "scripted", "model", "live"]
#: The modes whose backend reaches its model over HTTP (an API adapter against its simulator
#: or the real API; a provider with an HTTP layer has these); ``scripted`` and ``model``
#: run in process. A trace's spec says which one its session was.
HTTP_MODES: frozenset[str] = frozenset({"simulated", "live"})
Decoding = Literal["free", "structural", "union", "forced", "forced_scored"]
#: The decoding modes that mask the model's tokens with the tools' grammar: they need the
#: tool definitions sent (the config refuses them with ``agent.send_tools: false``).
CONSTRAINED_DECODINGS: frozenset[str] = frozenset(get_args(Decoding)) - {"free"}
Dtype = Literal["float32", "bfloat16"]
#: What generates a model backend's tokens: transformers (the default) or llama.cpp
#: (``llama-cpp-python``, on the GGUF file the model folder was converted from).
Engine = Literal["transformers", "llama_cpp"]
#: The strategies a scenario of config.yaml names (the schema's enum) ...
ScenarioStrategy = Literal["react", "plan_execute"]
#: ... and every strategy a run's script names: also ``single_turn``, one model turn whose
#: calls are recorded, not run (an outside suite's single-turn cases,
#: :class:`reactlab.agent.strategies.SingleTurn`).
StrategyName = Literal["react", "plan_execute", "single_turn"]
#: A number as written in the config: an int stays an int (its JSON, and the run's hash,
#: stay the same), a bool is refused.
Number = int | float


def _section(name: str) -> partial[Any]:
    """:func:`~reactlab.config.schema.schema_field` for the entries of the config's
    section ``name`` (``backends``, ``suites``...): ``_section("backends")("max_tokens")``
    is the field the schema describes as ``backends.<name>.max_tokens``."""
    return partial(schema_field, ("properties", name, "additionalProperties", "properties"))


_backend = _section("backends")


class Settings(BaseModel):
    """A frozen, strict settings model (a bool is no int, an int no str).

    It remembers the fields it was given and their order: :meth:`to_dict` gives them
    back as given (a trace header holds that dict, so its bytes stay those of the config
    slice or of the spec JSON the job read). Equality ignores the order. Hashing is
    pydantic's for a frozen model: a model that holds a list (a script's steps) is
    unhashable.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        built = handler(data)
        if isinstance(data, Mapping):
            built._order = tuple(data)
        return built

    def to_dict(self) -> dict[str, Any]:
        """The fields as given, in the order given (fields left out stay out)."""
        fields = type(self).model_fields
        given = {n for n in self.model_fields_set if n not in fields or not fields[n].exclude}
        names = [n for n in self._order if n in given]
        names += [n for n in type(self).model_fields if n in given and n not in names]
        return {n: (v.to_dict() if isinstance(v := getattr(self, n), Settings) else v)
                for n in names}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes``, validated again."""
        return type(self).model_validate({**self.to_dict(), **changes})


# --- backends ---------------------------------------------------------------------------


#: Where a plugin comes from (an entry's ``package:``): for the error when it is not
#: installed, never part of a spec (its hash, its trace header).
def _package() -> Any:
    return Field(default=None, exclude=True)


class _Backend(Settings):
    provider: str
    package: str | None = _package()
    mode: Mode
    max_tokens: int = _backend("max_tokens")

    @property
    def samples(self) -> bool:
        """Whether it draws its output at random (a temperature above 0)."""
        return (getattr(self, "temperature", None) or 0) > 0

    @property
    def packages(self) -> tuple[str, ...]:
        """Distributions its settings add to its provider's (a local model's engine)."""
        return ()

    @property
    def max_output_tokens(self) -> int | None:
        """The cap on the model's output tokens that the config sets, whichever key holds
        it: ``max_tokens`` where the config gives it (None when it gives none), and a local
        model's ``max_new_tokens`` (:class:`ModelBackend`). One attribute for every backend
        kind, so a reader (the exports) needs no key per provider."""
        return self.max_tokens if "max_tokens" in self.model_fields_set else None


class _ApiBackend(_Backend):
    """Options of the backends that speak HTTP (simulated and live)."""

    max_attempts: int = _backend("max_attempts")
    max_wait: Number = _backend("max_wait")
    stream: bool = _backend("stream")
    #: openai_chat: also send stream_options {include_usage: true} when streaming
    stream_include_usage: bool = _backend("stream_include_usage")


class _Sampling(Settings):
    """Sampling (model and live modes); left out: greedy, and nothing is sent."""

    temperature: Number | None = _backend("temperature", optional=True)
    top_p: Number | None = _backend("top_p", optional=True)


class SimulatedBackend(_ApiBackend):
    """An API adapter against its simulator (the scenario's script plays the model)."""

    mode: Literal["simulated"]


class LiveBackend(_ApiBackend, _Sampling):
    """An API adapter against the real API."""

    mode: Literal["live"]
    model: str = _backend("model")
    api_key_env: str = _backend("api_key_env")
    base_url: str | None = _backend("base_url", optional=True)
    #: an outside suite's shard: cases waiting for an answer at once (reactlab.suites.run)
    max_in_flight: int = _backend("max_in_flight")
    #: openai_chat: the calls' text format, for a server that parses none (llama.cpp's)
    text_tool_calls: Literal["hermes"] | None = _backend("text_tool_calls", optional=True)


class ScriptedBackend(_Backend):
    """The local text path: the script written as Hermes text and parsed back."""

    mode: Literal["scripted"]


class ModelBackend(_Backend, _Sampling):
    """A real local model (transformers, on the CPU)."""

    mode: Literal["model"]
    model: str = _backend("model")
    max_new_tokens: int = _backend("max_new_tokens")
    threads: int = _backend("threads")
    dtype: Dtype = _backend("dtype")
    reuse_cache: bool = _backend("reuse_cache")
    decoding: Decoding = _backend("decoding")
    engine: Engine = _backend("engine")
    grammar_backend: GrammarBackend = _backend("grammar_backend")

    @model_validator(mode="after")
    def _engine_options(self) -> Self:
        """What the engine cannot run is refused (:mod:`reactlab.config.engines`)."""
        refusal = engine_refusal(self.engine, self.decoding, self.grammar_backend,
                                 self.model_fields_set)
        if refusal is not None:
            raise PydanticCustomError("engine", refusal)
        return self

    @property
    def packages(self) -> tuple[str, ...]:
        """Distributions its engine adds to the provider's (their versions go into the
        trace header)."""
        return ("llama-cpp-python",) if self.engine == "llama_cpp" else ()

    @property
    def max_output_tokens(self) -> int:
        """``max_new_tokens``: what the local model's ``generate`` is given (its default
        applies when the config leaves it out; ``max_tokens`` is not read in this mode)."""
        return self.max_new_tokens


BackendSettings = Annotated[SimulatedBackend | ScriptedBackend | ModelBackend | LiveBackend,
                            Field(discriminator="mode")]

# --- agent, limits, script ----------------------------------------------------------------


_defence = partial(schema_field, ("$defs", "defences", "properties"))


class Defences(Settings):
    """The lesson's defences (:mod:`reactlab.agent.defences`) and those of a task's MCP
    tools (docs/mcp.md, "Tool poisoning"): the tool list pinned at planning, the tools'
    descriptions sanitized, side-effecting tools only where the task allows them. The
    last three are left out of a run's JSON unless given, so other runs' hashes stay put."""

    delimit_tool_output: bool
    scope_rule: bool
    verifier_gate: bool
    pin_tool_list: bool = _defence("pin_tool_list")
    sanitize_descriptions: bool = _defence("sanitize_descriptions")
    side_effect_allowlist: bool = _defence("side_effect_allowlist")


class AgentSettings(Settings):
    send_tools: bool
    send_system_prompt: bool
    system_prompt: str
    defences: Defences


class Limits(Settings):
    max_steps: int = schema_field(("$defs", "limits", "properties"), "max_steps")
    token_budget: int | None = Field(ge=1)


class StepScript(Settings):
    """Scripted steps (the simulated and scripted backends); ``model`` names the script."""

    model: str
    steps: list[dict[str, Any]]
    repeat_last: bool
    #: the scenario's fault plan as written (:mod:`reactlab.config.faults` parses it)
    faults: list[dict[str, Any]] = Field(default_factory=list)

    #: scripted steps are played by the ReAct loop (an outside suite's single-turn case:
    #: one turn, :class:`reactlab.agent.strategies.SingleTurn`)
    strategy: Literal["react", "single_turn"] = "react"


class StrategyScript(Settings):
    """A real model's run: who decides the calls."""

    model: str
    strategy: StrategyName


class PolicyScript(Settings):
    """An outside suite's scripted policy (``policy``, also the script's ``model``): its
    benchmark writes the policy's steps for the case when the run starts
    (:meth:`reactlab.suites.registry.Benchmark.policy_steps`), and the run plays them as a
    :class:`StepScript` on any backend that plays scripts. ``strategy``: the loop that
    plays them."""

    model: str
    policy: str
    strategy: Literal["react", "single_turn"]


ScriptSettings = StepScript | StrategyScript | PolicyScript


_suite = _section("suites")


class SuiteSettings(Settings):
    """One entry of the ``suites:`` section, typed: its defaults and bounds are the
    schema's (``schemas/config.schema.yaml``), none restated here. A list left out
    (``categories``, ``policies``, ``defences``) or ``system_prompt`` left out is None:
    its benchmark's own (every category, every policy; AgentDojo's system message). Which
    fields a benchmark takes is checked by :mod:`reactlab.config.suites`."""

    benchmark: str
    package: str | None = _package()
    backends: list[str]
    categories: list[str] | None = _suite("categories", optional=True)
    sample: int | None = _suite("sample")
    seed: int = _suite("seed")
    shard_size: int = _suite("shard_size")
    batch_size: int = _suite("batch_size")
    max_steps: int = _suite("max_steps")
    policies: list[str] | None = _suite("policies", optional=True)
    defences: list[str] | None = _suite("defences", optional=True)
    system_prompt: str | None = _suite("system_prompt", optional=True)
    #: The benchmark's own settings as given (checked by its entry's model).
    settings: dict[str, Any] = Field(default_factory=dict)


_agent = _section("agents")


class FrameworkSettings(Settings):
    """The agent of a run when it is a framework (``agents:``, docs/agents.md): the
    agent's ``name`` (its key in ``agents:``), the registered ``framework`` that runs it,
    ``capped`` (the run's step limit in the framework's own setting) or as shipped, the
    simulator's hard stop ``max_requests`` and the framework's own ``settings``."""

    name: str
    framework: str
    package: str | None = _package()
    capped: bool = _agent("capped")
    max_requests: int = _agent("max_requests")
    settings: dict[str, Any] = Field(default_factory=dict)


def _sorted_keys(value: Any) -> Any:
    """A list of tool definitions with its keys sorted at every level: the form a spec
    has after its JSON round trip (a shard's spec file, a job's spec), so that a run built
    in memory and the same run read back by its job render the same prompt."""
    if isinstance(value, list | tuple):
        return json.loads(json.dumps(list(value), sort_keys=True, ensure_ascii=False))
    return value


#: Tool definitions (:attr:`SuiteCase.tools`, :attr:`McpTools.tools`), keys sorted.
SortedTools = Annotated[list[dict[str, Any]], BeforeValidator(_sorted_keys)]


class CaseFields(Settings):
    """A benchmark's own fields of one case (its checker's inputs), one subclass per
    benchmark (:attr:`reactlab.suites.registry.Benchmark.case_fields`); a field it does not
    declare is a ConfigError naming it. ``tools_before``: the field before which the wire
    form writes ``tools`` (None: last), so that a benchmark's trace headers keep their bytes."""

    tools_before: ClassVar[str | None] = None

    @classmethod
    def of(cls, suite: SuiteCase) -> Self:
        """The case's own fields (``suite.case``) validated as this model, once per case."""
        known = suite._typed.get(cls)
        if not isinstance(known, cls):
            known = _build(cls, suite.case, f"suite ({suite.benchmark} case)")
            suite._typed[cls] = known
        return known


class SuiteCase(Settings):
    """The suite part of an outside suite's run (:mod:`reactlab.suites`): the suite's name,
    its benchmark, the tool definitions the model reads, the cases a model shard decodes
    per batch (``batch_size``, a benchmark whose entry takes it) and ``case``: the
    benchmark's own fields, whatever its checker needs to score the case from the trace
    alone, typed by its :class:`CaseFields` model (:meth:`CaseFields.of`).

    Its wire form (:meth:`to_dict`, a trace header's ``suite``) is one flat object, the
    case's fields beside the others, in the order given (:func:`suite_case` reads it).
    ``tools`` keep their keys sorted at every level (:data:`SortedTools`)."""

    name: str
    benchmark: str
    tools: SortedTools
    batch_size: int | None = None
    case: dict[str, JsonValue] = Field(default_factory=dict)
    _typed: dict[type, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def of(cls, name: str, benchmark: str, tools: list[dict[str, Any]],
           fields: CaseFields, batch_size: int | None = None) -> SuiteCase:
        """A case of ``benchmark`` with its own ``fields``, in its wire order: ``tools`` and
        ``batch_size`` (when given) before ``fields.tools_before``."""
        own = fields.to_dict()
        keys = list(own)
        at = keys.index(fields.tools_before) if fields.tools_before in own else len(keys)
        batch = {} if batch_size is None else {"batch_size": batch_size}
        return suite_case({"name": name, "benchmark": benchmark,
                           **{k: own[k] for k in keys[:at]}, "tools": tools, **batch,
                           **{k: own[k] for k in keys[at:]}})

    def to_dict(self) -> dict[str, Any]:
        """The wire form: the case's fields beside the others, in the order given."""
        top = super().to_dict()
        case = top.pop("case", {})
        order = [k for k in self._order if k in top or k in case]
        order += [k for k in [*top, *case] if k not in order]
        return {k: top[k] if k in top else case[k] for k in order}


_SUITE_FIELDS = frozenset(SuiteCase.model_fields) - {"case"}


def suite_case(value: Any, where: str = "suite") -> SuiteCase:
    """A suite case from its wire form (flat: every key that is no field of
    :class:`SuiteCase` goes into ``case``, the order kept), or a SuiteCase as it is."""
    if isinstance(value, SuiteCase):
        return value
    if not isinstance(value, Mapping) or "case" in value:
        built: SuiteCase = _build(SuiteCase, value, where)
        return built
    nested = {k: v for k, v in value.items() if k in _SUITE_FIELDS}
    nested["case"] = {k: v for k, v in value.items() if k not in _SUITE_FIELDS}
    case: SuiteCase = _build(SuiteCase, nested, where)
    case._order = tuple(value)
    return case


_ADAPTERS: dict[str, TypeAdapter[Any]] = {}
_UNION_TAG = re.compile(r"simulated|scripted|model|live|int|float|str|bool|none|"
                        r"(list|dict|function|constrained)[-\[].*")


def _adapter(kind: Any) -> TypeAdapter[Any]:
    key = repr(kind)
    if key not in _ADAPTERS:
        _ADAPTERS[key] = TypeAdapter(kind)
    return _ADAPTERS[key]


def _build(kind: Any, value: Any, where: str) -> Any:
    """``value`` validated as ``kind``; ConfigError naming the first bad field."""
    if isinstance(value, Settings):
        value = value.to_dict()
    try:
        return _adapter(kind).validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        # the field path, without the union members pydantic names (the mode, "int"...)
        loc = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]
               if not (isinstance(p, str) and _UNION_TAG.fullmatch(p))]
        raise ConfigError(where + "".join(loc), err["msg"]) from None


S = TypeVar("S", bound=Settings)


class _Builder(Generic[S]):
    """``build(value, where)``: ``value`` (a mapping, or settings of the same kind)
    validated as the settings model ``kind``; a ConfigError names the first bad field
    under ``where`` (default: the config section or spec field the model stands for)."""

    def __init__(self, kind: type[S], where: str) -> None:
        self.kind, self.where = kind, where

    def __call__(self, value: Any, where: str | None = None) -> S:
        built: S = _build(self.kind, value, self.where if where is None else where)
        return built


def backend_settings(value: Any, where: str = "backend_config") -> BackendSettings:
    settings: BackendSettings = _build(BackendSettings, value, where)
    return settings


def script_settings(value: Any, where: str = "script") -> ScriptSettings:
    kind: Any = StepScript
    if isinstance(value, Mapping) and "policy" in value:
        kind = PolicyScript
    elif isinstance(value, Mapping) and "strategy" in value and "steps" not in value:
        kind = StrategyScript
    settings: ScriptSettings = _build(kind, value, where)
    return settings


agent_settings = _Builder(AgentSettings, "agent")
limits = _Builder(Limits, "limits")
suite_settings = _Builder(SuiteSettings, "suites")
framework_settings = _Builder(FrameworkSettings, "agents")
