#!/usr/bin/python3
"""A stand-in for `systemctl` inside the test chroot, where systemd is not PID 1.

It starts units the way systemd would, from the unit files themselves: a clean environment (PATH, LANG) plus
Environment= and every EnvironmentFile= (read again before each command, so a file an ExecStartPre= writes
reaches ExecStart=; a "-" path may be missing), ExecStartPre= commands in order, then ExecStart=, as User=/Group=
in WorkingDirectory= (a "+" command runs as root, a "-" command may fail); `${NAME}` words are replaced by the
variable's value. stdout and stderr go to /var/log/fake-journal/<unit>.log (the journal's stand-in).
Type=oneshot runs to completion (unless --no-block); Type=exec leaves the main process running, its
process-group id in /run/fake-systemd/<unit>.pid.
Supported: daemon-reload, enable, is-enabled, mask, start [--no-block], stop, restart, is-active [--quiet].
Not emulated: Restart=, dependencies, resource limits, sandboxing (ProtectSystem= and the like).
"""

from __future__ import annotations

import grp
import itertools
import os
import pwd
import re
import shlex
import signal
import subprocess
import sys
import time

UNIT_DIR = "/etc/systemd/system"
STATE_DIR = "/run/fake-systemd"
JOURNAL_DIR = "/var/log/fake-journal"


def parse_unit(name: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    with open(os.path.join(UNIT_DIR, name)) as handle:
        for line in handle:
            line = line.strip()
            if "=" in line and not line.startswith(("#", "[")):
                key, value = line.split("=", 1)
                settings.setdefault(key, []).append(value)
    return settings


def environment(settings: dict[str, list[str]]) -> dict[str, str]:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    for assignment in settings.get("Environment", []):
        key, _, value = assignment.partition("=")
        env[key] = value
    for path in settings.get("EnvironmentFile", []):
        optional = path.startswith("-")
        path = path.lstrip("-")
        if optional and not os.path.exists(path):
            continue
        with open(path) as handle:
            for line in handle:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, value = line.split("=", 1)
                    env[key] = value.strip('"')
    return env


def state_file(unit: str, kind: str) -> str:
    return os.path.join(STATE_DIR, f"{unit}.{kind}")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def exec_words(line: str, env: dict[str, str]) -> list[str]:
    """The command's words, `${NAME}` replaced by the variable's value (one word, as systemd does). A
    `systemd-run --wait --pipe ...` (a root step outside a native unit's IP firewall) runs its command in place: there
    is no service manager here to make it a transient unit."""
    words = [re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), word)
             for word in shlex.split(line.lstrip("-+!"))]
    if words[:1] == ["/usr/bin/systemd-run"]:
        words = list(itertools.dropwhile(lambda word: word.startswith("--"), words[1:]))
    return words


def credentials(settings: dict[str, list[str]], line: str) -> dict[str, object]:
    """Popen arguments that run the command as the unit's User=/Group= in its WorkingDirectory= ("+": as root)."""
    user = settings.get("User", [None])[0]
    if user is None or line.startswith("+"):
        return {}
    entry = pwd.getpwnam(user)
    group = grp.getgrnam(settings["Group"][0]).gr_gid if "Group" in settings else entry.pw_gid
    return {"user": entry.pw_uid, "group": group, "extra_groups": [],
            "cwd": settings.get("WorkingDirectory", ["/"])[0]}


def run(unit: str) -> int:
    """The unit's start job, run in this process (the caller detaches it when asked not to block)."""
    settings = parse_unit(unit)
    mode = int(settings.get("RuntimeDirectoryMode", ["0755"])[0], 8)  # systemd.exec(5): 0755 unless told
    for directory in settings.get("RuntimeDirectory", []):
        os.makedirs(f"/run/{directory}", exist_ok=True)
        os.chmod(f"/run/{directory}", mode)
    os.makedirs(JOURNAL_DIR, exist_ok=True)
    with open(os.path.join(JOURNAL_DIR, f"{unit}.log"), "ab") as journal:
        for line in settings.get("ExecStartPre", []):
            env = environment(settings)
            code = subprocess.call(exec_words(line, env), env=env, stdout=journal, stderr=journal,
                                   **credentials(settings, line))  # type: ignore[call-overload]
            if code != 0 and not line.startswith("-"):
                with open(state_file(unit, "rc"), "w") as handle:
                    handle.write(str(code))
                return code
        line, env = settings["ExecStart"][0], environment(settings)
        main = subprocess.Popen(exec_words(line, env), env=env, stdout=journal, stderr=journal,
                                start_new_session=True, **credentials(settings, line))  # type: ignore[call-overload]
        with open(state_file(unit, "pid"), "w") as handle:
            handle.write(str(main.pid))
        code = main.wait()
    with open(state_file(unit, "rc"), "w") as handle:
        handle.write(str(code))
    return code


