"""What can be sent and from where: business accounts, phone numbers, and templates with the
rules for their parameters."""
