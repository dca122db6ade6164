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
import errno
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


class OutputNotWritten(UserError):
    """The system refused a write (a read-only folder or mount, a full disk, a path through a file);
    the message names the path, the cause and the fix, and nothing half-written was left."""


#: errno -> the fix a message gives for it.
_WRITE_FIXES = {
    errno.ENOSPC: "free space on that disk, or choose an --out on another disk",
    errno.EDQUOT: "free space within your disk quota, or choose another folder",
    errno.EROFS: "the file system there is mounted read-only: choose a folder on a writable disk",
    errno.EACCES: "you may not write there: choose a folder you can write to (or fix its permissions)",
    errno.EPERM: "you may not write there: choose a folder you can write to (or fix its permissions)",
    errno.ENOTDIR: "a part of that path is a file, not a folder: choose another path",
    errno.EFBIG: "the file would exceed the size limit of this process or file system (ulimit -f)",
}


def not_written(path: str | os.PathLike, error: OSError, option: str = "--output") -> OutputNotWritten:
    """The :class:`OutputNotWritten` of an ``OSError`` raised while writing ``path``: the path, the cause
    (``strerror`` and the file the system named) and the fix."""
    cause = error.strerror or str(error)
    named = Path(str(error.filename)) if error.filename else None
    # the file the system named, unless it is the output itself or one of this module's hidden temporary names
    where = f" ({named})" if named and named != Path(path) and not named.name.startswith(".") else ""
    fix = _WRITE_FIXES.get(error.errno, f"check that {option} names a folder you can write to, with free space")
    return OutputNotWritten(
        f"{option} {path}: cannot write there: {cause}{where}. Nothing was written (any partial file was removed); "
        f"{fix}, then run the command again."
    )


def refuse_path_through_a_file(path: str | os.PathLike, option: str = "--output") -> None:
    """An :class:`OutputNotWritten` where a folder above ``path`` is a file (a folder cannot be made there)."""
    for parent in Path(path).absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise not_written(path, OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(parent)), option)
            return


def make_shareable(folder: Path) -> None:
    """Give a folder made by :func:`tempfile.mkdtemp` (mode 0700, private) the mode a plain ``mkdir``
    would give it (0777 less the umask), before it is renamed into the place the user named."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(folder, 0o777 & ~umask)


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
    except BaseException as error:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(error, OSError) and _names_a_path_in(error, (tmp, output)):
            raise not_written(output, error, option) from None
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
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}-new-", dir=output.parent))
        make_shareable(tmp)  # mkdtemp's 0700 would become the output folder's mode
    except OSError as error:
        raise not_written(output, error, option) from None
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
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, OSError) and _names_a_path_in(error, (tmp, output)):
            raise not_written(output, error, option) from None
        raise


#: The errors of a write to an open file (no file named): a full disk or quota, a file too large, a
#: read-only or failing device.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def _names_a_path_in(error: OSError, folders: Iterable[Path]) -> bool:
    """Whether the file an ``OSError`` names is one of ``folders`` or lies in one (a write of the
    output, not e.g. an input that could not be read); one that names no file, where its error is one
    of a write (:data:`_WRITE_ERRNOS`: a full disk)."""
    if not error.filename:  # a write or close of an open file: the system names no file
        return error.errno in _WRITE_ERRNOS
    path = Path(os.path.abspath(error.filename))
    return any(path == Path(os.path.abspath(f)) or Path(os.path.abspath(f)) in path.parents for f in folders)
