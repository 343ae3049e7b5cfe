"""Plain text that fits the terminal: values in full, wrapped inside their column."""

from __future__ import annotations

import pytest

from ipython_compact.kernel.plain_text import KEEP, fields, table, wrap


@pytest.mark.parametrize(
    ("text", "width", "lines"),
    [
        ("a b c", 80, ["a b c"]),
        ("alpha beta gamma", 10, ["alpha beta", "gamma"]),
        ("one\ntwo", 80, ["one", "two"]),
        ("/a/very/long/path/that/does/not/fit", 10, ["/a/very/long/path/that/does/not/fit"]),  # never cut
        ("", 10, [""]),
    ],
)
def test_wrap(text: str, width: int, lines: list[str]) -> None:
    assert wrap(text, width) == lines


def test_fields_wrap_values_under_themselves() -> None:
    text = fields([("Short", "x"), ("Not saved", "fh: open file handles are not persisted")], 30)
    assert text.splitlines() == [
        "Short      x",
        "Not saved  fh: open file",
        "           handles are not",
        "           persisted",
    ]


PATH = "/tmp/surf2-term/data/snapshots/term-599f7703547e/manifest-00000001.json"  # 71 characters


@pytest.mark.parametrize(
    ("value", "lines"),
    [
        # a path longer than the value column (68) but not than the line: whole, on a line of its
        # own, moved left just enough to fit (the terminal broke it mid-word: "….j" / "son")
        (f"{PATH} (0 B written)", ["Written to", " " * 9 + PATH, " " * 12 + "(0 B written)"]),
        (f"see {PATH}", ["Written to  see", " " * 9 + PATH]),
        # a word too long even alone on a line: flush left, the least it can stick out
        ("x" * 90, ["Written to", "x" * 90]),
        ("short", ["Written to  short"]),
    ],
)
def test_a_word_longer_than_its_column_gets_a_line_of_its_own_that_fits(value: str, lines: list[str]) -> None:
    assert fields([("Written to", value)], 80).splitlines() == lines


def test_table_fits_the_width_and_keeps_every_word() -> None:
    rows = [["a", "list", "250 items", "lost on restart: open file handles are not persisted"]]
    text = table(["name", "type", "size", "notes"], rows, 40)
    assert all(len(line) <= 40 for line in text.splitlines())
    assert " ".join(text.split()) == (
        "name type size notes a list 250 items lost on restart: open file handles are not persisted"
    )


def test_a_long_first_cell_gets_its_own_line_in_full() -> None:
    long_name = "a_really_long_variable_name_for_testing_wrapping"
    text = table(["name", "type"], [[long_name, "int"], ["x", "str"]], 40)
    assert text.splitlines() == ["name  type", long_name, "      int", "x     str"]


def test_keep_joins_words_that_must_not_be_split_and_prints_a_space() -> None:
    text = table(["size"], [[f"23.4{KEEP}KiB · 54{KEEP}B"]], 10)
    assert text.splitlines() == ["size", "23.4 KiB ·", "54 B"]
