"""``netaware``: the offline engine commands and the live components (docs/design/contracts.md).

Exit codes: 0 success, 1 an input or runtime error (one line on stderr naming the file and
field), 2 a usage error, 3 a command that is declared but not implemented yet.
"""

from __future__ import annotations

import os
import sys

import click

from operators import __version__
from operators.cli import agent, cleanup, explain, offline, probe, run, serving
from operators.cli.common import EXIT_ERROR


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="netaware")
@click.option("--debug", is_flag=True, help="Show the Python traceback of an unexpected error (first option only).")
def cli(debug: bool) -> None:
    """netaware: network-aware scheduling for Kubernetes.

    Offline commands (reconcile, schedule, deschedule, simulate) compute from YAML
    snapshots of a cluster; run, webhook and extender are the live components.
    """


for command in (
    offline.reconcile_command,
    offline.schedule_command,
    offline.deschedule_command,
    offline.simulate_command,
    offline.topology_command,
    offline.plan_command,
    run.run_command,
    serving.webhook_command,
    serving.extender_command,
    serving.demo_command,
    probe.probe_command,
    agent.agent_command,
    explain.explain_group,
    cleanup.cleanup_command,
):
    cli.add_command(command)


def main() -> None:
    """The console script: any error is one line on stderr and exit 1; ``--debug`` (or NETAWARE_DEBUG=1) shows
    the traceback of an unexpected one."""
    debug = "--debug" in sys.argv[1:2] or os.environ.get("NETAWARE_DEBUG") == "1"
    try:
        cli(prog_name="netaware")
    except Exception as error:
        if debug:
            raise
        text = str(error).splitlines()[0][:300] if str(error) else ""
        click.echo(f"error: unexpected {type(error).__name__}: {text} (rerun with --debug for the traceback)", err=True)
        sys.exit(EXIT_ERROR)
