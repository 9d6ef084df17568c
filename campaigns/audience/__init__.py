"""Who a campaign goes to: contacts, their lists, importing them, and their consent."""
