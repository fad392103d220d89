"""P1: no committed output names the machine it was made on: no absolute checkout, home or temporary path
in any tracked file under reports/ (notebooks' papermill root and paths, benchmark reports, tables)."""

from __future__ import annotations

import re
import subprocess

from fixtures import ROOT

# an absolute path into a checkout, a home or a temporary folder (POSIX, macOS, Windows)
MACHINE_PATH = re.compile(r"(?<![\w.~-])(?:/(?:work|home|root|tmp|Users|private/var|var/folders|mnt|scratch)/"
                          r"|[A-Za-z]:\\\\(?:Users|Windows|Temp)\\\\)")
TEXT = (".md", ".csv", ".json", ".jsonl", ".ipynb", ".html", ".txt", ".svg")


def tracked(folder: str) -> list[str]:
    done = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if line.endswith(TEXT)]


def test_the_pattern_catches_what_it_is_for():
    for leak in ('"root": "/work/main"', "input_path: /home/ann/copydecode/notebooks/x.ipynb", "--out /tmp/b",
                 "C:\\\\Users\\\\ann\\\\x"):
        assert MACHINE_PATH.search(leak), leak
    for fine in ("reports/notebooks/bounds.ipynb", "runs/bench-profile", "http://x/tmp/y", "a/tmp/b", "~/tmp/x"):
        assert not MACHINE_PATH.search(fine), fine


def test_no_committed_report_names_a_machine_path():
    files = tracked("reports")
    assert files, "no tracked reports (not a git checkout?)"
    leaks = []
    for name in files:
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        for match in MACHINE_PATH.finditer(text):
            leaks.append(f"{name}: {text[max(0, match.start() - 30):match.end() + 30]!r}")
    assert not leaks, "\n".join(leaks[:20])
