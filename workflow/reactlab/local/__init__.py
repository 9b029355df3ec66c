"""Local-LLM backend building blocks: the Hermes tool-call format (:mod:`.hermes`, stdlib
only) and model provisioning and generation (:mod:`.model`, imports torch lazily)."""
