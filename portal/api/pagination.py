from rest_framework import pagination


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """`count`, `next`, `previous`, `results`; default 50 rows, at most 1000."""

    default_limit = 50
    max_limit = 1000
