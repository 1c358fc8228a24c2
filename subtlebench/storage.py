"""A Django storage backend over an S3 bucket (or any S3-protocol server) through boto3; whether media live there."""

from __future__ import annotations

import posixpath

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from django.utils.deconstruct import deconstructible


def media_in_bucket() -> bool:
    """Whether media live in the S3 bucket (S3_BUCKET set). Then every file one process writes for another (an export
    the page serves, an upload a worker samples) goes to the bucket too: each host's own disk is its own."""
    return bool(settings.S3_BUCKET)


def s3_client():
    return boto3.client(
        "s3",
        endpoint_url=settings.S3_ENDPOINT_URL or None,
        region_name=settings.S3_REGION,
        aws_access_key_id=settings.S3_ACCESS_KEY_ID or None,
        aws_secret_access_key=settings.S3_SECRET_ACCESS_KEY or None,
        config=Config(retries={"max_attempts": settings.S3_MAX_ATTEMPTS, "mode": "standard"}, signature_version="s3v4"),
    )


def split_s3_uri(uri: str) -> tuple[str, str]:
    """'s3://bucket/some/key' -> ('bucket', 'some/key')."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri!r}")
    return bucket, key


@deconstructible
class S3Storage(Storage):
    def __init__(self, bucket: str | None = None, prefix: str | None = None):
        self.bucket = bucket or settings.S3_BUCKET
        self.prefix = settings.S3_PREFIX if prefix is None else prefix
        self._client = None

    @property
    def client(self):
        if self._client is None:
            self._client = s3_client()
        return self._client

    def key(self, name: str) -> str:
        return posixpath.join(self.prefix, name) if self.prefix else name

    def _open(self, name, mode="rb"):
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"].read()
        except ClientError as error:
            if error.response["Error"]["Code"] in ("NoSuchKey", "404"):
                raise FileNotFoundError(f"s3://{self.bucket}/{self.key(name)}") from error
            raise
        return ContentFile(body, name=name)

    def _save(self, name, content):
        content.seek(0)
        self.client.upload_fileobj(content, self.bucket, self.key(name))
        return name

    def exists(self, name):
        try:
            self.client.head_object(Bucket=self.bucket, Key=self.key(name))
        except ClientError as error:
            if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def delete(self, name):
        self.client.delete_object(Bucket=self.bucket, Key=self.key(name))

    def size(self, name):
        return self.client.head_object(Bucket=self.bucket, Key=self.key(name))["ContentLength"]

    def get_modified_time(self, name):
        return self.client.head_object(Bucket=self.bucket, Key=self.key(name))["LastModified"]

    def url(self, name):
        return self.client.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.bucket, "Key": self.key(name)},
            ExpiresIn=settings.S3_URL_EXPIRY,
        )

    def listdir(self, path):
        prefix = self.key(path).rstrip("/") + "/" if path else (self.prefix.rstrip("/") + "/" if self.prefix else "")
        dirs, files = [], []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/"):
            dirs += [p["Prefix"][len(prefix) :].rstrip("/") for p in page.get("CommonPrefixes", [])]
            files += [o["Key"][len(prefix) :] for o in page.get("Contents", [])]
        return dirs, files

    def get_available_name(self, name, max_length=None):
        # Keys are content-addressed or unique by construction; overwriting is the idempotent choice.
        return name
