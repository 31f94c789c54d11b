"""The process and host facts the Iggy GetStats command reports, measured for the shell.

Owns: ``SystemInfo`` (the facts, plain values) and ``HostFacts`` (measures them: Linux
``/proc`` where available, ``resource``, ``os.sysconf``, the data directory's file system,
the load average; CPU usage is the process's share of the time since the previous call).

Must not import: Twisted's reactor (time comes from the injected clock), sockets, the
transports.
"""

from __future__ import annotations

import os
import platform
import resource
import socket
import threading
from dataclasses import dataclass

from twisted.internet.interfaces import IReactorTime

__all__ = ["SystemInfo", "HostFacts"]


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """Facts about the process and host that GetStats reports (the shell measures them)."""

    process_id: int
    cpu_usage: float
    total_cpu_usage: float
    memory_usage: int
    total_memory: int
    available_memory: int
    hostname: str
    os_name: str
    os_version: str
    kernel_version: str
    threads_count: int
    free_disk_space: int
    total_disk_space: int


class HostFacts:
    """Calling it measures the facts now (disk figures are ``data_dir``'s file system)."""

    def __init__(self, data_dir: str, clock: IReactorTime) -> None:
        self.data_dir = data_dir
        self.clock = clock
        self._cpu_mark: tuple[float, float] | None = None

    def __call__(self) -> SystemInfo:
        """The process and host facts of GetStats (Linux /proc where available)."""
        page = os.sysconf("SC_PAGE_SIZE")
        total = os.sysconf("SC_PHYS_PAGES") * page
        available = os.sysconf("SC_AVPHYS_PAGES") * page
        rss = 0
        try:
            with open("/proc/self/statm", encoding="ascii") as statm:
                rss = int(statm.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime
        now = self.clock.seconds()
        cpu_usage = 0.0
        if self._cpu_mark is not None and now > self._cpu_mark[0]:
            cpu_usage = 100.0 * (cpu - self._cpu_mark[1]) / (now - self._cpu_mark[0])
        self._cpu_mark = (now, cpu)
        try:
            disk = os.statvfs(self.data_dir)
            free_disk, total_disk = disk.f_bavail * disk.f_frsize, disk.f_blocks * disk.f_frsize
        except OSError:
            free_disk = total_disk = 0
        try:
            load = os.getloadavg()[0] / (os.cpu_count() or 1) * 100.0
        except OSError:
            load = 0.0
        uname = platform.uname()
        return SystemInfo(
            process_id=os.getpid(), cpu_usage=max(0.0, cpu_usage), total_cpu_usage=load,
            memory_usage=rss, total_memory=total, available_memory=available,
            hostname=socket.gethostname(), os_name=uname.system, os_version=uname.version,
            kernel_version=uname.release, threads_count=threading.active_count(),
            free_disk_space=free_disk, total_disk_space=total_disk)
