"""Sweeps on a Ray cluster (a real one, started here: 2 CPUs, 2 logical GPUs, one node)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from compilekit import __version__
from compilekit.model import result as results
from tests.conftest import ROOT
from tests.launch.test_sweep import EAGER_ONLY  # 4 eager cells, the local resume test's
from tests.report.test_null_figures import WRONG_SHAPE

# the cell's process kills its parent, the Ray worker running the task, mid-cell: once, or
# every time
KILLS_ITS_WORKER = """
import os, signal, time
import torch

MARK = {mark!r}

def attention(q, k, v):
    if {always} or not os.path.exists(MARK):
        open(MARK, "w").close()
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v
"""


def _ray_required(reason):
    if os.environ.get("COMPILEKIT_RAY_REQUIRED"):
        pytest.fail(f"COMPILEKIT_RAY_REQUIRED is set but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module", autouse=True)
def own_home(tmp_path_factory):
    """A HOME of the module's own: what a user's ~/.ray holds (an auth token an earlier
    `ray.init()` left) must not decide whether these tests pass."""
    saved = {k: os.environ.get(k) for k in ("HOME", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    os.environ["HOME"] = str(tmp_path_factory.mktemp("home"))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
        os.environ.pop(name, None)
    yield os.environ["HOME"]
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _start_cluster(env: dict, temp: str) -> str:
    """Start a one-node cluster (2 CPUs, 2 logical GPUs) with env; its address."""
    try:
        import ray  # noqa: F401
    except ImportError:
        _ray_required("Ray is not installed (pip install -e '.[ray]')")
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = [ray_bin, "start", "--head", f"--port={port}", "--num-cpus=2", "--num-gpus=2",
             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"]  # fmt: skip
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
    return f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def cluster(cache_root, own_home):
    """The address of a one-node Ray cluster whose workers share the session's compile cache."""
    temp = f"/tmp/ray-ck-{os.getpid()}"  # Ray's socket paths must stay short
    yield _start_cluster({**os.environ, "COMPILEKIT_CACHE": cache_root}, temp)
    _end_cluster(temp)


def _end_cluster(temp: str) -> None:
    """SIGKILL the cluster's processes (those naming its temp dir) and their children: `ray stop
    --force` polls for them in rounds of seconds."""
    parents, named = {}, set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents[int(pid)] = ppid
        if temp.encode() in cmdline:
            named.add(int(pid))
    doomed, grew = set(named), True
    while grew:  # the workers name no temp dir: they are the named ones' children
        more = {pid for pid, ppid in parents.items() if ppid in doomed} - doomed
        doomed |= more
        grew = bool(more)
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _done(out):
    return sorted(
        d
        for d in os.listdir(out)
        if os.path.isfile(os.path.join(out, d, "result.json")) and ".tmp-" not in d
    )


def _kernel_names(run_dir):
    with open(os.path.join(run_dir, "kernels.json")) as f:
        return sorted(k["name"] for k in json.load(f)["kernels"])


# cpu_small's compiled naive cell at its small shape, and one the CPU refuses: measured and
# unsupported (eager cells on Ray: the resume tests below)
RAY_SUBSET = """name = "cpu_small"
dtype = "float32"
device = "cpu"
timeout_s = 600
variants = ["naive", "sdpa-cudnn"]
modes = ["default"]
shapes = ["1x4x128x32"]
"""


def test_ray_sweep_matches_the_local_sweep_cell_for_cell(cluster, cli, tmp_path):
    (tmp_path / "subset.toml").write_text(RAY_SUBSET)
    local = tmp_path / "local"  # the same cells swept here first: Ray's then compile warm
    proc = cli("sweep", str(tmp_path / "subset.toml"), "--out", str(local))
    assert proc.returncode == 0 and len(_done(local)) == 2, proc.stdout + proc.stderr
    out = tmp_path / "ray"
    proc = cli("sweep", str(tmp_path / "subset.toml"), "--ray", cluster, "--out", str(out),
               "--ray-resources", '{"GPU": 1}')  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "to run on Ray (1 node" in proc.stdout and "[2/2]" in proc.stdout
    assert "running: " in proc.stdout and "done: " in proc.stdout
    assert len(_done(out)) == 2 and set(_done(out)) <= set(_done(local))
    statuses = {results.load(str(out / label)).status for label in _done(out)}
    assert statuses == {"ok", "unsupported"}
    for label in _done(out):
        a, b = results.load(str(local / label)), results.load(str(out / label))
        assert (b.status, b.reference, b.reason) == (a.status, a.reference, a.reason), label
        if a.measured:
            assert _kernel_names(out / label) == _kernel_names(local / label), label
            assert b.max_rel_err <= b.error_bound
            assert b.env["host"] == socket.gethostname() and b.env["compilekit"] == __version__
            assert b.env["torch"] and "triton" in b.env
        assert (out / label / "index.html").is_file()
    assert (out / "REPORT.md").is_file() and (out / "index.html").is_file()
    assert "Mixed machines" not in (out / "REPORT.md").read_text()


