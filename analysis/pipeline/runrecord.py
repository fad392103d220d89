"""A frozen run's record, its run.json: what ran (the command), on which code (the commit, and whether
tracked files differed from it), when (UTC start and end), for how long (wall-clock seconds) and where
(the machine), beside the run's own facts.

Two kinds of run write one: a run that records itself as it ends (`run_record`: an e2e preset run,
kernels_profile.stages.e2e), and a run frozen afterwards from the facts a person gives
(`frozen_record`: `copydecode pilot-sweep --freeze PRESET --run JSON`). The commit comes from the one
git-state reader (analysis.pipeline.repo). Readers check RUN_FIELDS (analysis.results.e2e).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from analysis.pipeline.repo import git_state

RUN_JSON = "run.json"
RUN_FIELDS = ("command", "commit", "started", "ended", "seconds")  # what a self-recorded run.json always holds


def run_record(command: str, started: datetime, seconds: float, machine: Any, **facts: Any) -> dict:
    """The record of a run that ends now: the command, the commit and whether the tree had uncommitted
    changes, UTC start and end, wall-clock seconds, the machine, and `facts` (its preset, ...)."""
    state = git_state()
    return {**facts, "command": command, "commit": state.commit, "dirty": state.dirty,
            "started": started.isoformat(timespec="seconds"),
            "ended": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": round(seconds, 1),
            "machine": machine}


def frozen_record(given: dict) -> dict:
    """The record of a run frozen afterwards: the facts a person gives, as given; where they name no
    commit, the working tree's (and whether it had uncommitted changes)."""
    if "commit" in given:
        return dict(given)
    state = git_state()
    return {"commit": state.commit, "dirty": state.dirty, **given}


def lacking(record: dict) -> list[str]:
    """The RUN_FIELDS a record lacks."""
    return [name for name in RUN_FIELDS if name not in record]
