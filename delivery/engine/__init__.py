"""The sending engine: rate limits, the messaging-limit guard, senders, settlement, reconciling."""
