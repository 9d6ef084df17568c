"""Engagement: tracked links and clicks, button answers, A/B tests, holdouts, conversions."""
