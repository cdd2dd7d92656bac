"""A workload file, or a stack file and the files it names, as they were at a git commit: the base of
`inferstack diff --base-ref`, read with `git show` (a model's config.json, a stack's workload file, calibration file
and pin at the same commit, never from the working tree)."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from inferstack.clouds import Cloud
from inferstack.documents import parse_document
from inferstack.errors import input_error
from inferstack.pin import pinned_path
from inferstack.plan import PlanReport
from inferstack.sizing.calibration import (
    STACK_CALIBRATION_KEY,
    StackCalibration,
    check_stack_calibration_file,
    stack_calibration,
)
from inferstack.spec import ModelSpec
from inferstack.stack_file import is_stack_file, project_dir_of, spec_from_text


@dataclass(frozen=True)
class WorkloadAtRef:
    """A workload file as it was at a git commit (text None: the file did not exist there)."""

    repo: Path
    ref: str
    path: Path  # the working-tree path of the file
    relative: str  # its path from the repository root, as git names it
    text: str | None

    @property
    def source(self) -> str:
        return f"{self.ref}:{self.relative}"

    def plan(self, clouds: list[Cloud] | None, prices_file: Path | None,
             measured: StackCalibration | None = None) -> PlanReport:
        """Plan the file as it was. A `model.config` file is read at the same commit, not from the worktree;
        `measured` is the stack's calibration at the commit (`calibration`)."""
        from inferstack.sizing.planner import plan_workload

        assert self.text is not None
        spec = spec_from_text(self.text, self.path, self.source, read=self._text_at_ref)
        config = spec.model.config if isinstance(spec.model, ModelSpec) else None
        calibration = measured.calibration if measured else None
        if config is None:
            return plan_workload(spec, clouds=clouds, prices_file=prices_file, calibration=calibration)
        with tempfile.TemporaryDirectory(prefix="inferstack-diff-") as scratch:
            copy = Path(scratch) / config.name
            copy.write_bytes(self._config_bytes(config))
            as_of_ref = spec.model_copy(update={"model": spec.model.model_copy(update={"config": copy})})  # type: ignore[union-attr]
            report = plan_workload(as_of_ref, clouds=clouds, prices_file=prices_file, calibration=calibration)
        return report.model_copy(update={"workload": spec})  # the spec as written, paths as in the worktree

    def calibration(self) -> StackCalibration | None:
        """A stack file's calibration file (inferstack:calibrationFile) as it was at the ref, None when none."""
        assert self.text is not None
        if not is_stack_file(self.path):
            return None
        data = parse_document(self.text, suffix=self.path.suffix, source=self.source)
        config = data.get("config") if isinstance(data, dict) else None
        value = config.get(STACK_CALIBRATION_KEY) if isinstance(config, dict) else None
        if value is None:
            return None
        relative = check_stack_calibration_file(value)
        in_repo = (project_dir_of(self.path) / relative).relative_to(self.repo).as_posix()
        content = _git_show(self.repo, self.ref, in_repo)
        if content is None:
            raise input_error(STACK_CALIBRATION_KEY, f"does not exist at {self.ref}", value=relative,
                              fix="commit the calibration file with the stack file that names it")
        return stack_calibration(relative, content)

    def pin_text(self) -> str | None:
        """The stack file's pin as it was at the ref (None: not a stack file, or no pin there)."""
        if not is_stack_file(self.path):
            return None
        pinned = Path(self.relative).with_name(pinned_path(self.path).name).as_posix()
        content = _git_show(self.repo, self.ref, pinned)
        return None if content is None else content.decode("utf-8")

    def _text_at_ref(self, path: Path) -> str:
        """A project file the stack names (its workload file), as it was at the ref."""
        relative = path.resolve().relative_to(self.repo).as_posix()
        content = _git_show(self.repo, self.ref, relative)
        if content is None:
            raise input_error("inferstack:workloadFile", f"does not exist at {self.ref}", value=relative,
                              fix="commit the workload file with the stack file that names it")
        return content.decode("utf-8")

    def _config_bytes(self, config: Path) -> bytes:
        try:
            relative = config.resolve().relative_to(self.repo).as_posix()
        except ValueError:
            return config.read_bytes()  # outside the repository: not versioned with the workload
        content = _git_show(self.repo, self.ref, relative)
        if content is None:
            raise input_error(
                "model.config",
                f"does not exist at {self.ref}",
                value=relative,
                fix="commit the config file with the workload, or give the model by registry name",
            )
        return content


def workload_at_ref(ref: str, path: Path) -> WorkloadAtRef:
    if ref.startswith("-"):
        raise input_error("--base-ref", "is not a git revision", value=ref, fix="give a branch, tag or commit")
    repo = _repository_root(path)
    if _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode != 0:
        raise input_error(
            "--base-ref",
            "is not a commit in this repository",
            value=ref,
            fix="use a branch, tag or commit that exists locally (git fetch origin <branch> first; in GitHub "
            "Actions check out with fetch-depth: 0 and use origin/<base branch>)",
        )
    try:
        relative = path.resolve().relative_to(repo).as_posix()
    except ValueError:
        raise input_error(
            "WORKLOAD",
            f"is outside the git repository at {repo}",
            value=str(path),
            fix="give a workload file inside the repository",
        ) from None
    content = _git_show(repo, ref, relative)
    return WorkloadAtRef(repo, ref, path, relative, None if content is None else content.decode("utf-8"))


def _repository_root(path: Path) -> Path:
    result = _git(path.resolve().parent, "rev-parse", "--show-toplevel")
    if result.returncode != 0:
        raise input_error(
            "--base-ref",
            "needs the workload file to be in a git repository",
            value=str(path),
            fix="run it in a git checkout, or compare two files: inferstack diff BASE.yaml HEAD.yaml",
        )
    return Path(result.stdout.decode().strip()).resolve()


def _git_show(repo: Path, ref: str, relative: str) -> bytes | None:
    """The file's content at `ref`, or None when it does not exist there."""
    if _git(repo, "cat-file", "-e", f"{ref}:{relative}").returncode != 0:
        return None
    result = _git(repo, "show", f"{ref}:{relative}")
    if result.returncode != 0:
        raise input_error("--base-ref", f"git show failed: {result.stderr.decode().strip()}", value=ref)
    return result.stdout


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False, timeout=60)
    except FileNotFoundError:
        raise input_error(
            "--base-ref", "needs git, which is not installed", fix="install git, or compare two files instead"
        ) from None


