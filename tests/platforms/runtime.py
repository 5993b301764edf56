"""A model of the confinement a grading platform puts around `labkit grade`, built from the
kernel's own primitives, for the platform tests (no container engine runs on the test machine).

    /usr/bin/python3 runtime.py SPEC.json -- COMMAND...

Run as root (with every capability), from `unshare --mount --pid --fork --uts --ipc --cgroup
--propagation private`, so this process is the new PID namespace's init. SPEC says which model:

- "docker": Docker's defaults (Gradescope's container, a Kubernetes pod without a
  securityContext): a root file system of its own (the host's /usr, /etc and the libraries
  read-only; `binds`, such as /autograder and the image's /opt, as given; /tmp, /run and /root
  private), /sys read-only with every cgroup hierarchy in it (Docker mounts cgroupfs
  read-only), a /proc of the new PID namespace, Docker's seccomp rules for namespaces, and root
  whose capability bounding set is cut to Docker's 14 (so, after exec, its permitted and
  effective sets too); no_new_privs stays unset, as in Docker.
- "restricted": a Kubernetes pod under the "restricted" Pod Security Standard: the same, then
  `runAsUser` (a uid that is not root), every capability dropped, no_new_privs set
  (`allowPrivilegeEscalation: false`), seccomp RuntimeDefault (the same namespace rules).
- SPEC's `refuse: ["landlock"]` adds a refusal of Landlock's system calls (ENOSYS), as a
  container runtime whose seccomp profile predates them.
- "runner": a GitHub Actions ubuntu-24.04 runner: the host's own file system (the VM), with
  /etc/passwd, /etc/group and /etc/sudoers replaced by the SPEC's (a `runner` user with
  passwordless sudo) and `binds` added over tmpfs mounts of `tmpfs` directories; the user's
  new user namespaces refused (`clone`/`unshare` with CLONE_NEWUSER fail, as AppArmor's
  `apparmor_restrict_unprivileged_userns` makes bubblewrap fail for an unprivileged user);
  the command runs as that user, with sudo available.

libseccomp's Python bindings are Debian's `python3-seccomp`, hence /usr/bin/python3. A model
that cannot be set up stops with a message naming what failed (exit 125).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import sys

import seccomp

LIBC = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT, SYS_MOUNT_SETATTR = 155, 442  # x86_64
AT_RECURSIVE, MOUNT_ATTR_RDONLY = 0x8000, 1
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x2000000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
NAMESPACE_FLAGS = (
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
)
LANDLOCK_SYSCALLS = (444, 445, 446)  # x86_64: create_ruleset, add_rule, restrict_self
# Docker's default capabilities, by number (linux/capability.h).
DOCKER_CAPABILITIES = {
    0: "CHOWN",
    1: "DAC_OVERRIDE",
    3: "FOWNER",
    4: "FSETID",
    5: "KILL",
    6: "SETGID",
    7: "SETUID",
    8: "SETPCAP",
    10: "NET_BIND_SERVICE",
    13: "NET_RAW",
    18: "SYS_CHROOT",
    27: "MKNOD",
    29: "AUDIT_WRITE",
    31: "SETFCAP",
}
# What a container's root file system takes from the host, read-only.
HOST_READ_ONLY = ("/usr", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


class SetupFailed(Exception):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SetupFailed(f"{what}: {os.strerror(code)}")


def mount(source: str, target: str, fstype: str = "", flags: int = 0, data: str = "") -> None:
    _check(
        LIBC.mount(
            source.encode(), target.encode(), fstype.encode() or None, flags, data.encode() or None
        ),
        f"mount {source} on {target}",
    )


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def read_only(path: str) -> None:
    """Every mount at and beneath `path` read-only (mount_setattr with AT_RECURSIVE)."""
    attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    result = LIBC.syscall(
        SYS_MOUNT_SETATTR,
        -100,
        path.encode(),
        AT_RECURSIVE,
        ctypes.byref(attr),
        ctypes.sizeof(attr),
    )
    _check(result, f"read-only {path}")


def bind(source: str, target: str, *, writable: bool = True) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()
    mount(source, target, flags=MS_BIND | MS_REC)
    if not writable:
        read_only(target)


def container_root(spec: dict) -> None:
    """A root file system of the container's own, then pivot_root into it."""
    new = spec["rootfs"]
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for path in HOST_READ_ONLY:
        if os.path.isdir(path):
            bind(path, new + path, writable=False)
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{new}/{name}")
        elif os.path.isdir(host):
            bind(host, f"{new}/{name}", writable=False)
    for private in ("/tmp", "/run", "/root", "/var/tmp", "/var/cache", "/var/log"):
        os.makedirs(new + private, exist_ok=True)
        mount("tmpfs", new + private, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    os.chmod(new + "/root", 0o700)
    os.makedirs(new + "/run/lock", exist_ok=True)
    os.makedirs(new + "/dev", exist_ok=True)
    mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID, "mode=755")
    for device in DEVICES:
        bind(f"/dev/{device}", f"{new}/dev/{device}")
    os.makedirs(new + "/dev/shm")
    mount("tmpfs", new + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    os.symlink("/proc/self/fd", new + "/dev/fd")
    # /sys with every cgroup hierarchy in it, read-only: Docker mounts cgroupfs read-only.
    bind("/sys", new + "/sys", writable=False)
    for target, source in spec.get("binds", {}).items():
        bind(source, new + target)
    os.makedirs(new + "/proc")
    mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV)
    os.makedirs(new + "/.old")
    os.chdir(new)
    _check(LIBC.syscall(SYS_PIVOT_ROOT, b".", b".old"), "pivot_root")
    _check(LIBC.umount2(b"/.old", MNT_DETACH), "umount the old root")
    os.rmdir("/.old")
    os.chdir("/")
    LIBC.sethostname(b"model", 5)


