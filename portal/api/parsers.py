"""The API's JSON parser: DRF's, with nesting bounded (portal.jsonsafe) so a deep body is a 400."""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.settings import api_settings
from rest_framework.utils import json as drf_json

from portal.jsonsafe import MAX_DEPTH, NulCharacter, TooDeep, json_loads


class BoundedJSONParser(JSONParser):
    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        encoding = (parser_context or {}).get("encoding", "utf-8")
        try:
            text = codecs.getreader(encoding)(stream).read()
            parse_constant = drf_json.strict_constant if api_settings.STRICT_JSON else None
            return json_loads(text, parse_constant=parse_constant)
        except TooDeep:
            raise ParseError(_("JSON nested deeper than %(n)d levels.") % {"n": MAX_DEPTH}) from None
        except NulCharacter:
            raise ParseError(_("JSON strings may not contain the NUL character (\\u0000).")) from None
        except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError of a badly encoded body
            raise ParseError(_("JSON parse error - %(e)s") % {"e": exc}) from None
