"""The sweep command: ``python -m airflow_provider_gang.sweep`` and ``airflow gang sweep``.

::

    python -m airflow_provider_gang.sweep [--conn-id ID ...] [--namespace NS | --all-namespaces]
                                          [--delete] [--keep-unknown]

For each connection (default ``kubernetes_default``) it lists every gang of the namespace (default:
the connection's) by its owner ConfigMap, with its task instance and the verdict of
:func:`.verdict.judge`. Without ``--delete`` it is a dry run and deletes nothing: a sweep over a
namespace shared with another Airflow, or run against the wrong database, must first be read.
With ``--delete`` the gangs marked ``withdraw`` are withdrawn (``hooks.deletion.withdraw_unless_claimed``).
A connection whose cluster cannot be reached is reported and skipped - nothing there was deleted,
the next sweep tries again - and the exit status is 1; otherwise 0.

The Airflow CLI runs it as ``airflow gang sweep`` (the provider's ``cli`` entry,
``get_provider_info``: :func:`get_cli_commands`), with the same arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from airflow_provider_gang.kube import errors
from airflow_provider_gang.reservation.tries import argument_record
from airflow_provider_gang.sweep import airflow_state, withdrawal

DEFAULT_CONN_ID = argument_record.default("kubernetes_conn_id")
ARGUMENTS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (
        ("--conn-id",),
        {
            "action": "append",
            "dest": "conn_ids",
            "metavar": "ID",
            "help": f"a kubernetes connection to sweep (repeatable; default {DEFAULT_CONN_ID})",
        },
    ),
    (("--namespace",), {"help": "the namespace to sweep (default: the connection's, else 'default')"}),
    (("--all-namespaces",), {"action": "store_true", "help": "sweep every namespace the connection may list"}),
    (("--delete",), {"action": "store_true", "help": "withdraw the gangs marked 'withdraw' (default: dry run)"}),
    (
        ("--keep-unknown",),
        {
            "action": "store_true",
            "help": "keep gangs no task instance of this Airflow knows (a namespace shared with another Airflow)",
        },
    ),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m airflow_provider_gang.sweep",
        description="List the gangs whose task instance is final or gone; withdraw them with --delete.",
    )
    for flags, options in ARGUMENTS:
        parser.add_argument(*flags, **options)
    return parser


def sweep(arguments: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Run the sweep of the parsed ``arguments``; the exit status."""
    from airflow_provider_gang.hooks.gang import GangHook

    facts = airflow_state.task_instances_by_gang()
    status = 0
    for conn_id in arguments.conn_ids or [DEFAULT_CONN_ID]:
        try:
            settings = GangHook(conn_id=conn_id).connection_settings()
            namespace = None if arguments.all_namespaces else arguments.namespace or settings.namespace or "default"
            where = "all namespaces" if namespace is None else f"namespace {namespace}"
            found = asyncio.run(
                withdrawal.sweep_namespace(
                    settings, namespace, facts, delete=arguments.delete, keep_unknown=arguments.keep_unknown
                )
            )
        except (errors.KubeError, TimeoutError, OSError) as error:
            print(
                f"Connection {conn_id}: could not reach the cluster ({type(error).__name__}: {error}); nothing was "
                "deleted there - run the sweep again once it answers",
                file=out,
            )
            status = 1
            continue
        except Exception as error:  # a bad connection: say which, go on with the others
            print(f"Connection {conn_id}: {type(error).__name__}: {error}", file=out)
            status = 1
            continue
        print(f"Connection {conn_id}, {where}: {len(found)} gang(s)", file=out)
        for gang in found:
            action = "withdraw" if gang.verdict.withdraw else "keep"
            if gang.deleted is not None:
                action = f"withdrawn ({gang.deleted} deleted, the rest by the garbage collector)"
            elif arguments.delete and gang.verdict.withdraw:
                action = "kept (a newer try claimed it)"
            print(f"  {gang.owner.namespace}/{gang.owner.gang}: {action} - {gang.verdict.reason}", file=out)
        to_withdraw = sum(1 for gang in found if gang.verdict.withdraw)
        if not arguments.delete and to_withdraw:
            print(f"  dry run: nothing deleted; --delete withdraws the {to_withdraw} gang(s) marked withdraw", file=out)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    return sweep(build_parser().parse_args(argv))


def sweep_command(arguments: argparse.Namespace) -> None:
    """``airflow gang sweep``: the Airflow CLI's entry (a non-zero status exits)."""
    status = sweep(arguments)
    if status:
        raise SystemExit(status)


def get_cli_commands() -> list[Any]:
    """The provider's Airflow CLI commands (``get_provider_info`` ``cli``): ``airflow gang sweep``."""
    from airflow.cli.cli_config import ActionCommand, Arg, GroupCommand, lazy_load_command

    argument: Callable[..., Any] = Arg
    sweep_action = ActionCommand(
        name="sweep",
        help="List (and with --delete withdraw) the gangs whose task instance is final or gone",
        func=lazy_load_command("airflow_provider_gang.sweep.command.sweep_command"),
        args=tuple(argument(flags, **options) for flags, options in ARGUMENTS),
    )
    return [GroupCommand(name="gang", help="Gang scheduling provider commands", subcommands=(sweep_action,))]