def runner_view(spec: dict) -> None:
    """The host's file system with the runner's accounts and sudoers over /etc's, and a /proc
    of the model's PID namespace (its processes' own numbers, as on the VM)."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV)
    for target, source in spec.get("files", {}).items():
        mount(source, target, flags=MS_BIND)
    for target in spec.get("tmpfs", []):
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for target, source in spec.get("binds", {}).items():
        bind(source, target)


def namespace_rules(refused: tuple[int, ...]) -> seccomp.SyscallFilter:
    """Docker's seccomp rules for namespaces, for the namespace flags `refused`: `unshare`
    and `clone` with such a flag fail with EPERM; `clone3` fails with ENOSYS (its flags are in
    memory a filter cannot read, so glibc falls back to `clone`)."""
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for flag in refused:
        for call in ("clone", "unshare"):
            arg = seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag)
            rules.add_rule(seccomp.ERRNO(errno.EPERM), call, arg)
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.set_attr(seccomp.Attr.CTL_NNP, 0)  # loaded with CAP_SYS_ADMIN, like Docker's
    return rules


def docker_rules() -> seccomp.SyscallFilter:
    rules = namespace_rules(NAMESPACE_FLAGS)
    for call in ("unshare", "setns", "mount", "umount2", "pivot_root"):
        rules.add_rule(seccomp.ERRNO(errno.EPERM), call)  # without CAP_SYS_ADMIN, as Docker's
    return rules


def cut_bounding_set(keep: set[int]) -> None:
    for cap in range(64):
        if cap in keep:
            continue
        if LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break
            raise SetupFailed(f"drop capability {cap}: {os.strerror(ctypes.get_errno())}")


def become(uid: int, gid: int, groups: list[int]) -> None:
    """Root to `uid` with no capability left (setuid clears them all)."""
    os.setgroups(groups)
    os.setgid(gid)
    os.setuid(uid)


def main() -> None:
    split = sys.argv.index("--")
    with open(sys.argv[1]) as file:
        spec = json.load(file)
    command = sys.argv[split + 1 :]
    model = spec["model"]
    try:
        if os.getpid() != 1:
            raise SetupFailed("not the init of a new PID namespace (run it under unshare)")
        mount("none", "/", flags=MS_REC | MS_PRIVATE)
        if model in ("docker", "restricted"):
            container_root(spec)
            rules = docker_rules()
        elif model == "runner":
            runner_view(spec)
            rules = namespace_rules((CLONE_NEWUSER,))
        else:
            raise SetupFailed(f"unknown model {model!r}")
        os.chdir(spec.get("cwd", "/"))
        if "landlock" in spec.get("refuse", []):
            # A container runtime whose profile predates Landlock (moby#43199): ENOSYS.
            for number in LANDLOCK_SYSCALLS:
                rules.add_rule(seccomp.ERRNO(errno.ENOSYS), number)
        rules.load()
        if model == "docker":
            cut_bounding_set(set(DOCKER_CAPABILITIES))
        elif model == "restricted":
            cut_bounding_set(set())
            _check(LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
            become(spec["uid"], spec["gid"], [spec["gid"]])
        else:
            become(spec["uid"], spec["gid"], [spec["gid"]])
    except (SetupFailed, OSError, RuntimeError, ValueError) as error:
        print(f"model {model}: could not be set up: {error}", file=sys.stderr)
        sys.exit(125)
    env = spec.get("env", {})
    # As pid 1, stay to reap orphans and pass the command's exit status on.
    pid = os.fork()
    if pid == 0:
        os.execvpe(command[0], command, env)
    while True:
        try:
            done, status = os.wait()
        except ChildProcessError:
            sys.exit(125)
        if done == pid:
            code = os.waitstatus_to_exitcode(status)
            sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
