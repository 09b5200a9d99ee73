from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.models import APIToken
from portal.services import api_token_revoke


class Command(BaseCommand):
    help = "Revoke API tokens by prefix (the first 8 characters shown in the UI)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix")

    def handle(self, *args: Any, **options: Any) -> None:
        tokens = list(APIToken.objects.filter(prefix=options["prefix"]))
        if not tokens:
            raise CommandError(f"No token with prefix {options['prefix']!r}.")
        for token in tokens:
            api_token_revoke(token=token, user=None)
        self.stdout.write(f"Revoked {len(tokens)} token(s).")
