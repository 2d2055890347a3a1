"""Cases that each need a process of their own (a platform instantiated once per process under that case's
environment), forked from one process that made the imports they all make first (issue 36: vLLM and torch, ~5 s and
more a process on the lane's machine, were imported again by every case's process).

Only for cases whose code reads its environment after those imports: each forked process gets its case's variables
added to the environment, then runs the case's code as ``python -c`` would, its stdout and stderr its own.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

FORKED = """
    import json, os, sys, textwrap, traceback
    {imports}
    results = {{}}
    for label, (code, env) in json.loads(sys.argv[1]).items():
        out, err = (os.path.join(sys.argv[2], f"{{label}}.{{fd}}") for fd in ("out", "err"))
        sys.stdout.flush(); sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            rc = 1
            try:
                for fd, path in ((1, out), (2, err)):
                    os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
                os.environ.update(env)
                exec(compile(textwrap.dedent(code), "<" + label + ">", "exec"), {{"__name__": "__main__"}})
                rc = 0
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush(); sys.stderr.flush()
                os._exit(rc)
        _, status = os.waitpid(pid, 0)
        results[label] = [os.waitstatus_to_exitcode(status), open(out).read(), open(err).read()]
    print(json.dumps(results))
"""


def run_forked(run: Callable[[str, list[str]], subprocess.CompletedProcess], imports: str,
               cases: dict[str, tuple[str, dict[str, str]]], folder: Path) -> dict[str, subprocess.CompletedProcess]:
    """Each case (``label: (code, environment variables added)``) in a process of its own, forked from one child
    that made ``imports`` (indented as ``FORKED``'s body); ``run(code, args)`` starts that child (its code dedented)
    as the caller starts its children (its environment). Returns each case's exit code, stdout and stderr."""
    proc = run(textwrap.dedent(FORKED.format(imports=imports)),
               [json.dumps({label: [textwrap.dedent(code), env] for label, (code, env) in cases.items()}), str(folder)])
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return {label: subprocess.CompletedProcess([label], rc, out, err)
            for label, (rc, out, err) in json.loads(lines[-1]).items()}
