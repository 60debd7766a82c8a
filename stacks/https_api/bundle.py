"""A Lambda code asset made of chosen modules of this repository, copied at synth (no Docker, no pip).

The System One API's functions run `semif_decision_client`'s front and `semif_adapter.doors.api_keys` (pure Python on
the standard library and boto3, which the Lambda runtime has): the bundle holds those modules and the handler entry
points, nothing else. It is CDK's local bundling, so the asset's hash is the hash of exactly these files.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_


@jsii.implements(ILocalBundling)
class CopyFiles:
    """Local bundling that copies `files` (path in the bundle -> source file) into the asset."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        missing = sorted(str(source) for source in files.values() if not source.is_file())
        if missing:
            raise FileNotFoundError(f"Lambda bundle: missing {', '.join(missing)}")
        self.files = dict(files)

    def try_bundle(self, output_dir: str, *_options: Any, **_keywords: Any) -> bool:
        for relative, source in sorted(self.files.items()):
            target = Path(output_dir) / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        return True


def module_files(package_dir: Path, package: str, modules: tuple[str, ...]) -> dict[str, Path]:
    """`package/<module>.py` for each module (`sub/name` inside a subpackage), with the `__init__.py` of every
    package on the way, from where it is installed."""
    inits = {"/".join([*name.split("/")[:depth], "__init__"]) for name in modules
             for depth in range(name.count("/") + 1)}
    return {f"{package}/{name}.py": package_dir / f"{name}.py" for name in sorted(inits | set(modules))}


def bundled_code(source_dir: Path, files: Mapping[str, Path]) -> lambda_.Code:
    """Lambda code of exactly `files`; `source_dir` only anchors the asset (its files are not copied)."""
    return lambda_.Code.from_asset(
        str(source_dir), asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(image=DockerImage.from_registry("unused-local-bundling"), local=CopyFiles(files)))
