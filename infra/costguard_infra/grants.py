"""Grants CDK leaves out, made explicit so that a test can check their effect."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs

#: What a producer needs on the key of an SQS queue encrypted with a customer key.
SQS_PRODUCER_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")


def grant_encrypted_queue_writes(queue: sqs.IQueue, grantee: iam.IGrantable) -> None:
    """Let ``grantee`` use the queue's key for ``SendMessage``.

    CDK wires ``sqs:SendMessage`` for a Lambda's or a schedule's dead-letter queue
    but not the key (aws-cdk issue 33153): every dead letter would then be refused
    with ``KMS.AccessDeniedException`` and lost, exactly when something failed.
    """
    key = queue.encryption_master_key
    if key is not None:
        key.grant(grantee, *SQS_PRODUCER_KEY_ACTIONS)
