"""analysis.pipeline.repo: the one reader of the project's git repository."""

import re

from fixtures import ROOT

from analysis.pipeline.repo import git, git_state


def test_the_checkout_has_a_commit_and_a_folder_outside_git_has_none(tmp_path):
    state = git_state(ROOT)
    assert state.error is None and re.fullmatch(r"[0-9a-f]{40}", state.commit or "")
    assert state.changed is not None and state.dirty == bool(state.changed)
    outside = git_state(tmp_path)
    assert outside.commit is None and outside.dirty is None
    assert not git(tmp_path, "rev-parse", "HEAD").ok
