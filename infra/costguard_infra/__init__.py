"""The CostGuard CDK app: one stack composed of small constructs."""
