"""``field__any=[...]``: membership in a long list of values, bound as ONE parameter.

``pk__in=ids`` writes ``IN (%s, %s, ...)``: one placeholder per value, which psycopg splits and
quotes one by one on every execution (4,000 card ids: ~55 ms of the client's CPU per query, most of
a live-push flush, benchmarks/live_push.py). ``pk__any=ids`` writes ``= ANY(%s)`` with the values
as one array on PostgreSQL (under 1 ms for the same ids) and falls back to ``IN`` elsewhere (the
demo's SQLite). Registered for every field when the portal app is ready.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db.models import Field, ForeignObject
from django.db.models.fields.related_lookups import RelatedIn
from django.db.models.lookups import In


class _AnyOnPostgres:
    def as_postgresql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lookup: Any = self
        if not lookup.rhs_is_direct_value():  # a subquery: as ``__in``
            return lookup.as_sql(compiler, connection)
        lhs, lhs_params = lookup.process_lhs(compiler, connection)
        values = list(dict.fromkeys(v for v in lookup.rhs if v is not None))
        if not values:
            raise EmptyResultSet
        _sqls, params = lookup.batch_process_rhs(compiler, connection, values)
        return f"{lhs} = ANY(%s)", (*lhs_params, list(params))


@Field.register_lookup
class AnyOf(_AnyOnPostgres, In):
    lookup_name = "any"


@ForeignObject.register_lookup
class RelatedAnyOf(_AnyOnPostgres, RelatedIn):
    lookup_name = "any"
