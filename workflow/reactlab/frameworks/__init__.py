"""Agent frameworks as the system under test (docs/agents.md).

A run whose agent is a framework (``agents:`` in config.yaml, ``RunSpec.framework``) is
not driven by the project's loop: the framework runs to completion with its own loop,
its own typed tools (built from the task's tools: :class:`~reactlab.frameworks.wire.Kit`)
and its own SDK client, pointed at the backend's simulator. Everything the run's trace
holds is taken from the wire (:mod:`reactlab.frameworks.wire`): every request the
simulator received and what it answered, the tool calls, the tool results exactly as the
framework sent them back, tokens counted on the exact bodies, and the framework's own
ending in the ``end`` record. The records are the project's own types, so the verifier,
tables, figures, viewer and exports read a framework's run as they read the loop's.

* :mod:`reactlab.frameworks.registry` — the ``Framework`` protocol and one entry per
  framework (its name, the wire APIs its client speaks, the settings it takes, its
  packages); a framework outside the package is one :func:`register` call
  (``tests/toy_agent.py``);
* :mod:`reactlab.frameworks.wire` — the kit a framework runs with (tools, client, model
  name, limits) and the trace built from the wire.

The stage sits above ``backends`` (it reads each wire API's exchanges with its adapter)
and below ``runner`` (whose one function dispatches a framework's spec here).
"""
