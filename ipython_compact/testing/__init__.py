"""Test helpers shipped with the package: a local OpenAI-compatible model server."""

from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

__all__ = ["ModelServer", "RecordedRequest", "Reply", "ToolCall"]
