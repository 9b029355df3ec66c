"""The scripted model: which action a scenario's script takes on a request, as the
request's ``tool_choice`` and parallel-call flags let it (:class:`ScriptedPolicy`,
:class:`ToolChoice`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reactlab.config.scripts import Action, Script, ScriptedCall

#: The answer tool of agents with a submit step (Inspect's ``react()``): when a request
#: offers a tool of this name and tool calls are allowed, the scripted model gives an
#: answer step as one call to it, ``{"answer": text}`` (docs/simulators.md).
ANSWER_TOOL = "submit"


@dataclass(frozen=True)
class ScriptedPolicy:
    """Scripts by model name, and the task they play."""

    scripts: Mapping[str, Script]
    params: Mapping[str, Any]
    question: str
    #: The model name an answer gives for a requested name (default: the name itself);
    #: the server answers an alias with the script that plays, as a real API would.
    answer_names: Mapping[str, str] = field(default_factory=dict)

    def act(self, model: str, turn: int, results: Sequence[Any], seen: str = "",
            choice: ToolChoice | None = None, calls_made: int = 0) -> Action:
        """The scripted model's action on assistant turn ``turn``, obeying ``choice``.

        ``calls_made`` is the number of tool calls the assistant already made in the
        conversation (what a script played one call per turn has reached). Raises
        KeyError for an unknown model, ScriptError when the script cannot go on.
        """
        script = self.scripts[model]
        choice = choice or AUTO
        # A conversation that carries fewer tool results than the calls made so far (by the
        # assistant, or by the script's steps before this turn: a client that keeps the
        # model's calls and their results as plain text, outside tool-call items and tool
        # messages) is valid for the API: the scripted model reads what it got, and a field
        # the results it got cannot fill is written ``?`` (as for results not shaped like
        # the lesson's), instead of a script error.
        scripted = sum(len(script.steps[k].get("calls", ()))
                       for k in range(min(turn, len(script.steps))))
        lenient = True if len(results) < max(calls_made, scripted) else None
        if choice.parallel:
            action = script.action(turn, self.params, self.question, results, seen,
                                   lenient=lenient)
        else:
            action = self._one_call_per_turn(script, calls_made, results, seen, lenient)
        action = choice.apply(action, script, turn, self.params, self.question, results, seen)
        if action.text is not None and choice.mode != "none" and ANSWER_TOOL in choice.offered:
            # an agent with a submit step (Inspect's react()) asks for the answer through
            # its answer tool: the scripted model gives it there, as its prompt says
            return Action(calls=(ScriptedCall(ANSWER_TOOL, {"answer": action.text}),))
        return action

    def _one_call_per_turn(self, script: Script, calls_made: int, results: Sequence[Any],
                           seen: str, lenient: bool | None = None) -> Action:
        """The script played one call per turn: the step that ``calls_made`` reaches,
        and in it the first call not made yet (an answer step is played as it is)."""
        left, step = calls_made, 0
        while True:
            action = script.action(step, self.params, self.question, results, seen,
                                   lenient=lenient)
            if action.text is not None or left < len(action.calls):
                return action if action.text is not None else Action(
                    calls=(action.calls[left],))
            left -= len(action.calls)
            step += 1

    def resolve(self, model: str) -> str:
        """The answer's ``model`` for a request for ``model`` (KeyError when not served)."""
        self.scripts[model]
        return self.answer_names.get(model, model)


@dataclass(frozen=True)
class ToolChoice:
    """What a request lets the scripted model do with its tools, neutral across APIs.

    ``mode``: ``auto`` (the script decides), ``none`` (no call: the model answers),
    ``required`` (at least one call), ``tool`` (a call to ``name``); ``parallel``: False
    when the request allows one call per turn (Responses / Chat ``parallel_tool_calls:
    false``, Messages ``disable_parallel_tool_use: true``); ``offered``: the names of
    the tools the request offers, in order.

    How the scripted model obeys (:meth:`apply`):

    * ``none`` — a step with calls is replaced by the script's next answer (rendered
      leniently: a field the results cannot fill yet is written ``?``); a script with no
      answer ahead (``bucle``) answers with empty text;
    * ``required`` — an answer step is replaced by the calls of the latest calls step
      before it (the model calls again instead of answering; the loop's repeated-call
      guard sees them); a script without a calls step calls the first offered tool with
      ``{}``;
    * ``tool`` — only the step's calls to ``name`` are kept; when it has none, the
      script's first call to ``name`` in any step, else ``name`` with ``{}``;
    * ``parallel`` False — at most one call per turn: the script's calls are played one
      per turn, in order (:meth:`ScriptedPolicy.act`), and a forced choice keeps its
      first call.
    """

    mode: str = "auto"
    name: str | None = None
    parallel: bool = True
    offered: tuple[str, ...] = ()

    def apply(self, action: Action, script: Script, turn: int, params: Mapping[str, Any],
              question: str, results: Sequence[Any], seen: str) -> Action:
        """``action`` (what the script does on ``turn``) as this choice lets it be."""
        if self.mode == "none" and action.text is None:
            action = self._next_answer(script, turn, params, question, results, seen)
        elif self.mode == "required" and action.text is not None:
            action = self._earlier_calls(script, turn, params, question, results, seen)
        elif self.mode == "tool" and self.name is not None:
            kept = tuple(c for c in action.calls if c.name == self.name)
            action = Action(calls=kept) if kept else self._call_to(
                self.name, script, params, question, results, seen)
        if not self.parallel and len(action.calls) > 1:
            action = Action(calls=action.calls[:1])
        return action

    @staticmethod
    def _next_answer(script: Script, turn: int, params: Mapping[str, Any], question: str,
                     results: Sequence[Any], seen: str) -> Action:
        for k in range(turn, len(script.steps)):
            step = script.step_at(k, seen)
            if "answer" in step:
                return script.play(step, k, params, question, results, lenient=True)
        return Action(text="")

    def _earlier_calls(self, script: Script, turn: int, params: Mapping[str, Any],
                       question: str, results: Sequence[Any], seen: str) -> Action:
        for k in range(min(turn, len(script.steps)) - 1, -1, -1):
            step = script.step_at(k, seen)
            if "calls" in step:
                return script.play(step, k, params, question, results, lenient=True)
        first = self.offered[0] if self.offered else None
        return Action(calls=(ScriptedCall(first, {}),)) if first else Action(text="")

    @staticmethod
    def _call_to(name: str, script: Script, params: Mapping[str, Any], question: str,
                 results: Sequence[Any], seen: str) -> Action:
        for k, step in enumerate(script.steps):
            step = script.step_at(k, seen)
            if "calls" in step and any(c.get("name") == name for c in step["calls"]):
                calls = script.play(step, k, params, question, results, lenient=True).calls
                return Action(calls=tuple(c for c in calls if c.name == name)[:1])
        return Action(calls=(ScriptedCall(name, {}),))


AUTO = ToolChoice()
