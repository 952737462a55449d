"""AclsImage and AclsDelta (Kafka's): every ACL as of one image of the metadata log, by
its id, and the changes a run of records makes to them. Every broker holds every ACL,
so any of them authorizes any request and answers DescribeAcls."""

from __future__ import annotations

from purgatory.broker.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from purgatory.broker.security.authorizer.acl import AclBinding


class AclsImage:
    """Invariant: never changed once made (a delta makes the next one)."""

    __slots__ = ("acls",)

    def __init__(self, acls: dict[str, AclBinding] | None = None) -> None:
        self.acls = acls if acls is not None else {}  # by the ACL's id

    def records(self) -> list[AccessControlEntryRecord]:
        """Records that rebuild this image from nothing (for a snapshot)."""
        return [acl_record(acl_id, acl) for acl_id, acl in sorted(self.acls.items())]


def acl_record(acl_id: str, acl: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        acl_id,
        acl.resource_type,
        acl.resource_name,
        acl.pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission_type,
    )


class AclsDelta:
    def __init__(self, image: AclsImage) -> None:
        self.image = image
        self._acls = dict(image.acls)

    def replay(self, record: AccessControlEntryRecord | RemoveAccessControlEntryRecord) -> None:
        if isinstance(record, AccessControlEntryRecord):
            self._acls[record.id] = AclBinding(
                record.resource_type,
                record.resource_name,
                record.pattern_type,
                record.principal,
                record.host,
                record.operation,
                record.permission_type,
            )
        else:
            self._acls.pop(record.id, None)

    def apply(self) -> AclsImage:
        return AclsImage(self._acls)
