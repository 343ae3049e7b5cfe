"""The cheap gates in front of the identifier patterns only skip scans that could not match:
with and without them, ``extract_identifiers`` finds exactly the same identifiers."""

from __future__ import annotations

import pytest

from ipython_compact.cli.demo_transcript import TranscriptGenerator
from ipython_compact.core import identifiers as drift  # the patterns and their gates (split out of drift)

TEXTS = [
    "score=٥٥٥",  # a Unicode digit after "=", alone
    "torch ٢.٣.١ (Unicode digits in a version)",
    "score=٥٥٥ and auc=0.91 commit abc1234 v1.2.3",
    "numpy==1.26.4, torch 2.3.1 and python3.11; see /work/data/part-0001.parquet",
    "deadbeefcafe0123 is the commit; 0123456 has no letter; abcdefa has no digit",
    "loss=3e-4 rows=4211 lr=-0.5 sha=9f8e7d6c5b4a 12 passed, 1 failed, 2 errors",
    "KeyError: 'tenure_bucket_5'\nValueError: bad ٣.٤ value",
    "half an emoji \ud83d then ab12cd3 and x.py y.ipynb z.txt(",
    "nothing here at all",
    "DATA-1005 #123 run-2024abc https://example.org/a/b.json",
]


def _generated() -> list[str]:
    gen = TranscriptGenerator(seed=4, big_output_lines=30)
    out: list[str] = []
    for round_ in gen.rounds(40):
        for message in round_:
            content = message.get("content")
            if isinstance(content, list):
                out.extend(b.get("text", "") for b in content if isinstance(b, dict))
            elif isinstance(content, str):
                out.append(content)
    return out


@pytest.mark.parametrize("text", TEXTS + _generated())
def test_gates_never_change_what_is_found(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    gated = drift.extract_identifiers(text)
    monkeypatch.setattr(drift, "_SCANS", tuple((c, p, h, None) for c, p, h, _ in drift._SCANS))
    assert drift.extract_identifiers(text) == gated
