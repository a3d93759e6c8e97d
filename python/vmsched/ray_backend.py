"""The Ray backend of sweeps (`--backend ray`): which Ray instance a sweep runs on, said
in one line, and the runs executed as Ray tasks.

Without `--address` (or with `--address local`) a sweep starts a private local Ray
instance and ends it afterwards, whatever the machine's Ray temporary folder holds: a
`ray_current_cluster` file left by a head that died without `ray stop` would otherwise
send `ray.init()` to a cluster that is gone. `--address auto` keeps Ray's discovery
(`RAY_ADDRESS`, then that file), and a cluster found that way which does not answer is
the user's to fix, named with where its address came from. Nothing is written before
the connection stands."""
from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator

from .errors import UserError
from .sweep_worker import RunOutcome, RunTask, execute

LOCAL = "local"
# How long the head's port may take to accept a connection before the cluster is taken
# for gone: a live head on a LAN accepts within milliseconds.
REACHABLE_TIMEOUT_S = 3.0


def _import_ray():
    try:
        import ray
    except ImportError as err:
        raise UserError("--backend ray needs Ray: pip install 'vmsched[ray]'") from err
    return ray


def _address_file() -> str:
    """Ray's record of the last cluster `ray start` began on this machine: RAY_TMPDIR (or
    TMPDIR, or /tmp), then ray/ray_current_cluster, as Ray itself finds it."""
    try:
        from ray._common.utils import get_ray_address_file
    except ImportError:  # Ray before 2.47 kept it here
        from ray._private.utils import get_ray_address_file
    return get_ray_address_file(None)


def discovered_address() -> tuple[str | None, str]:
    """The address `--address auto` would join and where it came from."""
    from_env = os.environ.get("RAY_ADDRESS")
    if from_env:
        return from_env, "from RAY_ADDRESS"
    path = _address_file()
    try:
        with open(path) as file:
            recorded = file.read().strip()
    except OSError:
        return None, f"RAY_ADDRESS is unset and there is no {path}"
    return (recorded or None), f"from {path}"


def _check_reachable(address: str, origin: str, flag: str) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"{flag}: {address!r} ({origin}) is not HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACHABLE_TIMEOUT_S).close()
    except OSError as err:
        remedy = ("unset RAY_ADDRESS" if origin == "from RAY_ADDRESS"
                  else "run `ray stop` to forget it" if origin.startswith("from ") else "check the address")
        raise UserError(f"{flag}: no Ray cluster answers at {address} ({origin}: {err.strerror or err}); "
                        f"it may have ended without `ray stop`. {remedy[0].upper() + remedy[1:]}, start a cluster "
                        "with `ray start --head`, or run on a private local instance with --address local") from None


def _require_client(address: str) -> None:
    try:
        import grpc  # noqa: F401  (what `ray[client]` adds to Ray)
    except ImportError:
        raise UserError(f"--address {address}: a ray:// address needs Ray's client: "
                        "pip install 'vmsched[ray]' (or 'ray[client]')") from None


def connect(workers: int | None, address: str | None, say: Callable[[str], None]) -> bool:
    """Start or join the Ray instance of a sweep; True when it is this call's to end."""
    ray = _import_ray()
    if ray.is_initialized():  # a Ray session the caller (a script, a notebook) began
        return False
    if address in (None, LOCAL):
        ray.init(address=LOCAL, num_cpus=workers, include_dashboard=False, log_to_driver=False)
        cpus = int(ray.cluster_resources().get("CPU", 0))
        say(f"ray: started a private local Ray instance with {cpus} CPUs for this sweep "
            "(--address auto joins a running cluster)")
        return True
    flag = f"--address {address}"
    if address.startswith("ray://"):
        _require_client(address)
        target, origin = address, "given"
    elif address == "auto":
        target, origin = discovered_address()
        if target is None:
            raise UserError(f"{flag}: no Ray cluster to join ({origin}); start one with `ray start --head`, "
                            "or run on a private local instance with --address local")
        if not target.startswith("ray://"):
            _check_reachable(target, origin, flag)
    else:
        target, origin = address, "given"
        _check_reachable(target, origin, flag)
    try:
        ray.init(address=address, log_to_driver=False)
    except Exception as err:  # Ray raises ConnectionError, RuntimeError or ValueError here
        ray.shutdown()
        raise UserError(f"{flag}: cannot join the Ray cluster at {target} ({origin}): {err}") from None
    say(f"ray: joined the cluster at {target} ({origin}), {int(ray.cluster_resources().get('CPU', 0))} CPUs")
    return True


def outcomes(tasks: list[RunTask], owned: bool) -> Iterator[RunOutcome]:
    """The runs as Ray tasks, yielded as each finishes; the Ray instance is ended after
    them when `owned`."""
    import ray
    try:
        remote_execute = ray.remote(num_cpus=1)(execute)
        pending = [remote_execute.remote(task) for task in tasks]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        if owned:
            ray.shutdown()
