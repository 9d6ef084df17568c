"""Events out: what happened, told to the customer's systems from a durable outbox."""
