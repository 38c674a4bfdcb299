"""Adapters: one module per AWS service, each given its boto3 client."""
