"""``ax3l-seats``: add, list and revoke the seats outside agents take turns with.

    ax3l-seats add NAME      # prints the new token once; only its hash is stored
    ax3l-seats list
    ax3l-seats revoke NAME   # the token stops working within AX3L_SEAT_TOKEN_REFRESH seconds

It uses Ax3l's database settings (``DB_*``, ``AX3L_DB_NAME``) and creates missing tables first.
Exit codes: 0 done, 1 the command could not be done (name taken, no such seat), 2 database or
configuration problem.
"""

from __future__ import annotations

import argparse
import sys

import pymysql

from ax3l.orchestrator.seats import add_seat
from ax3l.shared.db.cli import connect, ensure_schema
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.seats import SeatError, list_seats, revoke_seat
from ax3l.shared.settings import Settings


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ax3l-seats",
        description="Seats: named outside agents that may take the experiment's turns"
        " (proposer external).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add a seat and print its token (shown only once)")
    add.add_argument("name")
    commands.add_parser("list", help="list the seats (never their tokens)")
    revoke = commands.add_parser("revoke", help="revoke a seat's token")
    revoke.add_argument("name")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings()
    try:
        ensure_schema(settings)
        conn = connect(settings)
    except DatabaseError as exc:
        print(f"ax3l-seats: {exc}", file=sys.stderr)
        return 2
    try:
        if args.command == "add":
            token = add_seat(conn, args.name)
            print(f"seat {args.name} added. Its token (shown only this once):")
            print(token)
        elif args.command == "list":
            seats = list_seats(conn)
            if not seats:
                print("no seats")
            for seat in seats:
                state = "active" if seat.active else f"revoked {seat.revoked_at:%Y-%m-%d %H:%M:%S}"
                print(f"{seat.name}\tcreated {seat.created_at:%Y-%m-%d %H:%M:%S}\t{state}")
        else:
            seat = revoke_seat(conn, args.name)
            print(f"seat {seat.name} revoked at {seat.revoked_at:%Y-%m-%d %H:%M:%S}")
    except SeatError as exc:
        print(f"ax3l-seats: {exc}", file=sys.stderr)
        return 1
    except (DatabaseError, pymysql.err.MySQLError) as exc:
        print(f"ax3l-seats: database error: {exc}", file=sys.stderr)
        return 2
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
