"""``python -m sandcrew.testing``: a scripted model on loopback, to try ``sandcrew solve``
(or anything that speaks the OpenAI API) with no model and no network.

It answers one solve as a persona (``sandcrew.testing.PERSONAS``; ``compliant`` by
default) or as a script file of turns, names its URL, and serves until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from sandcrew.testing._personas import PERSONAS
from sandcrew.testing._script import load_script
from sandcrew.testing._server import ScriptedModelServer


def main(arguments: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sandcrew.testing",
        description="A scripted OpenAI-compatible model on 127.0.0.1, for sandcrew solve offline.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--persona",
        choices=sorted(PERSONAS),
        default="compliant",
        metavar="NAME",
        help="answer as this persona of sandcrew.testing.PERSONAS (default: compliant)",
    )
    source.add_argument("--script", type=Path, help="answer from this YAML or JSON script")
    parser.add_argument(
        "--mode",
        choices=("workflow", "admin", "workflow+admin"),
        default="workflow",
        help="the --mode of the solve a persona answers (default: workflow)",
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: free)")
    chosen = parser.parse_args(arguments)
    try:
        turns = load_script(chosen.script) if chosen.script else None
    except ValueError as error:
        parser.error(str(error))
    if turns is None:
        turns = PERSONAS[chosen.persona].script(chosen.mode)
    server = ScriptedModelServer(turns, require_all_used=False, port=chosen.port)
    # Blocked before the server's threads start (they inherit it): the signals wait below.
    stops = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        server.start()
    except OSError as error:
        parser.exit(2, f"error: cannot listen on 127.0.0.1:{chosen.port}: {error.strerror}\n")
    what = f"script {chosen.script}" if chosen.script else f"persona {chosen.persona}"
    print(
        f"scripted model ({what}) at {server.base_url}, model name 'scripted'; Ctrl-C stops it",
        flush=True,
    )
    signal.sigwait(stops)
    server.stop()
    unexpected = server.failures
    print(
        f"answered {len(server.requests) - len(unexpected)} requests"
        + (f"; {len(unexpected)} were not in the script" if unexpected else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
