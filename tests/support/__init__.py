"""Test doubles and fixtures shared by the tests. Never shipped in the Lambda asset."""
