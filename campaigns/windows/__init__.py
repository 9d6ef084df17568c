"""When a recipient may be messaged: daily send windows in their local time, and their zone."""
