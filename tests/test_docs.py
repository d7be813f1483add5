"""The documentation: the site builds (MkDocs, strict: a broken link between pages fails it),
a page the navigation does not list still appears in it, every relative link of the README
and the pages resolves, and every shell command of theirs that runs ``txnchaos`` names a real
subcommand and only options that subcommand takes (its ``--help`` lists them)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from txnchaos.jobs.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^```(\w*)\s*$")
SHELL = {"sh", "bash", "shell", "console", ""}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _mkdocs(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    return subprocess.run(
        [str(mkdocs), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    out = _mkdocs("build", "--strict", "--site-dir", str(tmp_path / "site"))
    assert out.returncode == 0, out.stderr
    assert (
        tmp_path / "site" / "findings" / "librdkafka-txn-req-cnt-assertion" / "index.html"
    ).is_file()


def test_a_page_the_navigation_does_not_list_appears_in_it(tmp_path: Path) -> None:
    """Pages other branches add (docs/<topic>.md) need no edit of the navigation."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "docs" / "a-new-topic.md").write_text("# A new topic\n\nText.\n")
    out = _mkdocs("build", "--strict", "--site-dir", str(tmp_path / "site"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    home = (tmp_path / "site" / "index.html").read_text()
    assert 'href="a-new-topic/"' in home and "A new topic" in home


def _links(page: Path) -> list[str]:
    text = page.read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # links in code are not links
    return [a or b for a, b in LINK.findall(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue  # http(s)://, mailto:, an anchor on the same page
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def shell_commands(page: Path) -> list[str]:
    """The txnchaos commands of a page's shell blocks, continuation lines joined."""
    out, lang, block = [], None, []
    for line in page.read_text().splitlines():
        m = FENCE.match(line)
        if m and lang is None:
            lang, block = m.group(1), []
            continue
        if line.startswith("```") and lang is not None:
            if lang in SHELL:
                joined = "\n".join(block).replace("\\\n", " ")
                for cmd in joined.splitlines():
                    cmd = cmd.strip().removeprefix("$ ")
                    if (
                        re.match(r"^(\S*/)?txnchaos\s", cmd + " ")
                        and "txnchaos." not in cmd.split()[0]
                    ):
                        out.append(cmd)
            lang = None
            continue
        if lang is not None:
            block.append(line)
    return out


def _check(command: str) -> list[str]:
    """What is wrong with one documented command line: an unknown subcommand or option."""
    tokens = [t.strip("[]") for t in shlex.split(command, comments=True)][1:]
    cmd: click.Command = main
    path = ["txnchaos"]
    problems = []
    for i, tok in enumerate(tokens):
        if isinstance(cmd, click.Group) and not tok.startswith("-"):
            sub = cmd.commands.get(tok)
            if sub is None:
                return [f"`{' '.join(path)} {tok}`: no such subcommand"]
            cmd, path = sub, [*path, tok]
            continue
        if not tok.startswith("-") or re.fullmatch(r"-\d[\d.]*", tok):
            continue
        option = tok.split("=", 1)[0]
        known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"-h", "--help"}
        for alternative in option.split("|"):
            if alternative not in known:
                problems.append(f"`{' '.join(path)}` takes no {alternative} (token {i + 1})")
    return problems


COMMANDS = [(p, c) for p in PAGES for c in shell_commands(p)]


def test_the_pages_document_commands() -> None:
    assert len(COMMANDS) > 30  # the check below is not vacuous


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p.name}:{c[:40]}" for p, c in COMMANDS])
def test_every_documented_command_parses_against_the_real_cli(page: Path, command: str) -> None:
    assert not _check(command), (str(page.relative_to(ROOT)), command, _check(command))


def test_the_check_catches_a_wrong_option_and_subcommand() -> None:
    assert _check(".venv/bin/txnchaos run x.yaml --no-such-option 3")
    assert _check("txnchaos nosuchcommand")
    assert not _check("txnchaos run SCENARIO [--seed N] --no-analyze   # a comment --bogus")
