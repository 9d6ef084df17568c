"""Who may do what in the admin: roles (groups and permissions) and login throttling."""
