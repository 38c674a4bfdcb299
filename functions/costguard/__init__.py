"""CostGuard: a serverless cost guard for ML teams on AWS."""

__version__ = "0.1.0"
