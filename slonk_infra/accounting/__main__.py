"""``python3 -m slonk_infra.accounting --desired FILE [--interval SECONDS] [--once] [--prune]``: the reconciler
process (:mod:`slonk_infra.accounting.runner` says what a run does and what its exit status means)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from slonk_infra.accounting.runner import (
    DEFAULT_COMMAND_TIMEOUT,
    EXIT_NO_SLURMDBD,
    EXIT_OK,
    log,
    one_pass,
    run_command,
    wait_for_slurmdbd,
)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; expected seconds > 0")
    return value


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="python3 -m slonk_infra.accounting",
        description="Make slurmdbd hold the declared QOS, accounts, users and limits (sacctmgr).",
    )
    p.add_argument(
        "--desired", required=True, type=Path, metavar="FILE", help="the desired state (ConfigMap key desired.json)"
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="one run, then exit with its status (the default)")
    mode.add_argument(
        "--interval", type=_positive, metavar="SECONDS", help="run again every SECONDS, re-reading --desired"
    )
    p.add_argument(
        "--prune",
        action="store_true",
        help="delete what slurmdbd holds and the declaration lacks (never under running jobs)",
    )
    p.add_argument(
        "--wait",
        type=_positive,
        default=300.0,
        metavar="SECONDS",
        help="with --once: how long to wait for slurmdbd to answer (default 300)",
    )
    p.add_argument(
        "--command-timeout",
        type=_positive,
        default=DEFAULT_COMMAND_TIMEOUT,
        metavar="SECONDS",
        help=f"limit on each sacctmgr/squeue command (default {DEFAULT_COMMAND_TIMEOUT:g})",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Runs once (exit status of the run) or every ``--interval`` seconds until SIGTERM/SIGINT (then 0)."""
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s accounting %(levelname)s %(message)s", stream=sys.stderr
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping after this run", signum)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)

    prune = "on" if args.prune else "off"
    if args.interval is None:
        log.info("one run of %s (prune %s)", args.desired, prune)
        if not wait_for_slurmdbd(
            args.desired, run_command, wait=args.wait, timeout=args.command_timeout, sleep=stop.wait
        ):
            return EXIT_NO_SLURMDBD
        outcome = one_pass(args.desired, run_command, prune=args.prune, timeout=args.command_timeout)
        log.info("done: %s (exit %d)", outcome.status, outcome.exit_code)
        return outcome.exit_code
    log.info("reconciling %s every %gs (prune %s)", args.desired, args.interval, prune)
    while not stop.is_set():
        outcome = one_pass(args.desired, run_command, prune=args.prune, timeout=args.command_timeout)
        log.info("run %s; next in %gs", outcome.status, args.interval)
        stop.wait(args.interval)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
