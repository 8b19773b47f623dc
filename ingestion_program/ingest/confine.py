"""Confinement the child installs on itself before any participant code is imported.

Landlock and seccomp need no privilege once no-new-privileges is set, so they work where the
worker drops every capability (Codabench) as well as where it keeps them (CodaLab v1). Both
are reached through ctypes: this file is copied into the child's runtime, whose environment is
the participant's, so it may use the standard library only.

``install(plan)`` returns one entry per protection: ``[name, True, detail]`` when installed,
``[name, False, reason]`` (errno name and system call) when not.
"""
import ctypes
import errno
import os
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RULE_PATH_BENEATH = 1, 1
# x86_64 and aarch64 share the Landlock numbers; the rest differ per architecture.
SYSCALLS = {
    "x86_64": {"arch": 0xC000003E, "socket": 41, "ptrace": 101, "process_vm_readv": 310,
               "process_vm_writev": 311, "kill": 62, "tkill": 200, "tgkill": 234,
               "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "memfd_create": 319,
               "shmget": 29, "msgget": 68, "setpgid": 109, "setsid": 112, "prctl": 157},
    "aarch64": {"arch": 0xC00000B7, "socket": 198, "ptrace": 117, "process_vm_readv": 270,
                "process_vm_writev": 271, "kill": 129, "tkill": 130, "tgkill": 131,
                "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "memfd_create": 279,
                "shmget": 194, "msgget": 186, "setpgid": 154, "setsid": 157, "prctl": 167},
}
for _table in SYSCALLS.values():
    _table.update(landlock_create_ruleset=444, landlock_add_rule=445, landlock_restrict_self=446,
                  io_uring_setup=425, io_uring_enter=426, io_uring_register=427, pidfd_open=434,
                  pidfd_send_signal=424, pidfd_getfd=438, memfd_secret=447)
NR = SYSCALLS.get(platform.machine(), {})

FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_TRUNCATE, FS_IOCTL_DEV = 1 << 14, 1 << 15
FS_ALL_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1}   # ABI 5+ adds IOCTL_DEV
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE
READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

SYSTEM_READ = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt",
               "/proc", "/sys", "/dev")
DEVICE_WRITE = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

LANDLOCK_FILES = ("Landlock files (writes only in its working folder and its own threads' names, "
                  "reads only system, Python, task)")
LANDLOCK_NET = "Landlock network (no TCP connect or bind)"
LANDLOCK_SCOPE = "Landlock scoping (no signals or abstract sockets outside its own processes)"
SECCOMP = ("seccomp (sockets only AF_UNIX; no ptrace, process_vm_*, io_uring, memfd or SysV "
           "shared memory, new sessions or process groups; no signals to the ingestion or its "
           "ancestors)")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Refused(Exception):
    """A system call failed; str() is 'call: ERRNO'."""

    def __init__(self, call, number):
        super().__init__(f"{call}: {errno.errorcode.get(number, number)}")


def _syscall(name, *args):
    if name not in NR:
        raise Refused(name, errno.ENOSYS)
    result = _libc.syscall(NR[name], *args)
    if result < 0:
        raise Refused(name, ctypes.get_errno())
    return result


def landlock_abi():
    """The kernel's Landlock ABI version; raises Refused when there is none."""
    return _syscall("landlock_create_ruleset", None, ctypes.c_size_t(0),
                    ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))


def no_new_privileges():
    if not hasattr(_libc, "prctl"):
        raise Refused("prctl", errno.ENOSYS)       # not Linux: a participant's own machine
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise Refused("prctl(PR_SET_NO_NEW_PRIVS)", ctypes.get_errno())


def _fs_rights(abi):
    return FS_ALL_BY_ABI.get(abi, (1 << 16) - 1) & ~FS_IOCTL_DEV    # ioctl: GPUs need it


def _ruleset(abi):
    """Creates the ruleset: every file right this ABI knows, TCP from 4, scoping from 6."""
    fields = [_fs_rights(abi)]
    if abi >= 4:
        fields.append(NET_BIND_TCP | NET_CONNECT_TCP)
    if abi >= 6:
        fields.append(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    attr = ctypes.create_string_buffer(struct.pack(f"<{len(fields)}Q", *fields))
    return _syscall("landlock_create_ruleset", attr, ctypes.c_size_t(len(attr.raw)),
                    ctypes.c_uint32(0))


def _allow(ruleset, path, rights, handled):
    rights &= handled                           # an older ABI refuses rights it does not know
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return                                  # absent: nothing to allow
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        attr = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd))
        _syscall("landlock_add_rule", ctypes.c_int(ruleset),
                 ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), attr, ctypes.c_uint32(0))
    finally:
        os.close(fd)


