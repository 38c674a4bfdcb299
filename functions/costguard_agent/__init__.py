"""Code that runs on users' notebook instances (not in a Lambda): the heartbeat."""
