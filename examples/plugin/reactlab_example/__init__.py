"""reactlab-example-plugin: an agent, a model server, a benchmark and a tool source for
reactlab, each one module and one entry point of this package (docs/plugins.md).

* :mod:`reactlab_example.agent`: ``TEXT_AGENT`` (group ``reactlab.agents``);
* :mod:`reactlab_example.provider`: ``PROVIDER`` (group ``reactlab.providers``);
* :mod:`reactlab_example.benchmark`: ``BENCHMARK`` (group ``reactlab.benchmarks``);
* :mod:`reactlab_example.tools`: ``TOOL_SOURCE`` (group ``reactlab.tool_sources``).

Importing the package imports none of them: reactlab loads each entry point when a
config names it.
"""
