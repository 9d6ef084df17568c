"""Meta's Cloud API: the client, its asyncio transport, outcome classification, catalogue sync."""
