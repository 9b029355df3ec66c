"""reactlab: a reproducible experiment pipeline for tool-calling LLM agents."""

__version__ = "0.1.0"