def test_killed_ray_sweep_resumes_only_missing_cells_also_into_a_shared_dir(
    cluster, tmp_path, cache_root
):
    path = tmp_path / "resume.toml"
    path.write_text(EAGER_ONLY)
    out = tmp_path / "out"
    # two cells at a time (a CPU cell asks for the whole node by default): resuming is tested
    cmd = [sys.executable, "-m", "compilekit", "sweep", str(path), "--out", str(out),
           "--ray", cluster, "--ray-resources", '{"CPU": 1}']  # fmt: skip
    env = {**os.environ, "COMPILEKIT_CACHE": cache_root}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.time() + 300
    while time.time() < deadline and (not out.exists() or len(_done(out)) < 2):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver: Ray ends its tasks, they end their cells
    proc.wait()
    before = {d: os.path.getmtime(out / d / "result.json") for d in _done(out)}
    assert 2 <= len(before) < 4
    # the rest with --shared-dir: the tasks write their run directories into out themselves
    again = subprocess.run(
        cmd + ["--shared-dir"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{len(before)} already done, {4 - len(before)} to run" in again.stdout
    assert len(_done(out)) == 4
    assert all(os.path.getmtime(out / d / "result.json") == t for d, t in before.items())
    assert not [d for d in os.listdir(out) if ".tmp-" in d]
    for label in _done(out):
        assert (out / label / "kernels.json").is_file() and (out / label / "index.html").is_file()


def test_a_task_killed_mid_cell_is_retried_or_recorded_failed(cluster, tmp_path, cli):
    for name, always in (("once", False), ("always", True)):
        mark = tmp_path / f"{name}.mark"
        (tmp_path / f"{name}.py").write_text(
            KILLS_ITS_WORKER.format(mark=str(mark), always=always)
        )
    (tmp_path / "wrongshape.py").write_text(WRONG_SHAPE)  # its null figures kept the driver
    (tmp_path / "kill.toml").write_text(
        'variants = ["once.py:attention", "always.py:attention", "wrongshape.py:attention"]\n'
        'modes = ["eager"]\nshapes = ["1x2x64x32"]\ndevice = "cpu"\n'
    )
    out = tmp_path / "out"
    proc = cli("sweep", str(tmp_path / "kill.toml"), "--ray", cluster, "--out", str(out),
               "--ray-resources", '{"CPU": 1}')  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the cell that never survives
    by_variant = {}
    for label in _done(out):
        r = results.load(str(out / label))
        by_variant[r.variant.rsplit("/", 1)[-1]] = r
    assert by_variant["once.py:attention"].status == "self-consistent"  # retried, then measured
    assert by_variant["wrongshape.py:attention"].status == "wrong"
    assert (out / "REPORT.md").is_file() and (out / "index.html").is_file()
    assert (tmp_path / "once.mark").exists()
    lost = [line for line in proc.stdout.splitlines() if line.startswith("  FAILED always.")]
    assert lost and "Ray task failed" in lost[0], proc.stdout
    assert "always.py:attention" not in by_variant  # no run directory for it, but a record:
    summary = json.loads((out / "sweep.json").read_text())
    failed = [c for c in summary["results"] if c["status"] == "failed"]
    assert len(failed) == 1 and "always.py" in failed[0]["variant"]


def test_a_ray_sweep_with_a_wrong_shape_and_a_segfault_measures_the_rest_and_resumes(
    cluster, tmp_path, cli
):
    from tests.report.test_null_figures import wrong_segfault_good

    wrong_segfault_good(tmp_path)
    out = tmp_path / "out"
    proc = cli("sweep", str(tmp_path / "e.toml"), "--ray", cluster, "--out", str(out))
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert "1 ok, 0 self-consistent, 1 wrong, 0 unsupported, 1 failed" in proc.stdout
    assert (out / "REPORT.md").is_file() and (out / "index.html").is_file()
    again = cli("sweep", str(tmp_path / "e.toml"), "--ray", cluster, "--out", str(out))
    assert again.returncode == 1 and "3 already done, 0 to run" in again.stdout, again.stdout


def test_ray_without_ray_or_cluster_is_one_line(cli, tmp_path):
    fake = tmp_path / "noray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('not installed')\n")
    toml = tmp_path / "e.toml"
    toml.write_text(EAGER_ONLY)
    pythonpath = os.pathsep.join([str(fake.parent), ROOT])
    for args, env, needle in (
        (["--ray"], {"PYTHONPATH": pythonpath}, "pip install 'compilekit[ray]'"),
        (["--ray", "127.0.0.1:1"], None, "no Ray cluster answers at 127.0.0.1:1"),
        (["--ray", "local"], None, "give 'auto'"),
        (["--ray", "--gpus", "0"], None, "for a local sweep"),
        (["--shared-dir"], None, "go with --ray"),
    ):
        proc = cli("sweep", str(toml), "--out", str(tmp_path / "o"), *args, env=env)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "o").exists()


