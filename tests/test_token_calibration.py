"""Token estimates that learn the model's tokenizer per content class (issue 33, item 4).

Why: the density estimate read a session of numeric outputs as 23,600 tokens where SmolLM2's
tokenizer made 53,800. ``core.token_calibration`` is pure; the real-model check counts with the
server's tokenize endpoint.
"""

from __future__ import annotations

import json

import pytest

from ipython_compact.core.token_calibration import Calibration, content_class
from ipython_compact.core.tokens import estimate_message_tokens
from ipython_compact.testing.llama_server import LlamaServer


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("The model reads the file and answers the user.", "prose"),
        ("def f(x):\n    return x + 1\n", "code"),
        ("12.5 3391.02 -77.0\n4410.9 12.0 8.75", "digits"),
        (json.dumps([{"id": 1, "name": "a"}]), "json"),
        ("Die Größe der Datei überschreitet das Limit.", "latin"),
        ("模型读取文件并将结果写入日志", "cjk"),
        ("9f2c4e1ab37d55e0 0c7a9e13bb24f6d1", "ids"),
        ("", "prose"),
    ],
)
def test_each_kind_of_text_gets_its_class(text: str, cls: str) -> None:
    assert content_class(text) == cls


def test_a_class_learns_its_ratio_and_others_stay_as_estimated() -> None:
    cal = Calibration()
    cal.observe("digits", 100, 400)
    cal.observe("digits", 50, 200)
    assert cal.ratio("digits") == 4.0 and cal.ratio("prose") == 1.0
    assert cal.corrected("1 2 3 4 5 6 7 8 9 0 1 2", 10) == 40
    assert cal.corrected("Plain words here.", 10) == 10


def test_an_absurd_observation_is_clamped_and_an_unknown_class_is_refused() -> None:
    cal = Calibration()
    cal.observe("ids", 1, 1000)
    assert cal.ratio("ids") == 8.0
    with pytest.raises(ValueError, match="unknown content class 'tables'"):
        cal.observe("tables", 1, 1)


@pytest.mark.realmodel
@pytest.mark.slow
def test_three_counts_bring_numeric_output_within_a_quarter_of_the_real_tokens(llama: LlamaServer) -> None:
    outputs = [" ".join(f"{(i * 7919 + j * 104729) % 100000 / 7:.4f}" for j in range(40)) for i in range(6)]
    cal = Calibration()
    for text in outputs[:3]:
        cal.observe(
            content_class(text),
            estimate_message_tokens({"role": "user", "content": text}),
            llama.tokens(text),
        )
    for text in outputs[3:]:
        est = estimate_message_tokens({"role": "user", "content": text})
        real = llama.tokens(text)
        assert est < 0.5 * real  # the density estimate alone is far off for digits
        assert abs(cal.corrected(text, est) / real - 1) <= 0.25
