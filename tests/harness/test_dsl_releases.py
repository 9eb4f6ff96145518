"""harness/dsl.py: the nvidia-cutlass-dsl releases beside the venv's own (no install here: a fake tree and wheel)."""
from __future__ import annotations

import zipfile

import pytest

from harness import dsl


def test_the_matrix_is_every_43_patch_and_the_newest_of_each_later_minor():
    minors = {}
    for version in dsl.MATRIX:
        minors.setdefault(dsl.release_tuple(version)[:2], []).append(version)
    assert minors[(4, 3)] == [f"4.3.{p}" for p in range(6)]
    assert all(len(v) == 1 for minor, v in minors.items() if minor != (4, 3))
    assert list(minors) == sorted(minors) and (4, 8) in minors and dsl.DEFAULT == (dsl.OLDEST, dsl.LEADERBOARD_ERA)
    assert dsl.before("4.3.5", "4.5") and not dsl.before("4.6.3", "4.5") and not dsl.before("4.5.0", "4.5")


def _wheel(path, requires):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\n"
                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    return path


def test_install_follows_the_metapackages_own_family_without_extras(tmp_path):
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl", [
        "nvidia-cutlass-dsl-libs-base==4.8.1", "nvidia-cutlass-dsl-libs-cu13==4.8.1; extra == \"cu13\"",
        "numpy", "cuda-bindings>=12.8"])
    assert dsl.family_requirements(wheel) == ["nvidia-cutlass-dsl-libs-base"]


@pytest.mark.parametrize("folder", dsl.CODE_FOLDERS)
def test_the_path_names_whichever_code_folder_the_release_has(tmp_path, monkeypatch, folder):
    monkeypatch.setattr(dsl, "DSL_ROOT", tmp_path)
    (tmp_path / "4.4.2" / "nvidia_cutlass_dsl" / folder / "cutlass").mkdir(parents=True)
    (tmp_path / "4.4.2" / ".complete").write_text("4.4.2\n")
    assert dsl.is_installed("4.4.2")
    assert dsl.environment("4.4.2", {})["PYTHONPATH"] == \
        f"{tmp_path / '4.4.2'}:{tmp_path / '4.4.2' / 'nvidia_cutlass_dsl' / folder}"


def test_the_venvs_own_release_needs_no_path_and_a_missing_one_says_how(tmp_path, monkeypatch):
    monkeypatch.setattr(dsl, "DSL_ROOT", tmp_path)
    assert dsl.environment("default", {"A": "1"}) == {"A": "1"}
    assert dsl.environment(dsl.installed_version(), {"A": "1"}) == {"A": "1"}
    with pytest.raises(FileNotFoundError, match="bash tools/setup.sh --dsl 4.6.3"):
        dsl.environment("4.6.3", {})
