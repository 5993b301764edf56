"""The shipped skill file: its front matter, its sections, and `labkit export-skill`."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from labkit.cli import main
from labkit.course.skill import SKILL_FILE, ExportError, export_skill, skill_text

REPO = Path(__file__).resolve().parents[2]

SECTIONS = [
    "Scope contract",
    "Boundary checks",
    "Trigger",
    "Capability gate",
    "MRTR result",
    "Interaction design",
    "Retry contract",
    "Branch handling",
    "State protection",
    "Final revalidation",
]
HARD_REJECTS = [
    "Roots as authorization or sandbox",
    "A reverse `elicitation/create` at 2026-07-28",
    "Secrets in form mode",
    "A mode the request did not declare",
    "`clientInfo` as identity",
    "Mutation before validated acceptance",
    "Unsigned state",
]


def front_matter(text: str) -> tuple[dict[str, object], str]:
    """The YAML subset the skill uses: `key: scalar` and `key: [a, "b"]` lines."""
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "the file must open with a --- front matter block"
    data: dict[str, object] = {}
    for line in match.group(1).splitlines():
        key, sep, value = line.partition(": ")
        assert sep and re.fullmatch(r"[a-z_]+", key), f"not a simple YAML line: {line!r}"
        value = value.strip()
        if value.startswith("["):
            assert value.endswith("]")
            data[key] = [v.strip().strip('"') for v in value[1:-1].split(",")]
        else:
            assert not value.startswith(("'", '"', "{", "|", ">")), line
            data[key] = value
    return data, text[match.end() :]


def test_front_matter_parses():
    data, body = front_matter(skill_text())
    assert data["name"] == "elicitation-form-designer"
    assert re.fullmatch(r"\d+\.\d+\.\d+", str(data["version"]))
    assert "2026-07-28" in str(data["description"])
    assert isinstance(data["tags"], list) and "elicitation" in data["tags"]
    assert "2026-07-28" in data["tags"]
    assert body.lstrip().startswith("# ")


def test_ten_sections_in_order():
    _, body = front_matter(skill_text())
    headings = re.findall(r"^### \d+\. (.+)$", body, re.M)
    assert headings == SECTIONS


def test_hard_rejects_and_refusal_rules_are_present():
    _, body = front_matter(skill_text())
    rejects = body.split("## Hard rejects", 1)[1].split("\n## ", 1)[0]
    for reject in HARD_REJECTS:
        assert f"- **{reject}.**" in rejects
    assert "## Refusal rules" in body


@pytest.mark.parametrize(
    "fact",
    [
        "-32021",
        "-32022",
        "-32602",
        "inputRequests",
        "inputResponses",
        "requestState",
        "requiredCapabilities",
        "exactly once",
        "| `decline` |",
        "| `cancel` |",
        "| `accept` |",
    ],
)
def test_protocol_facts_are_in_the_body(fact: str):
    assert fact in skill_text()


def test_export_equals_the_packaged_copy(tmp_path: Path):
    path, written = export_skill(tmp_path)
    assert written and path == tmp_path / SKILL_FILE
    assert path.read_bytes() == skill_text().encode("utf-8")


def test_the_repository_copy_is_current():
    assert (REPO / "outputs" / SKILL_FILE).read_text(encoding="utf-8") == skill_text()


def test_the_file_is_package_data():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert f"course/{SKILL_FILE}" in pyproject["tool"]["setuptools"]["package-data"]["labkit"]


def test_cli_writes_into_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["export-skill", "--out", str(tmp_path)]) == 0
    assert (tmp_path / SKILL_FILE).read_text(encoding="utf-8") == skill_text()
    assert f"wrote {tmp_path / SKILL_FILE}" in capsys.readouterr().out


def test_identical_file_is_a_no_op_success(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    export_skill(tmp_path)
    before = (tmp_path / SKILL_FILE).stat().st_mtime_ns
    os.utime(tmp_path / SKILL_FILE, ns=(1, 1))
    assert main(["export-skill", "--out", str(tmp_path)]) == 0
    assert (tmp_path / SKILL_FILE).stat().st_mtime_ns == 1 != before
    assert "unchanged" in capsys.readouterr().out


def test_a_different_file_is_refused_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / SKILL_FILE).write_text("my own notes\n", encoding="utf-8")
    assert main(["export-skill", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert str(tmp_path / SKILL_FILE) in err and "--force" in err
    assert (tmp_path / SKILL_FILE).read_text(encoding="utf-8") == "my own notes\n"


def test_force_overwrites(tmp_path: Path):
    (tmp_path / SKILL_FILE).write_text("my own notes\n", encoding="utf-8")
    assert main(["export-skill", "--out", str(tmp_path), "--force"]) == 0
    assert (tmp_path / SKILL_FILE).read_text(encoding="utf-8") == skill_text()


def test_missing_out_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    missing = tmp_path / "nope"
    assert main(["export-skill", "--out", str(missing)]) == 1
    assert f"output directory {missing} does not exist" in capsys.readouterr().err
    assert not missing.exists()


def test_out_is_a_file(tmp_path: Path):
    (tmp_path / "f").write_text("", encoding="utf-8")
    with pytest.raises(ExportError, match="is not a directory"):
        export_skill(tmp_path / "f")


def test_target_is_a_directory(tmp_path: Path):
    (tmp_path / SKILL_FILE).mkdir()
    with pytest.raises(ExportError, match="is a directory"):
        export_skill(tmp_path, force=True)


def test_unwritable_target_is_a_clear_error(tmp_path: Path):
    # A dangling link stands in for an unwritable place (tests may run as root, which
    # ignores directory permissions).
    (tmp_path / SKILL_FILE).symlink_to(tmp_path / "gone" / "file.md")
    with pytest.raises(ExportError, match=f"cannot write {re.escape(str(tmp_path / SKILL_FILE))}"):
        export_skill(tmp_path)
