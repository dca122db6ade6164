"""Where a command may write, and how: ``--force`` replaces what the command wrote before, never what is there.

Every ``lm-eval-pdd`` command that writes goes through this module:

- :func:`refuse_unsafe_output`: an output that is, or holds, one of the command's inputs is refused
  (writing it would replace what the command is reading); a folder the command replaces as a whole
  is also refused if it is, or holds, the current folder or the home folder, or lies inside an input.
- :func:`write_file`: a file is written to a temporary sibling and renamed into place, so an
  interrupted command leaves the old file (or none), never half a file; an existing file is
  replaced only with ``--force``.
- :func:`replace_folder`: a folder is built in a temporary sibling and swapped in. The folder records
  the files it wrote (:data:`OWNED_FILES`); ``--force`` replaces a folder only if every file in it is
  one this command recorded, so a user's file in it is never deleted.

Each refusal is an :class:`OutputRefused` (a :class:`~pdd_tasks.errors.UserError`) naming the problem
and the fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pdd_tasks.errors import UserError


#: The file in an output folder that lists the files the command wrote there (relative paths).
OWNED_FILES = ".lm-eval-pdd-files.json"


class OutputRefused(UserError):
    """An output path that would replace a user's file, an input, or a folder the user is in."""


def _resolved(path: str | os.PathLike) -> Path:
    return Path(path).expanduser().resolve()


def _existing_paths(inputs: Iterable[str | os.PathLike | None]) -> list[tuple[str, Path]]:
    """The inputs that name files or folders on this machine (a hub id such as ``gpt2`` names none)."""
    found = []
    for item in inputs:
        if item is None or str(item) in ("", "hub"):
            continue
        path = Path(item).expanduser()
        if path.exists():
            found.append((str(item), path.resolve()))
    return found


def refuse_unsafe_output(
    output: str | os.PathLike,
    inputs: Iterable[str | os.PathLike | None] = (),
    *,
    option: str = "--output",
    replaces_folder: bool = False,
) -> Path:
    """Check that writing ``output`` cannot destroy an input or a folder the user is in; return it resolved.

    Args:
        output: the path given to the command.
        inputs: every file or folder the command reads (paths that do not exist are ignored).
        option: the option's name, for the message.
        replaces_folder: the command replaces ``output`` as a whole folder (make-controlled,
            make-ordered): then ``output`` must also not be, or hold, the current or the home folder,
            nor lie inside an input.

    Raises:
        OutputRefused: naming the conflict and the fix.
    """
    out = _resolved(output)
    fix = f"Choose another {option} (a path that names nothing you want to keep)."
    if replaces_folder:
        places = [(_resolved(Path.cwd()), "the current folder"), (_resolved(Path.home()), "your home folder")]
        what = next((name for place, name in places if out == place), None) or next(
            (f"a folder that holds {name} ({place})" for place, name in places if out in place.parents), None
        )
        if what:
            raise OutputRefused(
                f"{option} {output} is {what}; the command writes a whole folder there and, with --force, "
                f"replaces it. {fix}"
            )
    for given, path in _existing_paths(inputs):
        if out == path:
            raise OutputRefused(
                f"{option} {output} is also one of the inputs of this command ({given}); writing it would replace it. {fix}"
            )
        if out in path.parents:
            raise OutputRefused(
                f"{option} {output} holds an input of this command ({given}); writing it would replace that input. {fix}"
            )
        if replaces_folder and path in out.parents:
            raise OutputRefused(f"{option} {output} lies inside an input of this command ({given}). {fix}")
    return out


