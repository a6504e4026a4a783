"""The suite's fork server runs ``python ARGS`` as a new interpreter would: argv, folder, environment, import path,
output and exit status; runs it cannot reproduce get a new interpreter."""

import os
import signal
import subprocess
import sys

import pytest

from test.forkserver import SERVER


@pytest.fixture(scope="module")
def server():
    """The suite's own server (started once per process; this module's runs leave it as they found it)."""
    return SERVER


def _env(**changes):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return {**env, **changes}


def test_code_module_and_script_runs_see_what_a_new_interpreter_would(server, tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tool.py").write_text("import sys\nprint('module', sys.argv[1:])\nsys.exit(4)\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper.py").write_text("VALUE = 7\n")
    script = tmp_path / "script.py"
    script.write_text("import sys, helper\nprint('script', sys.argv[1:], helper.VALUE, sys.path[0])\n")
    env = _env(KERNELGEN_TEST="here", PYTHONPATH=str(tmp_path / "lib"))

    code = server.run(
        ["-c", "import os, sys; print(os.getcwd(), sys.argv, os.environ['KERNELGEN_TEST'])", "x"], cwd=tmp_path, env=env
    )
    assert (code.returncode, code.stdout) == (0, f"{tmp_path} ['-c', 'x'] here\n")
    module = server.run(["-m", "pkg.tool", "a", "b"], cwd=tmp_path, env=env)
    assert (module.returncode, module.stdout) == (4, "module ['a', 'b']\n")
    ran = server.run([str(script), "c"], cwd="/", env=env)
    assert (ran.returncode, ran.stdout) == (0, f"script ['c'] 7 {tmp_path}\n")
    failed = server.run(["-c", "raise ValueError('no')"], cwd=tmp_path, env=env)
    assert failed.returncode == 1 and "ValueError: no" in failed.stderr
    # A name one run imported is not there for the next: each run starts from the server's state.
    assert server.run(["-c", "import sys; print('helper' in sys.modules)"], cwd=tmp_path, env=env).stdout == "False\n"


def test_a_run_past_its_timeout_is_killed_and_the_server_goes_on(server, tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        server.run(["-c", "import time; time.sleep(60)"], cwd=tmp_path, env=_env(), timeout=0.5)
    assert server.run(["-c", "print('next')"], cwd=tmp_path, env=_env()).stdout == "next\n"


def test_runs_the_server_cannot_reproduce_get_a_new_interpreter(server, tmp_path):
    # Triton's interpreter mode and the hash seed are fixed when the server starts; interpreter options need one.
    for args, env in (
        (["-c", "import os; print(os.getpid())"], _env(TRITON_INTERPRET="0")),
        (["-c", "import os; print(os.getpid())"], _env(PYTHONHASHSEED="123")),
        (["-I", "-c", "import os; print(os.getpid())"], _env()),
    ):
        result = server.run(args, cwd=tmp_path, env=env)
        assert result.returncode == 0 and result.args[0] == sys.executable
    child = server.run(["-c", "import os; print(os.getppid())"], cwd=tmp_path, env=_env(PYTHONHASHSEED="123"))
    assert int(child.stdout) == os.getpid()  # started by this process, not forked by the server


def test_started_runs_go_on_beside_each_other_and_report_the_signal_that_ended_them(server, tmp_path):
    """``start``: forked at once, each run ends on its own (one waits for a file only the test writes, while another
    runs to its end), and a run killed by a signal has that signal's negative number as its status, as Popen says."""
    flag = tmp_path / "go"
    waiting = server.start(
        ["-c", f"import os, time\nwhile not os.path.exists({str(flag)!r}):\n    time.sleep(0.01)\nprint('went')"],
        cwd=tmp_path,
        env=_env(),
    )
    sleeping = server.start(["-c", "import time; time.sleep(60)"], cwd=tmp_path, env=_env())
    assert server.run(["-c", "print('between')"], cwd=tmp_path, env=_env()).stdout == "between\n"
    assert waiting.poll() is None and sleeping.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        waiting.wait(timeout=0.2)
    flag.touch()
    assert waiting.communicate(timeout=60) == ("went\n", "") and waiting.returncode == 0
    os.kill(sleeping.pid, signal.SIGKILL)
    assert sleeping.wait(timeout=60) == -signal.SIGKILL
    assert sleeping.pid != os.getpid() and waiting.pid != sleeping.pid
