"""analysis.errors: one exception type per domain under CopyDecodeError, the one type the command line
reports by name (no traceback). Every public exception class of both packages must derive from it."""

import ast

import pytest
from fixtures import ROOT

from analysis import errors
from analysis.errors import CopyDecodeError, MissingOutputError, ParamsError

PACKAGES = ("analysis", "kernels_profile")


def exception_classes() -> dict[str, tuple[str, list[str]]]:
    """Every class of both packages whose name ends in Error or Exception: name -> (where, base names)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception")):
                    bases = [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                             if isinstance(b, (ast.Name, ast.Attribute))]
                    found[node.name] = (str(path.relative_to(ROOT)), bases)
    return found


def reaches_base(name: str, classes: dict, seen=()) -> bool:
    if name == "CopyDecodeError":
        return True
    if name not in classes or name in seen:
        return False
    return any(reaches_base(base, classes, (*seen, name)) for base in classes[name][1])


def test_every_public_exception_class_is_a_copydecode_error():
    classes = exception_classes()
    assert {"TimingError", "ModelError", "CheckpointError"} <= set(classes)  # both packages are scanned
    stray = {name: where for name, (where, _) in classes.items()
             if not name.startswith("_") and not reaches_base(name, classes)}
    assert not stray, f"exception classes the command line would not report by name: {stray}"


def test_the_scan_sees_a_class_outside_the_hierarchy():
    classes = {"CopyDecodeError": ("e", ["Exception"]), "GoodError": ("a", ["CopyDecodeError"]),
               "BadError": ("b", ["ValueError"]), "LoopError": ("c", ["LoopError"])}
    assert [n for n in classes if not reaches_base(n, classes)] == ["BadError", "LoopError"]


def test_missing_output_is_caught_where_a_params_error_is_but_not_the_other_way():
    with pytest.raises(ParamsError):
        raise MissingOutputError("reports/tables/bounds.csv: run `copydecode bounds`")
    assert not issubclass(ParamsError, MissingOutputError)
    for name in ("CorpusError", "ProgramError", "TokenizerError", "ParamsError", "RoundTripError",
                 "StaleInputError", "MissingOutputError"):
        assert issubclass(getattr(errors, name), CopyDecodeError), name