def write_file(
    output: str | os.PathLike,
    write: Callable[[Path], None],
    *,
    force: bool,
    inputs: Iterable[str | os.PathLike | None] = (),
    option: str = "--output",
) -> Path:
    """Write one file: checks, then ``write(temporary sibling)``, then a rename into place.

    Raises:
        OutputRefused: ``output`` is an input, a folder, in a missing folder, or exists without ``force``.
    """
    check_output_file(output, force=force, inputs=inputs, option=option)
    output = Path(output)
    tmp = output.with_name(f".{output.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, output)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return output


def check_output_file(
    output: str | os.PathLike,
    *,
    force: bool,
    inputs: Iterable[str | os.PathLike | None] = (),
    option: str = "--output",
    missing_folder_ok: bool = False,
) -> None:
    """The checks of :func:`write_file`, for a command that checks before long work and writes after
    (``missing_folder_ok``: the command creates the file's folder, as build-table does)."""
    refuse_unsafe_output(output, inputs, option=option)
    output = Path(output)
    if output.is_dir():
        raise OutputRefused(f"{option} {output} is a folder; give a file name in it, e.g. {output / 'out.jsonl'}.")
    if not missing_folder_ok and not output.parent.is_dir():
        raise OutputRefused(f"{option} {output}: the folder {output.parent} does not exist; create it first.")
    if output.exists() and not force:
        raise OutputRefused(
            f"{option} {output} already exists; pass --force to replace it, or choose another {option}."
        )


def _files_under(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if not path.is_dir()}


def _owned(folder: Path) -> set[str]:
    record = folder / OWNED_FILES
    if not record.is_file():
        return set()
    try:
        return set(json.loads(record.read_text(encoding="utf-8"))["files"])
    except (ValueError, KeyError, TypeError):
        return set()


def check_output_folder(
    output: str | os.PathLike,
    *,
    force: bool,
    command: str,
    inputs: Iterable[str | os.PathLike | None] = (),
    option: str = "--output",
) -> Path:
    """Check, before any long work, that ``output`` may be written as a whole folder by ``command``.

    A missing or empty folder may be written; a folder this command wrote before (every file in it
    recorded in :data:`OWNED_FILES`) may be replaced with ``force``; anything else is refused.
    """
    refuse_unsafe_output(output, inputs, option=option, replaces_folder=True)
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise OutputRefused(f"{option} {output} is a file, not a folder; choose a folder to write.")
    present = _files_under(output) if output.is_dir() else set()
    if not present:
        return output
    shown = ", ".join(sorted(present)[:5]) + (", ..." if len(present) > 5 else "")
    if not force:
        raise OutputRefused(
            f"{option} {output} already exists and holds {len(present)} entries ({shown}). Choose another {option}, "
            f"or pass --force to replace what lm-eval-pdd {command} wrote there before."
        )
    foreign = sorted(present - _owned(output) - {OWNED_FILES})
    if foreign:
        listed = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise OutputRefused(
            f"{option} {output} holds {len(foreign)} files that lm-eval-pdd {command} did not write ({listed}); "
            f"--force replaces only a folder this command wrote. Move those files away, or choose another {option}."
        )
    return output


@contextlib.contextmanager
def replace_folder(
    output: str | os.PathLike,
    *,
    force: bool,
    command: str,
    inputs: Iterable[str | os.PathLike | None] = (),
    option: str = "--output",
) -> Iterator[Path]:
    """Build a folder in a temporary sibling (yielded) and swap it in for ``output`` when the block ends.

    The checks of :func:`check_output_folder` run on entry and again just before the swap. On an
    exception the temporary folder is removed and ``output`` is left as it was.
    """
    output = check_output_folder(output, force=force, command=command, inputs=inputs, option=option)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}-new-", dir=output.parent))
    try:
        yield tmp
        record = {"command": f"lm-eval-pdd {command}", "files": sorted(_files_under(tmp))}
        (tmp / OWNED_FILES).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        check_output_folder(output, force=force, command=command, inputs=inputs, option=option)
        if not output.exists():
            os.replace(tmp, output)
            return
        old = Path(tempfile.mkdtemp(prefix=f".{output.name}-old-", dir=output.parent))
        os.replace(output, old / "previous")
        try:
            os.replace(tmp, output)
        except BaseException:
            os.replace(old / "previous", output)
            raise
        shutil.rmtree(old)  # holds only the files this command recorded (checked above)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
