"""Every checked-in generated file is what ``python tools/generate.py`` writes from the sources now.

A stale file fails here with the one command that regenerates it, whichever file it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import generate


def test_every_generated_file_is_current() -> None:
    stale = generate.stale()
    assert not stale, f"stale generated files {stale}: run {generate.COMMAND}"


def test_the_check_names_each_stale_file_and_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A declaration change shows up as a generator whose output differs from the checked-in text.
    before = (generate.ROOT / generate.TYPED_ARGS).read_text(encoding="utf-8")
    monkeypatch.setitem(generate.GENERATED, generate.TYPED_ARGS, lambda: before + "# a new field\n")
    assert generate.main(["--check"]) == 1
    assert capsys.readouterr().err == f"{generate.TYPED_ARGS} is stale: run {generate.COMMAND}\n"
    assert (generate.ROOT / generate.TYPED_ARGS).read_text(encoding="utf-8") == before  # --check writes nothing


def test_writing_makes_every_file_current_and_keeps_current_ones(tmp_path: Path) -> None:
    assert generate.write(tmp_path) == list(generate.GENERATED)
    assert generate.stale(tmp_path) == []
    assert generate.write(tmp_path) == []


def test_every_file_that_says_generated_is_known_to_the_command() -> None:
    # A generated module says so on its first line; one the command does not write would never be checked.
    marked = {
        path.relative_to(generate.ROOT).as_posix()
        for folder in ("slonk_infra", "components")
        for path in (generate.ROOT / folder).rglob("*.py")
        if "(generated: do not edit)" in path.read_text(encoding="utf-8").partition("\n")[0]
    }
    assert marked <= set(generate.GENERATED)