def start(unit: str, block: bool) -> int:
    os.makedirs(STATE_DIR, exist_ok=True)
    for kind in ("pid", "rc"):
        if os.path.exists(state_file(unit, kind)):
            os.unlink(state_file(unit, kind))
    oneshot = parse_unit(unit).get("Type", ["simple"])[0] == "oneshot"
    if oneshot and block:
        return run(unit)
    supervisor = subprocess.Popen([sys.executable, __file__, "_run", unit], start_new_session=True,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(state_file(unit, "supervisor"), "w") as handle:
        handle.write(str(supervisor.pid))
    if not oneshot:  # Type=exec: started once the main process exists (or the job already failed)
        while not os.path.exists(state_file(unit, "pid")) and supervisor.poll() is None:
            time.sleep(0.05)
        return 0 if supervisor.poll() in (None, 0) else 1
    return 0


def main_pid(unit: str) -> int | None:
    try:
        with open(state_file(unit, "pid")) as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


def is_active(unit: str) -> bool:
    pid = main_pid(unit)
    if pid is not None and alive(pid):
        return True
    settings = parse_unit(unit)
    if settings.get("RemainAfterExit", ["no"])[0] == "yes" and os.path.exists(state_file(unit, "rc")):
        with open(state_file(unit, "rc")) as handle:
            return handle.read().strip() == "0"
    return False


def stop(unit: str) -> None:
    pid = main_pid(unit)
    if pid is not None and alive(pid):
        os.killpg(pid, signal.SIGTERM)
        for _ in range(100):
            if not alive(pid):
                break
            time.sleep(0.1)
    if os.path.exists(state_file(unit, "pid")):
        os.unlink(state_file(unit, "pid"))


def enable(unit: str) -> None:
    for target in parse_unit(unit).get("WantedBy", []):
        wants = os.path.join(UNIT_DIR, f"{target}.wants")
        os.makedirs(wants, exist_ok=True)
        link = os.path.join(wants, unit)
        if not os.path.islink(link):
            os.symlink(os.path.join(UNIT_DIR, unit), link)


def is_enabled(unit: str) -> bool:
    return any(os.path.islink(os.path.join(UNIT_DIR, f"{t}.wants", unit))
               for t in parse_unit(unit).get("WantedBy", []))


def main(argv: list[str]) -> int:
    flags = {a for a in argv if a.startswith("--")}
    words = [a for a in argv if not a.startswith("--")]
    command, units = words[0], words[1:]
    if command == "daemon-reload":
        return 0
    if command == "mask":
        for unit in units:
            link = os.path.join(UNIT_DIR, unit)
            if not os.path.lexists(link):
                os.symlink("/dev/null", link)
        return 0
    if command == "_run":
        return run(units[0])
    results = []
    for unit in units:
        if command == "enable":
            enable(unit)
            results.append(0)
        elif command == "is-enabled":
            results.append(0 if is_enabled(unit) else 1)
        elif command == "is-active":
            active = is_active(unit)
            if "--quiet" not in flags:
                print("active" if active else "inactive")
            results.append(0 if active else 3)
        elif command == "start":
            results.append(0 if is_active(unit) else start(unit, "--no-block" not in flags))
        elif command == "stop":
            stop(unit)
            results.append(0)
        elif command == "restart":
            stop(unit)
            results.append(start(unit, "--no-block" not in flags))
        else:
            print(f"fake systemctl: {command} is not emulated", file=sys.stderr)
            return 1
    return max(results, default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
