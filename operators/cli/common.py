"""What every ``netaware`` command shares: the one-line error, the snapshot and configuration loaders and the
common options."""

from __future__ import annotations

import datetime
import gc
from collections.abc import Callable
from typing import Any

import click
import yaml

from operators.api.errors import FieldError
from operators.api.meta import parse_time
from operators.cli import output
from operators.engine.cluster.snapshot import Snapshot
from operators.sources.files import LoadError, load_snapshot

EXIT_ERROR = 1


class CommandError(click.ClickException):
    """A one-line error on stderr, exit code 1."""

    exit_code = EXIT_ERROR

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {one_line(self.format_message())}", err=True)


def one_line(text: str) -> str:
    """``text`` on one line whatever it quotes: characters that break lines (a label key from a snapshot may
    hold any) are written as escapes."""
    return "".join(
        char if char.isprintable() or char == " " else char.encode("unicode_escape").decode() for char in text
    )


def log_format_option() -> Callable[[Any], Any]:
    """``--log-format text|json`` of every long-running command (operators/logs.py)."""
    from operators.logs import FORMATS

    return click.option(
        "--log-format",
        type=click.Choice(FORMATS),
        default="text",
        show_default=True,
        help="json: one object per line, with the keys of the object a line is about (kind, namespace, name, node).",
    )


def filename_option(required: bool = True) -> Callable[[Any], Any]:
    return click.option(
        "-f",
        "--filename",
        "filenames",
        multiple=True,
        required=required,
        metavar="PATH",
        help="Snapshot YAML/JSON (kubectl get -o yaml): a file, a folder (recursive) or - for stdin. Repeatable.",
    )


output_option = click.option(
    "-o",
    "--output",
    "fmt",
    type=click.Choice(output.FORMATS),
    default=None,
    help="Output format (default: table on a terminal, yaml otherwise).",
)


def _parse_now(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime.datetime:
    if value is None:
        return datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    try:
        return parse_time(value)
    except ValueError as error:
        raise click.BadParameter(f"not an RFC 3339 time: {value!r}") from error


now_option = click.option(
    "--now",
    callback=_parse_now,
    metavar="RFC3339",
    help="The clock the engine uses (default: the current time); fixes output for reproducible runs.",
)


def load(filenames: tuple[str, ...]) -> Snapshot:
    try:
        snapshot = load_snapshot(filenames)
    except LoadError as error:
        raise CommandError(str(error)) from None
    for warning in snapshot.warnings:
        click.echo(f"warning: {warning}", err=True)
    gc.freeze()  # a one-shot command: what it read stays; later collections need not walk it again
    return snapshot


scheduler_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="KubeSchedulerConfiguration-shaped file: plugin weights and pluginConfig args.",
)


def load_config_file(path: str, parse: Callable[[Any], Any]) -> Any:
    """Read a YAML (or JSON) file and ``parse`` it; any failure is one line naming the file and the field."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
        return parse(document)
    except OSError as error:
        raise CommandError(f"{path}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise CommandError(f"{path}: not valid YAML: {str(error).splitlines()[0]}") from None
    except RecursionError:
        raise CommandError(f"{path}: nested too deeply") from None
    except (FieldError, KeyError, TypeError, ValueError, AttributeError) as error:
        raise CommandError(f"{path}: {error}") from None


def load_scheduler_config(path: str | None) -> Any:
    from operators.api.config.scheduler import SchedulerConfig, parse_config

    return SchedulerConfig() if path is None else load_config_file(path, parse_config)


def load_descheduler_policy(path: str | None) -> Any:
    from operators.api.config.descheduler import DEFAULT_POLICY, parse_policy

    return parse_policy(DEFAULT_POLICY) if path is None else load_config_file(path, parse_policy)


def descheduler_policy_option(flag: str) -> Callable[[Any], Any]:
    return click.option(
        flag,
        "policy_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="DeschedulerConfiguration with a LowNodeLoad profile (default: netBandwidth low 30 %, high 70 %).",
    )


BUDGET_HELP = (
    "Each plan's budget, in milliseconds of an idle machine's work (the same plan on a busy one): building the "
    "problem and the report count against it; times the group's pods over 100, up to 10 times (the greedy start "
    "always completes first)."
)


def accounting_mode_option(help_text: str) -> Callable[[Any], Any]:
    """``--accounting-mode duplex|combined``: which of netaware's bandwidth extended resources are used."""
    return click.option(
        "--accounting-mode",
        type=click.Choice(("duplex", "combined")),
        default="duplex",
        show_default=True,
        help=help_text,
    )


def bandwidth_value(_ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A bandwidth flag's value as a quantity (bits/s), refused in one line naming the flag."""
    if value is None:
        return None
    from operators.api.quantity import QuantityError, parse_bandwidth

    try:
        return parse_bandwidth(value, f"--{(param.name or '').replace('_', '-')}")
    except QuantityError as error:
        raise click.BadParameter(str(error)) from None


def cluster_source_options(snapshot_help: str) -> Callable[[Any], Any]:
    """``-f`` (a snapshot, described by ``snapshot_help``), else ``--kubeconfig`` or ``--server``: where a command that
    reads the live cluster or a snapshot reads it (``explain``, ``cleanup``)."""

    def apply(command: Any) -> Any:
        command = click.option("--server", default=None, metavar="URL", help="A plain-HTTP API server (the emulator).")(
            command
        )
        command = click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False),
            default=None,
            help="Default: in-cluster, else $KUBECONFIG or ~/.kube/config (kubectl's current context).",
        )(command)
        return click.option(
            "-f", "--filename", "filenames", multiple=True, type=click.Path(exists=True), help=snapshot_help
        )(command)

    return apply
