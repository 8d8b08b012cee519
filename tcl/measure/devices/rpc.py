"""A board behind a TVM RPC tracker: programs build here and run there, through MetaSchedule's
RPCRunner; the tracker is asked before every batch; its compiled networks are not timed here."""
from __future__ import annotations

import os
import time
from typing import Callable, NoReturn

from ...config import TclError
from ...tvm_compat import meta_schedule
from .base import DeviceKind


class RPCDevice(DeviceKind):
    name = "rpc"

    def check_runnable(self, host_flags: frozenset[str] | None = None,
                       host_cpus: int | None = None) -> None:
        self.device.tvm_target()   # its code runs on the board: only TVM must know the target

    def spare_cpus(self) -> set[int]:
        return set(os.sched_getaffinity(0))   # it runs elsewhere

    @property
    def where(self) -> str:
        return f"remote via {self.device.tracker}"

    @property
    def failing_part(self) -> str:
        return f"tracker {self.device.tracker} (key {self.device.rpc_key})"

    def runner(self, **_local_kwargs):
        ms = meta_schedule()
        host, port = self._tracker()
        rpc = ms.runner.RPCConfig(tracker_host=host, tracker_port=port,
                                  tracker_key=self.device.rpc_key,
                                  session_timeout_sec=self.device.measure.timeout_sec)
        return ms.runner.RPCRunner(rpc_config=rpc, evaluator_config=self.evaluator_config())

    def problem(self, timeout: float = 5.0, need_server: bool = True) -> str | None:
        """Why the tracker cannot measure now: unreachable, or (``need_server``) no server
        registered under the device's key."""
        import socket

        d = self.device
        host, port = self._tracker()
        try:
            with socket.create_connection((host, port), timeout=timeout):
                pass
        except OSError as e:
            return f"cannot reach the tracker at {d.tracker}: {e.strerror or e}"
        try:
            summary = _tracker_summary(host, port, timeout)
        except Exception as e:  # the tracker accepted the connection but did not answer
            return f"the tracker at {d.tracker} did not answer: {str(e).splitlines()[-1]}"
        servers = {s.get("key", "").split(":", 1)[-1] for s in summary.get("server_info", [])}
        if need_server and d.rpc_key not in servers and \
                d.rpc_key not in summary.get("queue_info", {}):
            return (f"no RPC server is registered under key {d.rpc_key!r} at the tracker "
                    f"{d.tracker} (registered: {', '.join(sorted(servers)) or 'none'})")
        return None

    def wait_until_reachable(self, retries: int, delay_s: float,
                             say: Callable[[str], None] = print) -> None:
        """Ask the tracker up to ``1 + retries`` times, ``delay_s`` apart (the policy: params'
        measure.retries and measure.retry_delay_s), until it answers; a TclError naming the last
        problem if it never did. Its servers may come later: each batch checks for them."""
        name = self.device.name
        for attempt in range(retries + 1):
            problem = self.problem(need_server=False)
            if problem is None:
                return
            if attempt < retries:
                say(f"device {name}: {problem}; trying again in {delay_s:g} s "
                    f"({attempt + 1} of {retries} retries)")
                time.sleep(delay_s)
        raise TclError(f"device {name!r}: {problem} (after {retries + 1} attempts)")

    def check_can_time(self) -> NoReturn:
        raise TclError(f"device {self.device.name!r} is remote: tcl tune times the compiled "
                       "network on this host, so it tunes local devices only")

    def timer(self) -> NoReturn:
        """None: a board's networks are not timed from here (``check_can_time`` says so)."""
        return self.check_can_time()

    def _tracker(self) -> tuple[str, int]:
        host, _, port = self.device.tracker.rpartition(":")
        return host, int(port)


def _tracker_summary(host: str, port: int, timeout: float) -> dict:
    from tvm import rpc

    # Reached just before, so TVM's connect (which retries refused connections for 60 s)
    # connects at once; the timeout bounds the answer.
    session = rpc.connect_tracker(host, port)
    try:
        session._sock.settimeout(timeout)
        return session.summary()
    finally:
        session.close()
