"""dvc.yaml declares every project file and params group each stage reads, so `dvc repro` can never
skip a stage whose inputs changed."""

import importlib

import pytest
import yaml
from fixtures import ROOT

from analysis.pipeline.commands import STAGES
from analysis.pipeline.config import Config
from analysis.tools.depgraph import stage_code_deps

DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _command(stage: dict) -> str:
    return stage["cmd"].removeprefix("copydecode ").strip()


class Recorder(dict):
    """A params mapping that records which top-level groups were read."""

    def __init__(self, data):
        super().__init__(data)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


@pytest.mark.parametrize("name", sorted(DVC))
def test_stage_code_deps_are_declared(name):
    stage = DVC[name]
    command = _command(stage)
    needed = set(stage_code_deps(command, STAGES[command], ROOT))
    declared = set(stage["deps"])
    missing = sorted(needed - declared)
    assert not missing, f"dvc.yaml stage {name!r} does not declare {missing}; run `copydecode depgraph`"


@pytest.mark.parametrize("name", sorted(DVC))
def test_stage_params_groups_are_declared(name):
    stage = DVC[name]
    command = _command(stage)
    recorder = Recorder(yaml.safe_load((ROOT / "params.yaml").read_text()))
    cfg = Config(recorder, ROOT / "params.yaml")
    module = importlib.import_module(STAGES[command])
    module.settings(recorder)  # typed settings from the params alone
    declared = {p.split(".")[0] if isinstance(p, str) else next(iter(p)) for p in stage.get("params", [])}
    assert recorder.read <= declared, f"{name} reads params groups {sorted(recorder.read - declared)} it does not declare"


def test_every_cli_stage_is_a_dvc_stage():
    assert sorted(_command(s) for s in DVC.values()) == sorted(STAGES)


def test_declared_code_files_exist_and_are_not_empty():
    """An imported file that is empty (a bare __init__.py) may be absent from the deps (stage_code_deps leaves
    it out: no code to change) and must be: DVC warns "'...' is empty." for each empty dep (issue 41)."""
    for name, stage in DVC.items():
        for dep in stage["deps"]:
            if dep.endswith(".py"):
                assert (ROOT / dep).is_file(), f"{name}: {dep} does not exist"
                assert (ROOT / dep).stat().st_size > 0, f"{name}: {dep} is empty; run `copydecode depgraph`"


def test_readme_stage_table_matches_dvc_yaml():
    """The stage table (docs/pipeline.md, linked from the README) holds every dvc.yaml stage with its
    command, and the README's sentence names every stage."""
    import re

    table = (ROOT / "docs/pipeline.md").read_text()
    rows = re.findall(r"^\| (\w+) \| `(copydecode [^`]+)` \|", table, flags=re.M)
    assert {name: cmd for name, cmd in rows} == {name: stage["cmd"] for name, stage in DVC.items()}
    readme = " ".join((ROOT / "README.md").read_text().split())
    sentence = readme[readme.index("The pipeline's stages"):readme.index("docs/pipeline.md")]
    assert all(re.search(rf"\b{name}\b", sentence) for name in DVC), sentence
    assert not re.search(r"runs \d+ stages", readme)  # a count went stale (15 stated, 12 ran: issue 41)


def test_every_stage_times_itself_under_its_dvc_stage_name():
    """`copydecode readme` gathers data/timings/<dvc stage>.json; the engine summary timed itself as `engine`, so
    a full `dvc repro` left its stage without a run time and the readme refused the whole pipeline's time."""
    import re

    from analysis.pipeline.io import dvc_stage_names

    stages = set(dvc_stage_names(ROOT / "dvc.yaml"))
    named = {m for path in [*(ROOT / "analysis/stages").glob("*.py"), *(ROOT / "kernels_profile/stages").glob("*.py")]
             for m in re.findall(r'\btimed\("([a-z_]+)"\)', path.read_text())}
    assert named and named <= stages, sorted(named - stages)