def _covers(folder, path):
    folder = folder.rstrip("/") + "/"
    return (path.rstrip("/") + "/").startswith(folder)


def readable_paths(plan):
    """System folders, this interpreter's prefixes and import path, the task's own files;
    any candidate that contains a forbidden folder (hidden data, output...) is dropped."""
    candidates = list(SYSTEM_READ) + [sys.prefix, sys.base_prefix, sys.exec_prefix,
                                      sys.base_exec_prefix] + [p for p in sys.path if p]
    candidates = [os.path.realpath(p) for p in candidates] + list(plan["read"])
    forbidden = [os.path.realpath(p) for p in plan["forbidden"]]
    return sorted({p for p in candidates
                   if not any(_covers(p, os.path.realpath(f)) for f in forbidden)})


def _device_paths():
    extra = [os.path.join("/dev", name) for name in _listdir("/dev") if name.startswith("nvidia")]
    return list(DEVICE_WRITE) + extra + [os.path.join("/dev/dri", n) for n in _listdir("/dev/dri")]


def _listdir(folder):
    try:
        return os.listdir(folder)
    except OSError:
        return []


def install_landlock(plan):
    """Returns the ABI installed; the caller has set no-new-privileges. ``abi_at_most`` in
    the plan pretends to an older kernel (tests of the masking)."""
    abi = min(landlock_abi(), plan.get("abi_at_most", 1 << 30))
    ruleset = _ruleset(abi)
    try:
        rights = _fs_rights(abi)
        for path in readable_paths(plan):
            _allow(ruleset, path, READ, rights)
        for path in _device_paths():
            _allow(ruleset, path, READ | FS_WRITE_FILE | FS_TRUNCATE, rights)
        # CUDA names each thread it starts by writing /proc/self/task/<tid>/comm, and its
        # initialisation fails (error 304) when it cannot; only this process's own threads,
        # never a process it starts: a path rule cannot follow a pid not yet made.
        _allow(ruleset, f"/proc/{os.getpid()}/task", READ | FS_WRITE_FILE | FS_TRUNCATE, rights)
        for path in plan["write"]:
            _allow(ruleset, path, rights, rights)
        _syscall("landlock_restrict_self", ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return abi


def _ancestors():
    """Pids and process groups of this process's ancestors (the ingestion first), init included:
    a container's init only ignores the signals it has no handler for."""
    pids, pid = [], os.getppid()
    while pid > 0 and len(pids) < 64:
        pids.append(pid)
        if pid == 1:
            break
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            break
        pid = int(fields[1])
        pids.append(-int(fields[2]))
    return sorted({p & 0xFFFFFFFF for p in pids + [-1] if p != 0})   # 0: its own group


class _Program:
    """A tiny BPF assembler: jumps name labels, resolved when the program is built."""

    LD_W_ABS, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06

    def __init__(self):
        self.code, self.labels = [], {}

    def label(self, name):
        self.labels[name] = len(self.code)

    def load(self, offset):
        self.code.append((self.LD_W_ABS, None, None, offset))

    def jump(self, op, value, if_true, if_false=None):
        self.code.append((op, if_true, if_false, value))

    def ret(self, value):
        self.code.append((self.RET_K, None, None, value))

    def build(self):
        out = []
        for index, (op, jt, jf, k) in enumerate(self.code):
            offset = lambda name: 0 if name is None else self.labels[name] - index - 1  # noqa: E731
            out.append(struct.pack("<HBBI", op, offset(jt), offset(jf), k))
        return b"".join(out)


ALLOW, ERRNO = 0x7FFF0000, 0x00050000
PR_SET_DUMPABLE = 4
# pidfd_send_signal: a /proc/<pid> folder is a pidfd too, so its target cannot be checked here.
# setsid, setpgid: every process of the task stays in its group, so that one killpg reaches
# them all at once; a fork bomb outside it would have to be chased through /proc.
DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
          "io_uring_register", "pidfd_send_signal", "pidfd_getfd", "setsid", "setpgid")
