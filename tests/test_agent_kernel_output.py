"""What the agent's kernel tool reads back from a cell: one print is one piece of text, however
the kernel chunks it on the wire (a busy kernel sent "5000001" and "\\n" apart, and the text came
back as "5000001\\n"). Real kernel."""

from __future__ import annotations

import pytest

from ipython_compact.agent.kernel_tool import JupyterKernel

pytestmark = pytest.mark.slow


def test_stream_chunks_are_joined_as_written() -> None:
    with JupyterKernel() as kernel:
        got = kernel.execute(
            "import sys\nsys.stdout.write('50'); sys.stdout.flush()\n"
            "sys.stdout.write('00001'); sys.stdout.flush()\nsys.stdout.write('\\n'); "
            "sys.stdout.flush()"
        )
        assert got.text == "5000001"
        two = kernel.execute("print('a'); import sys; sys.stdout.flush(); print('b')\n1 + 1")
        assert two.text == "a\nb\n2"
