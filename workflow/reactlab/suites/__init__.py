"""Outside task suites: public benchmarks' cases as runs of the project's own loop.

A suite turns the cases an installed benchmark package ships into runs — tools from the
benchmark's own function schemas, questions from its data — and scores each trace with
the benchmark's own checker (docs/suites.md):

* :mod:`reactlab.suites.registry` — the ``Benchmark`` protocol and one entry per
  benchmark (its tables, specs, how a case runs, its scorer, its tables): everything
  below asks it, nothing branches on a benchmark's name;
* :mod:`reactlab.suites.types` — ``Shard`` (a case is a :class:`~reactlab.config.RunSpec`
  with its ``suite`` part), a case's paths, the seeded sample, a policy played;
* :mod:`reactlab.suites.plan` — the ``suites:`` section of config.yaml expanded into case
  specs, grouped into shards (one job = N cases);
* :mod:`reactlab.suites.run` — one shard job: every case by its benchmark, one trace per
  case, the model loaded once (:mod:`reactlab.suites.shard_job`: in its own process);
* :mod:`reactlab.suites.score` — one verify job, by the benchmark's scorer;
* :mod:`reactlab.suites.shards` — a shard's manifests, their check, the tables' paths;
* BFCL (``bfcl-eval``): its data files, the type mapping of its function documents to
  JSON Schema, its AST checker imported as a library and the scripted policies
  (:mod:`~reactlab.suites.bfcl`), the single turn (:mod:`~reactlab.suites.bfcl_run`), its
  scorer (:mod:`~reactlab.suites.bfcl_score`), ``bfcl.csv`` and ``bfcl_cases.csv``
  (:mod:`~reactlab.suites.bfcl_tables`), its entry (:mod:`~reactlab.suites.bfcl_suite`);
* AgentDojo (``agentdojo``): user task × injection task pairs on its own runtime
  (:mod:`~reactlab.suites.agentdojo_env`), its policies and the project's defences
  (:mod:`~reactlab.suites.agentdojo_run`), its own utility and security checks by
  replaying a trace and ``agentdojo.csv`` (:mod:`~reactlab.suites.agentdojo_score`), its
  entry (:mod:`~reactlab.suites.agentdojo`).

The stage comes after ``analysis`` (it uses the estimators and trajectory metrics) and
before ``views``. Benchmark packages are imported lazily, inside functions: importing
this package imports none of them.
"""