# Memory that belongs to no process, so neither memory rule sees it (a memfd filled by
# write(), a SysV segment or queue, which outlive the task too). ENOSYS, as from a kernel
# built without them: code that can do without (libffi, glibc, Mesa...) checks for ENOSYS
# and falls back to files, which the disk limit counts; EPERM would make most of it fail.
ABSENT = ("memfd_create", "memfd_secret", "shmget", "msgget")
SIGNALLING = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open")


def seccomp_program(protected):
    """Other architectures and x32 calls are refused; socket() only for AF_UNIX; the listed
    calls refused; signals (and pidfds) refused when aimed at a protected pid or group."""
    p = _Program()
    p.load(4)
    p.jump(p.JEQ_K, NR["arch"], None, "deny")
    p.load(0)
    p.jump(p.JGE_K, 0x40000000, "deny")
    p.jump(p.JEQ_K, NR["socket"], "socket")
    p.jump(p.JEQ_K, NR["prctl"], "prctl")
    for name in DENIED:
        p.jump(p.JEQ_K, NR[name], "deny")
    for name in ABSENT:
        p.jump(p.JEQ_K, NR[name], "absent")
    for name in SIGNALLING:
        p.jump(p.JEQ_K, NR[name], "signal")
    p.ret(ALLOW)
    p.label("socket")
    p.load(16)                     # low 32 bits of the first argument (little-endian)
    p.jump(p.JEQ_K, 1, "allow")    # AF_UNIX
    p.ret(ERRNO | errno.EACCES)
    p.label("prctl")
    # Not dumpable, its /proc/<pid>/fd would be closed to a supervisor without capabilities,
    # which counts the deleted files held open there against the disk limit.
    p.load(16)
    p.jump(p.JEQ_K, PR_SET_DUMPABLE, "deny", "allow")
    p.label("absent")
    p.ret(ERRNO | errno.ENOSYS)
    p.label("signal")
    p.load(16)
    for value in protected:
        p.jump(p.JEQ_K, value, "deny")
    p.label("allow")
    p.ret(ALLOW)
    p.label("deny")
    p.ret(ERRNO | errno.EPERM)
    return p.build()


def install_seccomp(protected=None):
    if "arch" not in NR:
        raise Refused(f"seccomp on {platform.machine()}", errno.ENOSYS)
    code = seccomp_program(_ancestors() if protected is None else protected)
    filters = ctypes.create_string_buffer(code)
    fprog = ctypes.create_string_buffer(struct.pack("@HP", len(code) // 8,
                                                    ctypes.addressof(filters)))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0) != 0:
        raise Refused("prctl(PR_SET_SECCOMP)", ctypes.get_errno())


def _still_open(plan):
    """A forbidden folder this process can still open, asking the kernel itself; None when
    every one is refused, as a Landlock domain in force refuses them."""
    for path in plan["forbidden"]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        os.close(fd)
        return path
    return None


def _landlock_entries(plan):
    try:
        abi = install_landlock(plan)
    except Refused as error:
        return [[name, False, str(error)] for name in (LANDLOCK_FILES, LANDLOCK_NET, LANDLOCK_SCOPE)]
    opened = _still_open(plan)
    if opened is not None:
        why = f"the kernel still lets this process open {opened}"
        return [[name, False, why] for name in (LANDLOCK_FILES, LANDLOCK_NET, LANDLOCK_SCOPE)]

    def entry(name, needed):
        return [name, abi >= needed,
                f"ABI {abi}" if abi >= needed else f"kernel Landlock ABI {abi}, needs {needed}"]
    return [entry(LANDLOCK_FILES, 1), entry(LANDLOCK_NET, 4), entry(LANDLOCK_SCOPE, 6)]


def install(plan):
    """Everything this process can install on itself; never raises for a refusal."""
    disabled = set(plan.get("disable", ()))
    protected = _ancestors()          # read before Landlock narrows what /proc shows
    try:
        no_new_privileges()
    except Refused as error:
        names = (LANDLOCK_FILES, LANDLOCK_NET, LANDLOCK_SCOPE, SECCOMP)
        return [[name, False, str(error)] for name in names]
    if "landlock" in disabled:
        entries = [[n, False, "disabled for this run"] for n in (LANDLOCK_FILES, LANDLOCK_NET,
                                                               LANDLOCK_SCOPE)]
    else:
        entries = _landlock_entries(plan)
    if "seccomp" in disabled:
        return entries + [[SECCOMP, False, "disabled for this run"]]
    try:
        install_seccomp(protected)
        entries.append([SECCOMP, True, "filter installed"])
    except Refused as error:
        entries.append([SECCOMP, False, str(error)])
    return entries
