"""AclControlManager: CreateAcls and DeleteAcls on the controller (Kafka's
AclControlManager). A request is checked against the controller's image and turned into
AccessControlEntryRecords and RemoveAccessControlEntryRecords; every broker's authorizer
holds the ACLs once it replays them (``AclsImage``).

- a new ACL is checked as Kafka checks it (``binding_problem``: INVALID_REQUEST); one
  that already exists succeeds and writes nothing;
- a DeleteAcls filter removes every ACL it matches and lists each; a filter that cannot
  match (an UNKNOWN type, pattern, operation or permission) is INVALID_REQUEST.
"""

from __future__ import annotations

import random
import uuid

from purgatory.broker.metadata.acl_image import acl_record
from purgatory.broker.metadata.metadata_image import MetadataImage
from purgatory.broker.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from purgatory.broker.security.authorizer.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_problem,
)
from purgatory.protocol import acl_messages as am
from purgatory.protocol.errors import ErrorCode

AclRecord = AccessControlEntryRecord | RemoveAccessControlEntryRecord


def binding(acl: am.Acl) -> AclBinding:
    return AclBinding(
        acl.resource_type,
        acl.resource_name or "",
        acl.pattern_type,
        acl.principal or "",
        acl.host or "",
        acl.operation,
        acl.permission_type,
    )


def binding_filter(acl: am.Acl) -> AclBindingFilter:
    return AclBindingFilter(
        acl.resource_type,
        acl.resource_name,
        acl.pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission_type,
    )


def wire_acl(acl: AclBinding) -> am.Acl:
    return am.Acl(
        acl.resource_type,
        acl.resource_name,
        acl.pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission_type,
    )


def filter_problem(acl: AclBindingFilter) -> str | None:
    """Why a filter can match nothing (Kafka's AclControlManager.validateFilter)."""
    for kind, value, name in (
        (ResourceType, acl.resource_type, "resourceType"),
        (PatternType, acl.pattern_type, "patternType"),
        (AclOperation, acl.operation, "operation"),
        (AclPermissionType, acl.permission_type, "permissionType"),
    ):
        if value not in set(kind) or value == 0:  # 0: UNKNOWN in each
            return f"Unknown {name}"
    return None


class AclControlManager:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng  # ACL ids (the simulation's seed makes them)

    def create_acls(
        self, image: MetadataImage, request: am.CreateAclsRequest
    ) -> tuple[am.CreateAclsResponse, list[AclRecord]]:
        existing = set(image.acls.acls.values())
        results: list[am.AclCreationResult] = []
        records: list[AclRecord] = []
        for creation in request.creations:
            acl = binding(creation)
            problem = binding_problem(acl)
            if problem is not None:
                results.append(am.AclCreationResult(ErrorCode.INVALID_REQUEST, problem))
                continue
            if acl not in existing:
                existing.add(acl)
                acl_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
                records.append(acl_record(acl_id, acl))
            results.append(am.AclCreationResult(ErrorCode.NONE))
        return am.CreateAclsResponse(results), records

    def delete_acls(
        self, image: MetadataImage, request: am.DeleteAclsRequest
    ) -> tuple[am.DeleteAclsResponse, list[AclRecord]]:
        results: list[am.DeleteAclsFilterResult] = []
        records: list[AclRecord] = []
        removed: set[str] = set()
        for wire in request.filters:
            acl_filter = binding_filter(wire)
            problem = filter_problem(acl_filter)
            if problem is not None:
                results.append(am.DeleteAclsFilterResult(ErrorCode.INVALID_REQUEST, problem, []))
                continue
            matching = []
            for acl_id, acl in sorted(image.acls.acls.items()):
                if acl_filter.matches(acl):
                    matching.append(am.DeleteAclsMatchingAcl(ErrorCode.NONE, None, wire_acl(acl)))
                    if acl_id not in removed:
                        removed.add(acl_id)
                        records.append(RemoveAccessControlEntryRecord(acl_id))
            results.append(am.DeleteAclsFilterResult(ErrorCode.NONE, None, matching))
        return am.DeleteAclsResponse(results), records
