"""The supported sglang releases: the installed one is among them, any other is refused naming
them, and the package's dependency range admits exactly them among the published releases."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from sglang_ddtree.compat import releases

ROOT = Path(__file__).resolve().parents[2]
# Every sglang release published from the first supported one to the last.
PUBLISHED = ("0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")


def test_the_installed_release_is_supported():
    import sglang

    assert releases.RELEASE == sglang.__version__
    assert releases.CURRENT is releases.TRAITS[releases.RELEASE]
    assert set(releases.TRAITS) == set(releases.SUPPORTED_RELEASES)
    assert releases.MEASURED_RELEASE in releases.SUPPORTED_RELEASES


@pytest.mark.parametrize("version", ["0.5.16", "0.5.22", "0.5.23.post1", "0.6.0"])
def test_another_release_is_refused_naming_the_supported_ones(version):
    with pytest.raises(releases.UnsupportedSglangRelease, match=r"supports sglang 0\.5\.17 or 0\.5\.23; "
                       rf"the installed sglang is {version}"):
        releases.check_release(version)
    assert issubclass(releases.UnsupportedSglangRelease, ImportError)


def test_the_dependency_range_admits_exactly_the_supported_releases():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (dep,) = [d for d in deps if d.startswith("sglang")]
    spec = SpecifierSet(dep[len("sglang"):])
    assert tuple(v for v in PUBLISHED if v in spec) == releases.SUPPORTED_RELEASES


def test_ddtree_server_args_are_a_record_of_the_releases_kind():
    import dataclasses

    from sglang_ddtree.server_args import DDTREE_FLAGS, DDTreeServerArgs

    names = {f.name for f in releases.record_fields(DDTreeServerArgs)}
    assert set(DDTREE_FLAGS) <= names
    assert dataclasses.is_dataclass(DDTreeServerArgs) == (releases.CURRENT.server_args_record == "dataclass")


def test_ddtree_is_refused_where_it_is_not_checked(monkeypatch):
    """Hard-coded: DDTREE serves on CUDA and CPU with 0.5.17 and on CPU only with 0.5.23 (no 0.5.23
    GPU host); elsewhere the flag is refused, naming the device and the release that serves it."""
    assert {v: t.ddtree_devices for v, t in releases.TRAITS.items()} == {"0.5.17": ("cuda", "cpu"),
                                                                        "0.5.23": ("cpu",)}
    monkeypatch.setattr(releases, "CURRENT", releases.TRAITS["0.5.17"])
    for device in ("cuda", "cuda:1", None, "cpu"):
        releases.check_ddtree_serves(device)
    monkeypatch.setattr(releases, "CURRENT", releases.TRAITS["0.5.23"])
    releases.check_ddtree_serves("cpu")
    for device in ("cuda", None):
        with pytest.raises(ValueError, match=r"--speculative-algorithm DDTREE is not served on cuda with sglang "
                                             r"0\.5\.23 yet.*Use sglang 0\.5\.17 for DDTREE on cuda"):
            releases.check_ddtree_serves(device)
