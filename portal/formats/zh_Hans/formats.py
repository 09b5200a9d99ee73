"""Simplified Chinese formats: the same 24 h clock, dates written the Chinese way."""

DATE_FORMAT = "Y年n月j日"
DATETIME_FORMAT = "Y年n月j日 H:i:s"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
TIME_FORMAT = "H:i:s"
DECIMAL_SEPARATOR = "."
THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
