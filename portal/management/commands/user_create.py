"""``manage.py user_create NAME --role researcher``: a portal account with one role, from the command line.

The password is asked for twice, or with ``--noinput`` read from ``PORTAL_USER_PASSWORD`` (as
``createsuperuser`` reads ``DJANGO_SUPERUSER_PASSWORD``). The first admin is ``createsuperuser``.
"""

from __future__ import annotations

import getpass
import os
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.roles import ROLES


class Command(BaseCommand):
    help = "Create a portal user with a role (admin, operator or researcher)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=ROLES)
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--noinput",
            "--no-input",
            action="store_true",
            help="read the password from the PORTAL_USER_PASSWORD environment variable",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        from portal.services import user_create

        if opts["noinput"]:
            password = os.environ.get("PORTAL_USER_PASSWORD", "")
            if not password:
                raise CommandError("--noinput needs the password in PORTAL_USER_PASSWORD.")
        else:
            password = getpass.getpass("Password: ")
            if password != getpass.getpass("Password (again): "):
                raise CommandError("The passwords do not match.")
        try:
            user = user_create(
                username=opts["username"], password=password, role=opts["role"], email=opts["email"]
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(
            self.style.SUCCESS(f"{user.username} (id {user.pk}): created with the role {opts['role']}")
        )
