"""The foundation every app stands on: settings readers, Redis, queues, secrets, logging,
service versions, embedded servers and child processes. It imports no app."""
