"""Joining a Ray cluster for `compilekit sweep --ray`: the address checked, Ray imported with
the auth mode the cluster expects, the join bounded in time and quiet, every failure one line.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile

from compilekit.launch import runner
from compilekit.model.errors import UserError


def token_path() -> str | None:
    """The Ray auth token this machine holds, where Ray looks for one (RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token), or None."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    return path if os.path.isfile(path) else None


def _auth_like_the_cluster() -> None:
    """Ask for Ray's token auth where this machine holds a token and RAY_AUTH_MODE is unset: a
    cluster started beside a token (a `ray.init()` once wrote ~/.ray/auth_token) uses it, and
    Ray turns it on for a driver only for address "auto"; a driver with it joins a cluster
    without auth too. Ray reads the mode as it is imported, so this comes first (or Ray is
    told to read its config again)."""
    if "RAY_AUTH_MODE" in os.environ or token_path() is None:
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    if "ray" in sys.modules:
        try:
            from ray._raylet import Config

            Config.initialize("")
        except (ImportError, AttributeError):
            pass


def import_ray():
    """The ray module, or the one line that says how to get it."""
    _auth_like_the_cluster()
    try:
        import ray
    except ImportError:
        raise UserError(
            "--ray needs Ray, an optional extra: pip install 'compilekit[ray]' (or drop --ray "
            "to sweep on this machine)"
        ) from None
    return ray


def preflight(address: str) -> None:
    """Before anything is written: the address is "auto" or host:port (Ray would take "local"
    or a bare name as a cluster to start or look up, and wait), Ray is installed, and a
    host:port address answers."""
    host, _, port = address.rpartition(":")
    if address != "auto" and not (host and port.isdigit()):
        raise UserError(
            f"--ray {address!r}: give 'auto' (the cluster this machine belongs to, from `ray "
            "start`) or a cluster's host:port; to sweep on this machine alone, drop --ray"
        )
    import_ray()
    if address != "auto":
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except (OSError, ValueError) as exc:
            raise UserError(
                f"no Ray cluster answers at {address} ({exc}): start one with `ray start "
                "--head`, or give the address it printed"
            ) from None


# How long joining a cluster may take before the sweep says it could not (a local one joins in
# a few seconds; Ray itself retries for about 20 s where something else answers the port).
CONNECT_TIMEOUT_S = 15


def connect(ray, address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Join the Ray cluster at `address` ("auto": the one this machine belongs to) within
    timeout_s, or raise one line that says what to do. What Ray's C++ core prints while it
    retries (a warning a second) goes to a file, not the terminal."""
    import threading

    outcome: list = []

    def join():
        try:
            ray.init(
                address=address,
                logging_level="ERROR",
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": runner.ROOT}},
            )
            outcome.append(None)
        except Exception as exc:  # noqa: BLE001 - said below in one line
            outcome.append(exc)

    saved = os.dup(2)
    with tempfile.TemporaryFile() as quiet:
        os.dup2(quiet.fileno(), 2)
        try:
            worker = threading.Thread(target=join, name="compilekit-ray-connect", daemon=True)
            worker.start()
            worker.join(timeout_s)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    if outcome and outcome[0] is None:
        return
    exc = outcome[0] if outcome else None
    first = (
        f"no answer within {timeout_s:g} s"
        if exc is None
        else (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    )
    token = token_path()
    fix = (
        f"a Ray auth token is at {token} and RAY_AUTH_MODE={os.environ['RAY_AUTH_MODE']}: "
        "start the cluster with the same token, or unset RAY_AUTH_MODE"
        if token and os.environ.get("RAY_AUTH_MODE")
        else "start one with `ray start --head`, or give its address"
    )
    raise UserError(f"could not join a Ray cluster at {address!r}: {first} ({fix})")