def test_joining_where_no_ray_answers_is_quiet_and_bounded(capfd):
    """Something that is not Ray accepts the port (the preflight's TCP check passes): Ray's
    retry warnings stay off the terminal, and the wait ends at the bound with one line."""
    import threading

    from compilekit.launch import rayjoin
    from compilekit.model.errors import UserError

    try:
        import ray
    except ImportError:
        _ray_required("Ray is not installed (pip install -e '.[ray]')")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer():  # an HTTP server's 404, as a proxy in front of a closed port gives
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    address = f"127.0.0.1:{server.getsockname()[1]}"
    capfd.readouterr()
    try:
        with pytest.raises(UserError, match=f"could not join a Ray cluster at '{address}'"):
            rayjoin.connect(ray, address, timeout_s=8)  # Ray warns after 5 s of this
        err = capfd.readouterr().err
        assert "Failed to connect" not in err and "rpc_client" not in err, err
    finally:
        server.close()


def test_a_token_left_in_home_joins_the_cluster_started_beside_it(tmp_path):
    """An earlier `ray.init()` leaves ~/.ray/auth_token; a cluster started later beside it turns
    token auth on, and a driver given the cluster's address once waited 15 s, then said "no
    answer". The sweep's driver asks for token auth where a token is, and joins."""
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("0123456789abcdef" * 4)
    env = {**os.environ, "HOME": str(home)}
    temp = f"/tmp/ray-tk-{os.getpid()}"
    address = _start_cluster(env, temp)
    try:
        join = (
            "from compilekit.launch import rayjoin\n"
            "ray = rayjoin.import_ray()\n"
            f"rayjoin.connect(ray, {address!r})\n"
            "print('joined', ray.cluster_resources().get('CPU'))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", join], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0 and "joined 2.0" in proc.stdout, proc.stderr[-2000:]
    finally:
        _end_cluster(temp)


class _FakeRay:
    """Just enough of Ray for _run's submission: every task fails at once (no cell runs), and
    the order the cells were submitted in is kept."""

    def __init__(self):
        self.submitted, self.options = [], []

    def nodes(self):  # the smaller node of two has 6 CPUs
        return [
            {"Alive": True, "NodeManagerHostname": "a", "Resources": {"CPU": 6.0}},
            {"Alive": True, "NodeManagerHostname": "b", "Resources": {"CPU": 16.0, "GPU": 2.0}},
        ]

    def remote(self, fn=None, **_):
        if fn is None:  # ray.remote(num_cpus=0)(Board): the actor class
            return lambda cls: _Handle(self)
        return _Handle(self)

    def wait(self, refs, num_returns=1):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        if isinstance(ref, tuple):  # a cell's task
            raise RuntimeError("no cluster here")
        return {}


class _Handle:
    """A remote function, an actor class or an actor, and each of their methods."""

    def __init__(self, ray):
        self.ray = ray

    def __getattr__(self, name):
        return self

    def options(self, **kw):
        self.ray.options.append(kw)
        return self

    def remote(self, *args):
        if args and isinstance(args[0], dict) and "mode" in args[0]:
            self.ray.submitted.append(args[0]["mode"])
            return ("task", len(self.ray.submitted))
        return self


def test_a_ray_sweep_submits_max_autotune_cells_first(tmp_path):
    """Their cold compiles take longest: started first, the other cells fill that time (as the
    local sweep orders them)."""
    import io

    from compilekit.launch import raysweep
    from compilekit.userexperiment import load_experiment

    toml = tmp_path / "x.toml"
    toml.write_text(
        'name = "x"\nvariants = ["naive"]\nshapes = ["1x2x64x16"]\ndevice = "cpu"\n'
        'modes = ["eager", "default", "max-autotune", "reduce-overhead", '
        '"max-autotune-no-cudagraphs"]\n'
    )
    experiment = load_experiment(str(toml))
    ray = _FakeRay()
    out = tmp_path / "out"
    out.mkdir()
    ordered = raysweep._run(
        ray, experiment, str(out), {}, list(experiment.cells), None, False, None, False,
        io.StringIO(),
    )  # fmt: skip
    assert ray.submitted == [
        "max-autotune", "max-autotune-no-cudagraphs", "eager", "default", "reduce-overhead"
    ]  # fmt: skip
    assert [r.status for r in ordered] == ["failed"] * 5
    # a CPU cell's kernels use every core and nothing may run beside its timed calls: it asks
    # for all of the smaller node's CPUs
    assert [o["num_cpus"] for o in ray.options] == [6] * 5
