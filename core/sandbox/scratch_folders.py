"""The run's writable folders (/tmp and /dev/shm under bwrap, the local backend's own folders):
made new after every run, so that nothing one run wrote reaches the next.

What it guarantees: under bwrap (``fresh_mounts``), the folders are unmounted and fresh tmpfs
mounts take their place, so contents, names, times, modes and extended attributes are all gone;
read-only folders that sat inside come back from their stash; the Landlock ruleset is rebuilt on
the new folders; SysV IPC objects and keyring keys a run made are removed. The local backend can
only empty its folders (and says so: ``fresh_scratch`` is False). Standard library only, the mounts
through the ``_editforge_sys`` C module (native.py).
"""

from __future__ import annotations

import os
import types

MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_RDONLY, MNT_DETACH = (
    2,
    4,
    8,
    32,
    4096,
    16384,
    1,
    2,
)
CLONE_NEWNS = 0x00020000
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5


class ScratchFolders:
    """The writable folders of one server, their mounts and the Landlock ruleset built on them."""

    def __init__(self, config: dict, native, confine) -> None:
        self.native, self.confine = native, confine
        self.work_dir = config["work_dir"]
        self.folders = {path: os.stat(path).st_mode & 0o7777 for path in config["scratch_dirs"]}
        self.keep = frozenset(config.get("keep_paths", ()))
        # bwrap: /tmp and /dev/shm are tmpfs mounts of our own, replaced after every run
        self.fresh = config.get("fresh_mounts")
        self.mounted = False
        self.paths = (config.get("read", ()), config.get("write", ()))
        self.ruleset: int | None = None

    def start(self) -> None:
        """The first folders, in a mount namespace of our own (bwrap), so that our mounts can be replaced."""
        if self.fresh:
            self.native.unshare(CLONE_NEWNS)
        self.renew()

    def after_run(self, own_ipc: bool, filtered: bool) -> None:
        """Make everything a finished run could leave for the next one new (raises OSError where it
        cannot: a folder the run made undeletable)."""
        self.renew()
        if own_ipc and self.native.ipc_in_use():
            _remove_sysv_ipc(self.native)
        if not filtered:  # with the seccomp filter, no run can add a key
            for keyring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
                succeeds(self.native.keyring_clear, keyring)

    def renew(self) -> None:
        """Make /tmp and /dev/shm new for the next run. bwrap: unmount them and mount fresh tmpfs
        folders, so that nothing a run wrote survives it, not even names, times, modes or extended
        attributes of the folders themselves; the read-only binds that sat inside come back from their
        stash, and the Landlock ruleset is rebuilt on the new folders. Local backend: empty them."""
        if not self.fresh:
            self._empty()
            if self.ruleset is None:
                self.ruleset = self.confine.build_ruleset(*self.paths)
            return
        options = f"size={self.fresh['size']},mode=1777"
        for path in self.folders:
            if self.mounted:
                self.native.umount2(path, MNT_DETACH)
            self.native.mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)
        self.mounted = True
        for stash, target in self.fresh["keep"]:
            os.makedirs(target, exist_ok=True)
            self.native.mount(stash, target, None, MS_BIND | MS_REC, None)
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
            self.native.mount(None, target, None, flags, None)
        os.makedirs(self.work_dir, exist_ok=True)
        if self.ruleset is not None:
            os.close(self.ruleset)
        # the system folders' descriptors are opened once; the new mounts' afresh
        self.ruleset = self.confine.build_ruleset(*self.paths, renewed=(*self.folders, self.work_dir))

    def _empty(self) -> None:
        for path, mode in self.folders.items():
            os.chmod(path, mode)
            for name in os.listxattr(path):  # a run's extended attributes would reach the next one
                os.removexattr(path, name)
            empty_dir(path, self.keep)
        os.makedirs(self.work_dir, exist_ok=True)

    def no_exec(self) -> None:
        """Python runs may not map a file of the scratch folders as code (a C extension the program
        compiled would run under strict mode unchecked); the next run's new mounts allow it again."""
        if self.fresh:
            flags = MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC
            for path in self.folders:
                self.native.mount(None, path, None, flags, f"size={self.fresh['size']},mode=1777")

    def stdin(self, text: str | None) -> int:
        """A descriptor for the child's stdin: /dev/null (immediate EOF) or an unlinked file."""
        if text is None:
            return os.open(os.devnull, os.O_RDONLY)
        path = os.path.join(next(iter(self.folders)), ".stdin")
        write_file(path, text)
        fd = os.open(path, os.O_RDONLY)
        os.unlink(path)
        return fd


def _remove_sysv_ipc(native: types.ModuleType) -> None:
    """Remove every SysV shared-memory segment, semaphore set and message queue in our namespace."""
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in f.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        for ipc_id in ids:
            succeeds(native.ipc_remove, kind, ipc_id)


def succeeds(call, *args) -> bool:
    """Whether a system call of the native module succeeded (False where it raised OSError)."""
    try:
        call(*args)
    except OSError:
        return False
    return True


def inside(root: str, name: str) -> str:
    path = os.path.normpath(os.path.join(root, name))
    if os.path.isabs(name) or not path.startswith(root + os.sep):
        raise ValueError(f"file name {name!r} leaves the work folder")
    return path


def write_file(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)


def empty_dir(path: str, keep: frozenset[str] = frozenset()) -> None:
    """Delete everything inside ``path``, including folders the program made unreadable or nested
    thousands deep (iteratively: no recursion limit), except the read-only binds in ``keep``
    (and the folders that lead to them)."""
    pending, emptied = [path], []
    while pending:
        folder = pending.pop()
        emptied.append(folder)
        with os.scandir(folder) as entries:
            for entry in list(entries):
                if entry.path in keep:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    os.chmod(entry.path, 0o700)
                    pending.append(entry.path)
                else:
                    os.unlink(entry.path)
    for folder in reversed(emptied[1:]):  # deepest first
        if not any(k.startswith(folder + "/") for k in keep):
            os.rmdir(folder)
