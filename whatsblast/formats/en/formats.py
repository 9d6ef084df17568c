"""One way to write a time on every page: 2026-12-01 08:07 in the viewer's zone, with the
zone's abbreviation (Django's English default is "Dec. 1, 2026, 8:07 a.m.")."""

DATETIME_FORMAT = "Y-m-d H:i T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i"
