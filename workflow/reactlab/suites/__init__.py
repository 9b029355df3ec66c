"""Outside task suites: public benchmarks' cases as runs of the project's own loop.

A suite turns the cases an installed benchmark package ships into runs — tools from the
benchmark's own function schemas, questions from its data — and scores each trace with
the benchmark's own checker (docs/suites.md):

* :mod:`reactlab.suites.bfcl` — the Berkeley Function Calling Leaderboard (``bfcl-eval``):
  its data files, the type mapping of its function documents to JSON Schema, its AST
  checker imported as a library, and the scripted policies that validate the harness
  against that checker;
* :mod:`reactlab.suites.agentdojo` — AgentDojo (``agentdojo``): user task × injection
  task pairs on its own runtime, its scripted policies, the project's defences, its own
  utility and security checks by replaying a trace, ``agentdojo.csv``;
* :mod:`reactlab.suites.plan` — the ``suites:`` section of config.yaml expanded into
  :class:`~reactlab.suites.plan.CaseSpec` runs, grouped into shards (one job = N cases);
* :mod:`reactlab.suites.run` — one shard job: every case through
  :func:`reactlab.agent.loop.run_agent`, one trace per case, the model loaded once;
* :mod:`reactlab.suites.score` — the verification record of a suite trace (the
  benchmark's verdict and error type, the project's trajectory metrics beside it);
* :mod:`reactlab.suites.tables` — ``bfcl.csv`` and ``agentdojo.csv``.

The stage comes after ``analysis`` (it uses the estimators and trajectory metrics) and
before ``views``. Benchmark packages are imported lazily, inside functions: importing
this package imports none of them.
"""
