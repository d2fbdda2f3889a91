"""The JetStream API error catalogue, as data, and the exception that carries one.

Theory of operation
-------------------
nats-server answers every failed ``$JS.API.*`` request with
``{"code":<http-ish>,"err_code":<int>,"description":"…"}`` inside the response
JSON.  The catalogue below is nats-server's ``server/errors.json`` (226 entries,
2.15 line), transcribed 1:1: ``err_code -> (http code, description template,
Go constant)``.  Templates contain ``{err}``, ``{seq}``, ``{id}`` … placeholders
that the server substitutes literally (Go ``strings.Replacer``, no escaping);
``JSApiError(err_code, err="…")`` does the same.  A placeholder that is not
given stays in the text, as in Go.

The Python constant for each entry is the Go constant without its ``JS``
prefix and ``Err``/``F`` suffix, in UPPER_SNAKE: ``JSStreamNotFoundErr`` ->
``STREAM_NOT_FOUND = 10059``.

``error_json()`` renders exactly what nats-server writes: keys in the order
``code, err_code, description``, compact, Go's HTML-safe escaping of ``<``,
``>`` and ``&`` (``\\u003e``).
"""

from __future__ import annotations

import json
from typing import Final

__all__ = [
    "ACCOUNT_RESOURCES_EXCEEDED",
    "ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE",
    "ATOMIC_PUBLISH_DISABLED",
    "ATOMIC_PUBLISH_INCOMPLETE_BATCH",
    "ATOMIC_PUBLISH_INVALID_BATCH_COMMIT",
    "ATOMIC_PUBLISH_INVALID_BATCH_ID",
    "ATOMIC_PUBLISH_MISSING_SEQ",
    "ATOMIC_PUBLISH_TOO_LARGE_BATCH",
    "ATOMIC_PUBLISH_TOO_MANY_INFLIGHT",
    "ATOMIC_PUBLISH_UNSUPPORTED_HEADER_BATCH",
    "BAD_REQUEST",
    "BATCH_PUBLISH_DISABLED",
    "BATCH_PUBLISH_INVALID_BATCH_ID",
    "BATCH_PUBLISH_INVALID_PATTERN",
    "BATCH_PUBLISH_TOO_MANY_INFLIGHT",
    "BATCH_PUBLISH_UNKNOWN_BATCH_ID",
    "CATALOGUE",
    "CLUSTER_INCOMPLETE",
    "CLUSTER_NOT_ACTIVE",
    "CLUSTER_NOT_ASSIGNED",
    "CLUSTER_NOT_AVAIL",
    "CLUSTER_NOT_LEADER",
    "CLUSTER_NO_PEERS",
    "CLUSTER_PEER_NOT_MEMBER",
    "CLUSTER_REQUIRED",
    "CLUSTER_RESCUE",
    "CLUSTER_SERVER_MEMBER_CHANGE_INFLIGHT",
    "CLUSTER_SERVER_NOT_MEMBER",
    "CLUSTER_TAGS",
    "CLUSTER_UN_SUPPORT_FEATURE",
    "CONSUMER_ACK_FC_REQUIRES_FC",
    "CONSUMER_ACK_FC_REQUIRES_MAX_ACK_PENDING",
    "CONSUMER_ACK_FC_REQUIRES_NO_ACK_WAIT",
    "CONSUMER_ACK_FC_REQUIRES_NO_MAX_DELIVER",
    "CONSUMER_ACK_FC_REQUIRES_PUSH",
    "CONSUMER_ACK_POLICY_INVALID",
    "CONSUMER_ACK_WAIT_NEGATIVE",
    "CONSUMER_ALREADY_EXISTS",
    "CONSUMER_BACK_OFF_NEGATIVE",
    "CONSUMER_BAD_DURABLE_NAME",
    "CONSUMER_CONFIG_REQUIRED",
    "CONSUMER_CREATE",
    "CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH",
    "CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH",
    "CONSUMER_DELIVER_CYCLE",
    "CONSUMER_DELIVER_TO_WILDCARDS",
    "CONSUMER_DESCRIPTION_TOO_LONG",
    "CONSUMER_DIRECT_REQUIRES_EPHEMERAL",
    "CONSUMER_DIRECT_REQUIRES_PUSH",
    "CONSUMER_DOES_NOT_EXIST",
    "CONSUMER_DUPLICATE_FILTER_SUBJECTS",
    "CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT",
    "CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT",
    "CONSUMER_DURABLE_NAME_NOT_SET",
    "CONSUMER_EMPTY_FILTER",
    "CONSUMER_EMPTY_GROUP_NAME",
    "CONSUMER_EPHEMERAL_WITH_DURABLE_IN_SUBJECT",
    "CONSUMER_EPHEMERAL_WITH_DURABLE_NAME",
    "CONSUMER_EXISTING_ACTIVE",
    "CONSUMER_FC_REQUIRES_PUSH",
    "CONSUMER_FILTER_NOT_SUBSET",
    "CONSUMER_HB_REQUIRES_PUSH",
    "CONSUMER_INACTIVE_THRESHOLD_EXCESS",
    "CONSUMER_INVALID_DELIVER_SUBJECT",
    "CONSUMER_INVALID_GROUP_NAME",
    "CONSUMER_INVALID_POLICY",
    "CONSUMER_INVALID_PRIORITY_GROUP",
    "CONSUMER_INVALID_RESET",
    "CONSUMER_INVALID_SAMPLING",
    "CONSUMER_MAX_DELIVER_BACKOFF",
    "CONSUMER_MAX_PENDING_ACK_EXCESS",
    "CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED",
    "CONSUMER_MAX_REQUEST_BATCH_EXCEEDED",
    "CONSUMER_MAX_REQUEST_BATCH_NEGATIVE",
    "CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL",
    "CONSUMER_MAX_WAITING_NEGATIVE",
    "CONSUMER_METADATA_LENGTH",
    "CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED",
    "CONSUMER_NAME_CONTAINS_PATH_SEPARATORS",
    "CONSUMER_NAME_EXIST",
    "CONSUMER_NAME_TOO_LONG",
    "CONSUMER_NOT_FOUND",
    "CONSUMER_OFFLINE",
    "CONSUMER_OFFLINE_REASON",
    "CONSUMER_ON_MAPPED",
    "CONSUMER_OVERLAPPING_SUBJECT_FILTERS",
    "CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE",
    "CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE",
    "CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP",
    "CONSUMER_PULL_NOT_DURABLE",
    "CONSUMER_PULL_REQUIRES_ACK",
    "CONSUMER_PULL_WITH_RATE_LIMIT",
    "CONSUMER_PUSH_MAX_WAITING",
    "CONSUMER_PUSH_WITH_PRIORITY_GROUP",
    "CONSUMER_REPLACEMENT_WITH_DIFFERENT_NAME",
    "CONSUMER_REPLAY_POLICY_INVALID",
    "CONSUMER_REPLICAS_EXCEEDS_STREAM",
    "CONSUMER_REPLICAS_SHOULD_MATCH_STREAM",
    "CONSUMER_SMALL_HEARTBEAT",
    "CONSUMER_STORE_FAILED",
    "CONSUMER_STREAM_IDENTITY_MISMATCH",
    "CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS",
    "CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL",
    "CONSUMER_WQ_CONSUMER_NOT_UNIQUE",
    "CONSUMER_WQ_MULTIPLE_UNFILTERED",
    "CONSUMER_WQ_REQUIRES_EXPLICIT_ACK",
    "INSUFFICIENT_RESOURCES",
    "INVALID_JSON",
    "MAXIMUM_CONSUMERS_LIMIT",
    "MAXIMUM_STREAMS_LIMIT",
    "MEMORY_RESOURCES_EXCEEDED",
    "MESSAGE_COUNTER_BROKEN",
    "MESSAGE_INCR_DISABLED",
    "MESSAGE_INCR_INVALID",
    "MESSAGE_INCR_MISSING",
    "MESSAGE_INCR_PAYLOAD",
    "MESSAGE_SCHEDULES_DISABLED",
    "MESSAGE_SCHEDULES_PATTERN_INVALID",
    "MESSAGE_SCHEDULES_ROLLUP_INVALID",
    "MESSAGE_SCHEDULES_SCHEDULER_INVALID",
    "MESSAGE_SCHEDULES_SOURCE_INVALID",
    "MESSAGE_SCHEDULES_TARGET_INVALID",
    "MESSAGE_SCHEDULES_TIME_ZONE_INVALID",
    "MESSAGE_SCHEDULES_TTL_INVALID",
    "MESSAGE_SOURCE_HDR_NOT_ALLOWED",
    "MESSAGE_TTL_DISABLED",
    "MESSAGE_TTL_INVALID",
    "MIRROR_CONSUMER_REQUIRES_ACK_FC",
    "MIRROR_CONSUMER_SETUP_FAILED",
    "MIRROR_DURABLE_CONSUMER_CFG_INVALID",
    "MIRROR_INVALID_STREAM_NAME",
    "MIRROR_INVALID_SUBJECT_FILTER",
    "MIRROR_INVALID_TRANSFORM_DESTINATION",
    "MIRROR_MAX_MESSAGE_SIZE_TOO_BIG",
    "MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED",
    "MIRROR_OVERLAPPING_SUBJECT_FILTERS",
    "MIRROR_WITH_ATOMIC_PUBLISH",
    "MIRROR_WITH_BATCH_PUBLISH",
    "MIRROR_WITH_COUNTERS",
    "MIRROR_WITH_FIRST_SEQ",
    "MIRROR_WITH_MSG_SCHEDULES",
    "MIRROR_WITH_SOURCES",
    "MIRROR_WITH_START_SEQ_AND_TIME",
    "MIRROR_WITH_SUBJECTS",
    "MIRROR_WITH_SUBJECT_FILTERS",
    "NOT_EMPTY_REQUEST",
    "NOT_ENABLED",
    "NOT_ENABLED_FOR_ACCOUNT",
    "NO_ACCOUNT",
    "NO_LIMITS",
    "NO_MESSAGE_FOUND",
    "PEDANTIC",
    "PEER_REMAP",
    "RAFT_GENERAL",
    "REPLICAS_COUNT_CANNOT_BE_NEGATIVE",
    "REQUIRED_API_LEVEL",
    "RESTORE_SUBSCRIBE_FAILED",
    "SEQUENCE_NOT_FOUND",
    "SNAPSHOT_DELIVER_SUBJECT_INVALID",
    "SOURCE_CONSUMER_REQUIRES_ACK_FC",
    "SOURCE_CONSUMER_SETUP_FAILED",
    "SOURCE_DUPLICATE_DETECTED",
    "SOURCE_DURABLE_CONSUMER_CFG_INVALID",
    "SOURCE_DURABLE_CONSUMER_DUPLICATE_DETECTED",
    "SOURCE_INVALID_STREAM_NAME",
    "SOURCE_INVALID_SUBJECT_FILTER",
    "SOURCE_INVALID_TRANSFORM_DESTINATION",
    "SOURCE_MAX_MESSAGE_SIZE_TOO_BIG",
    "SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED",
    "SOURCE_OVERLAPPING_SUBJECT_FILTERS",
    "SOURCE_WITH_MSG_SCHEDULES",
    "STORAGE_RESOURCES_EXCEEDED",
    "STREAM_ASSIGNMENT",
    "STREAM_CREATE",
    "STREAM_DELETE",
    "STREAM_DUPLICATE_MESSAGE_CONFLICT",
    "STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID",
    "STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_NOT_READY",
    "STREAM_EXTERNAL_API_OVERLAP",
    "STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS",
    "STREAM_GENERAL_ERROR",
    "STREAM_HEADER_EXCEEDS_MAXIMUM",
    "STREAM_INFO_MAX_SUBJECTS",
    "STREAM_INVALID",
    "STREAM_INVALID_CONFIG",
    "STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ",
    "STREAM_LIMITS",
    "STREAM_MAX_BYTES_REQUIRED",
    "STREAM_MAX_STREAM_BYTES_EXCEEDED",
    "STREAM_MESSAGE_EXCEEDS_MAXIMUM",
    "STREAM_MIN_LAST_SEQ",
    "STREAM_MIRROR_NOT_UPDATABLE",
    "STREAM_MISMATCH",
    "STREAM_MOVE_AND_SCALE",
    "STREAM_MOVE_IN_PROGRESS",
    "STREAM_MSG_DELETE_FAILED",
    "STREAM_NAME_CONTAINS_PATH_SEPARATORS",
    "STREAM_NAME_EXIST",
    "STREAM_NAME_EXIST_RESTORE_FAILED",
    "STREAM_NOT_FOUND",
    "STREAM_NOT_MATCH",
    "STREAM_OFFLINE",
    "STREAM_OFFLINE_REASON",
    "STREAM_PURGE_FAILED",
    "STREAM_RECONFIGURE_IN_PROGRESS",
    "STREAM_RECONFIGURE_NOT_IN_PROGRESS",
    "STREAM_REPLICAS_NOT_SUPPORTED",
    "STREAM_REPLICAS_NOT_UPDATABLE",
    "STREAM_RESTORE",
    "STREAM_ROLLUP_FAILED",
    "STREAM_SEALED",
    "STREAM_SEQUENCE_NOT_MATCH",
    "STREAM_SNAPSHOT",
    "STREAM_STORE_FAILED",
    "STREAM_SUBJECT_OVERLAP",
    "STREAM_TEMPLATE_CREATE",
    "STREAM_TEMPLATE_DELETE",
    "STREAM_TEMPLATE_NOT_FOUND",
    "STREAM_TOO_MANY_REQUESTS",
    "STREAM_TRANSFORM_INVALID_DESTINATION",
    "STREAM_TRANSFORM_INVALID_SOURCE",
    "STREAM_UPDATE",
    "STREAM_WRONG_LAST_MSG_ID",
    "STREAM_WRONG_LAST_SEQUENCE",
    "STREAM_WRONG_LAST_SEQUENCE_CONSTANT",
    "TEMPLATE_NAME_NOT_MATCH_SUBJECT",
    "TEMP_STORAGE_FAILED",
    "ErrorEntry",
    "JSApiError",
    "go_json",
]


class ErrorEntry(tuple[int, str, str]):
    """``(http code, description template, Go constant)``; a plain tuple subtype."""

    __slots__ = ()

    @property
    def code(self) -> int:
        """HTTP-like status code (400, 404, 500, 503 …)."""
        return self[0]

    @property
    def template(self) -> str:
        """Description with ``{placeholders}``."""
        return self[1]

    @property
    def go_name(self) -> str:
        """The nats-server Go constant, for cross-reference."""
        return self[2]


ACCOUNT_RESOURCES_EXCEEDED: Final = 10002
BAD_REQUEST: Final = 10003
CLUSTER_INCOMPLETE: Final = 10004
CLUSTER_NO_PEERS: Final = 10005
CLUSTER_NOT_ACTIVE: Final = 10006
CLUSTER_NOT_ASSIGNED: Final = 10007
CLUSTER_NOT_AVAIL: Final = 10008
CLUSTER_NOT_LEADER: Final = 10009
CLUSTER_REQUIRED: Final = 10010
CLUSTER_TAGS: Final = 10011
CONSUMER_CREATE: Final = 10012
CONSUMER_NAME_EXIST: Final = 10013
CONSUMER_NOT_FOUND: Final = 10014
SNAPSHOT_DELIVER_SUBJECT_INVALID: Final = 10015
CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT: Final = 10016
CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT: Final = 10017
CONSUMER_DURABLE_NAME_NOT_SET: Final = 10018
CONSUMER_EPHEMERAL_WITH_DURABLE_IN_SUBJECT: Final = 10019
CONSUMER_EPHEMERAL_WITH_DURABLE_NAME: Final = 10020
STREAM_EXTERNAL_API_OVERLAP: Final = 10021
STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS: Final = 10022
INSUFFICIENT_RESOURCES: Final = 10023
STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ: Final = 10024
INVALID_JSON: Final = 10025
MAXIMUM_CONSUMERS_LIMIT: Final = 10026
MAXIMUM_STREAMS_LIMIT: Final = 10027
MEMORY_RESOURCES_EXCEEDED: Final = 10028
MIRROR_CONSUMER_SETUP_FAILED: Final = 10029
MIRROR_MAX_MESSAGE_SIZE_TOO_BIG: Final = 10030
MIRROR_WITH_SOURCES: Final = 10031
MIRROR_WITH_START_SEQ_AND_TIME: Final = 10032
MIRROR_WITH_SUBJECT_FILTERS: Final = 10033
MIRROR_WITH_SUBJECTS: Final = 10034
NO_ACCOUNT: Final = 10035
CLUSTER_UN_SUPPORT_FEATURE: Final = 10036
NO_MESSAGE_FOUND: Final = 10037
NOT_EMPTY_REQUEST: Final = 10038
NOT_ENABLED_FOR_ACCOUNT: Final = 10039
CLUSTER_PEER_NOT_MEMBER: Final = 10040
RAFT_GENERAL: Final = 10041
RESTORE_SUBSCRIBE_FAILED: Final = 10042
SEQUENCE_NOT_FOUND: Final = 10043
CLUSTER_SERVER_NOT_MEMBER: Final = 10044
SOURCE_CONSUMER_SETUP_FAILED: Final = 10045
SOURCE_MAX_MESSAGE_SIZE_TOO_BIG: Final = 10046
STORAGE_RESOURCES_EXCEEDED: Final = 10047
STREAM_ASSIGNMENT: Final = 10048
STREAM_CREATE: Final = 10049
STREAM_DELETE: Final = 10050
STREAM_GENERAL_ERROR: Final = 10051
STREAM_INVALID_CONFIG: Final = 10052
STREAM_LIMITS: Final = 10053
STREAM_MESSAGE_EXCEEDS_MAXIMUM: Final = 10054
STREAM_MIRROR_NOT_UPDATABLE: Final = 10055
STREAM_MISMATCH: Final = 10056
STREAM_MSG_DELETE_FAILED: Final = 10057
STREAM_NAME_EXIST: Final = 10058
STREAM_NOT_FOUND: Final = 10059
STREAM_NOT_MATCH: Final = 10060
STREAM_REPLICAS_NOT_UPDATABLE: Final = 10061
STREAM_RESTORE: Final = 10062
STREAM_SEQUENCE_NOT_MATCH: Final = 10063
STREAM_SNAPSHOT: Final = 10064
STREAM_SUBJECT_OVERLAP: Final = 10065
STREAM_TEMPLATE_CREATE: Final = 10066
STREAM_TEMPLATE_DELETE: Final = 10067
STREAM_TEMPLATE_NOT_FOUND: Final = 10068
STREAM_UPDATE: Final = 10069
STREAM_WRONG_LAST_MSG_ID: Final = 10070
STREAM_WRONG_LAST_SEQUENCE: Final = 10071
TEMP_STORAGE_FAILED: Final = 10072
TEMPLATE_NAME_NOT_MATCH_SUBJECT: Final = 10073
STREAM_REPLICAS_NOT_SUPPORTED: Final = 10074
PEER_REMAP: Final = 10075
NOT_ENABLED: Final = 10076
STREAM_STORE_FAILED: Final = 10077
CONSUMER_CONFIG_REQUIRED: Final = 10078
CONSUMER_DELIVER_TO_WILDCARDS: Final = 10079
CONSUMER_PUSH_MAX_WAITING: Final = 10080
CONSUMER_DELIVER_CYCLE: Final = 10081
CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED: Final = 10082
CONSUMER_SMALL_HEARTBEAT: Final = 10083
CONSUMER_PULL_REQUIRES_ACK: Final = 10084
CONSUMER_PULL_NOT_DURABLE: Final = 10085
CONSUMER_PULL_WITH_RATE_LIMIT: Final = 10086
CONSUMER_MAX_WAITING_NEGATIVE: Final = 10087
CONSUMER_HB_REQUIRES_PUSH: Final = 10088
CONSUMER_FC_REQUIRES_PUSH: Final = 10089
CONSUMER_DIRECT_REQUIRES_PUSH: Final = 10090
CONSUMER_DIRECT_REQUIRES_EPHEMERAL: Final = 10091
CONSUMER_ON_MAPPED: Final = 10092
CONSUMER_FILTER_NOT_SUBSET: Final = 10093
CONSUMER_INVALID_POLICY: Final = 10094
CONSUMER_INVALID_SAMPLING: Final = 10095
STREAM_INVALID: Final = 10096
STREAM_HEADER_EXCEEDS_MAXIMUM: Final = 10097
CONSUMER_WQ_REQUIRES_EXPLICIT_ACK: Final = 10098
CONSUMER_WQ_MULTIPLE_UNFILTERED: Final = 10099
CONSUMER_WQ_CONSUMER_NOT_UNIQUE: Final = 10100
CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL: Final = 10101
CONSUMER_NAME_TOO_LONG: Final = 10102
CONSUMER_BAD_DURABLE_NAME: Final = 10103
CONSUMER_STORE_FAILED: Final = 10104
CONSUMER_EXISTING_ACTIVE: Final = 10105
CONSUMER_REPLACEMENT_WITH_DIFFERENT_NAME: Final = 10106
CONSUMER_DESCRIPTION_TOO_LONG: Final = 10107
CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS: Final = 10108
STREAM_SEALED: Final = 10109
STREAM_PURGE_FAILED: Final = 10110
STREAM_ROLLUP_FAILED: Final = 10111
CONSUMER_INVALID_DELIVER_SUBJECT: Final = 10112
STREAM_MAX_BYTES_REQUIRED: Final = 10113
CONSUMER_MAX_REQUEST_BATCH_NEGATIVE: Final = 10114
CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL: Final = 10115
CONSUMER_MAX_DELIVER_BACKOFF: Final = 10116
STREAM_INFO_MAX_SUBJECTS: Final = 10117
STREAM_OFFLINE: Final = 10118
CONSUMER_OFFLINE: Final = 10119
NO_LIMITS: Final = 10120
CONSUMER_MAX_PENDING_ACK_EXCESS: Final = 10121
STREAM_MAX_STREAM_BYTES_EXCEEDED: Final = 10122
STREAM_MOVE_AND_SCALE: Final = 10123
STREAM_MOVE_IN_PROGRESS: Final = 10124
CONSUMER_MAX_REQUEST_BATCH_EXCEEDED: Final = 10125
CONSUMER_REPLICAS_EXCEEDS_STREAM: Final = 10126
CONSUMER_NAME_CONTAINS_PATH_SEPARATORS: Final = 10127
STREAM_NAME_CONTAINS_PATH_SEPARATORS: Final = 10128
STREAM_RECONFIGURE_NOT_IN_PROGRESS: Final = 10129
STREAM_NAME_EXIST_RESTORE_FAILED: Final = 10130
CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH: Final = 10131
CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH: Final = 10132
REPLICAS_COUNT_CANNOT_BE_NEGATIVE: Final = 10133
CONSUMER_REPLICAS_SHOULD_MATCH_STREAM: Final = 10134
CONSUMER_METADATA_LENGTH: Final = 10135
CONSUMER_DUPLICATE_FILTER_SUBJECTS: Final = 10136
CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED: Final = 10137
CONSUMER_OVERLAPPING_SUBJECT_FILTERS: Final = 10138
CONSUMER_EMPTY_FILTER: Final = 10139
SOURCE_DUPLICATE_DETECTED: Final = 10140
SOURCE_INVALID_STREAM_NAME: Final = 10141
MIRROR_INVALID_STREAM_NAME: Final = 10142
MIRROR_WITH_FIRST_SEQ: Final = 10143
SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED: Final = 10144
SOURCE_INVALID_SUBJECT_FILTER: Final = 10145
SOURCE_INVALID_TRANSFORM_DESTINATION: Final = 10146
SOURCE_OVERLAPPING_SUBJECT_FILTERS: Final = 10147
CONSUMER_ALREADY_EXISTS: Final = 10148
CONSUMER_DOES_NOT_EXIST: Final = 10149
MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED: Final = 10150
MIRROR_INVALID_SUBJECT_FILTER: Final = 10151
MIRROR_OVERLAPPING_SUBJECT_FILTERS: Final = 10152
CONSUMER_INACTIVE_THRESHOLD_EXCESS: Final = 10153
MIRROR_INVALID_TRANSFORM_DESTINATION: Final = 10154
STREAM_TRANSFORM_INVALID_SOURCE: Final = 10155
STREAM_TRANSFORM_INVALID_DESTINATION: Final = 10156
PEDANTIC: Final = 10157
STREAM_DUPLICATE_MESSAGE_CONFLICT: Final = 10158
CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP: Final = 10159
CONSUMER_INVALID_PRIORITY_GROUP: Final = 10160
CONSUMER_EMPTY_GROUP_NAME: Final = 10161
CONSUMER_INVALID_GROUP_NAME: Final = 10162
STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_NOT_READY: Final = 10163
STREAM_WRONG_LAST_SEQUENCE_CONSTANT: Final = 10164
MESSAGE_TTL_INVALID: Final = 10165
MESSAGE_TTL_DISABLED: Final = 10166
STREAM_TOO_MANY_REQUESTS: Final = 10167
MESSAGE_INCR_DISABLED: Final = 10168
MESSAGE_INCR_MISSING: Final = 10169
MESSAGE_INCR_PAYLOAD: Final = 10170
MESSAGE_INCR_INVALID: Final = 10171
MESSAGE_COUNTER_BROKEN: Final = 10172
MIRROR_WITH_COUNTERS: Final = 10173
ATOMIC_PUBLISH_DISABLED: Final = 10174
ATOMIC_PUBLISH_MISSING_SEQ: Final = 10175
ATOMIC_PUBLISH_INCOMPLETE_BATCH: Final = 10176
ATOMIC_PUBLISH_UNSUPPORTED_HEADER_BATCH: Final = 10177
CONSUMER_PUSH_WITH_PRIORITY_GROUP: Final = 10178
ATOMIC_PUBLISH_INVALID_BATCH_ID: Final = 10179
STREAM_MIN_LAST_SEQ: Final = 10180
CONSUMER_ACK_POLICY_INVALID: Final = 10181
CONSUMER_REPLAY_POLICY_INVALID: Final = 10182
CONSUMER_ACK_WAIT_NEGATIVE: Final = 10183
CONSUMER_BACK_OFF_NEGATIVE: Final = 10184
REQUIRED_API_LEVEL: Final = 10185
MIRROR_WITH_MSG_SCHEDULES: Final = 10186
SOURCE_WITH_MSG_SCHEDULES: Final = 10187
MESSAGE_SCHEDULES_DISABLED: Final = 10188
MESSAGE_SCHEDULES_PATTERN_INVALID: Final = 10189
MESSAGE_SCHEDULES_TARGET_INVALID: Final = 10190
MESSAGE_SCHEDULES_TTL_INVALID: Final = 10191
MESSAGE_SCHEDULES_ROLLUP_INVALID: Final = 10192
STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID: Final = 10193
STREAM_OFFLINE_REASON: Final = 10194
CONSUMER_OFFLINE_REASON: Final = 10195
CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE: Final = 10196
CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE: Final = 10197
MIRROR_WITH_ATOMIC_PUBLISH: Final = 10198
ATOMIC_PUBLISH_TOO_LARGE_BATCH: Final = 10199
ATOMIC_PUBLISH_INVALID_BATCH_COMMIT: Final = 10200
ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE: Final = 10201
CLUSTER_SERVER_MEMBER_CHANGE_INFLIGHT: Final = 10202
MESSAGE_SCHEDULES_SOURCE_INVALID: Final = 10203
CONSUMER_INVALID_RESET: Final = 10204
BATCH_PUBLISH_DISABLED: Final = 10205
BATCH_PUBLISH_INVALID_PATTERN: Final = 10206
BATCH_PUBLISH_INVALID_BATCH_ID: Final = 10207
BATCH_PUBLISH_UNKNOWN_BATCH_ID: Final = 10208
MIRROR_WITH_BATCH_PUBLISH: Final = 10209
ATOMIC_PUBLISH_TOO_MANY_INFLIGHT: Final = 10210
BATCH_PUBLISH_TOO_MANY_INFLIGHT: Final = 10211
MESSAGE_SCHEDULES_SCHEDULER_INVALID: Final = 10212
MIRROR_DURABLE_CONSUMER_CFG_INVALID: Final = 10213
MIRROR_CONSUMER_REQUIRES_ACK_FC: Final = 10214
SOURCE_DURABLE_CONSUMER_CFG_INVALID: Final = 10215
SOURCE_DURABLE_CONSUMER_DUPLICATE_DETECTED: Final = 10216
SOURCE_CONSUMER_REQUIRES_ACK_FC: Final = 10217
CONSUMER_ACK_FC_REQUIRES_PUSH: Final = 10218
CONSUMER_ACK_FC_REQUIRES_FC: Final = 10219
CONSUMER_ACK_FC_REQUIRES_MAX_ACK_PENDING: Final = 10220
CONSUMER_ACK_FC_REQUIRES_NO_ACK_WAIT: Final = 10221
CONSUMER_ACK_FC_REQUIRES_NO_MAX_DELIVER: Final = 10222
MESSAGE_SCHEDULES_TIME_ZONE_INVALID: Final = 10223
CLUSTER_RESCUE: Final = 10224
CONSUMER_STREAM_IDENTITY_MISMATCH: Final = 10225
STREAM_RECONFIGURE_IN_PROGRESS: Final = 10226
MESSAGE_SOURCE_HDR_NOT_ALLOWED: Final = 10227

#: ``err_code -> ErrorEntry(http code, description template, Go constant)``.
CATALOGUE: Final[dict[int, ErrorEntry]] = {
    ACCOUNT_RESOURCES_EXCEEDED: ErrorEntry(
        (400, "resource limits exceeded for account", "JSAccountResourcesExceededErr")
    ),
    BAD_REQUEST: ErrorEntry((400, "bad request", "JSBadRequestErr")),
    CLUSTER_INCOMPLETE: ErrorEntry((503, "incomplete results", "JSClusterIncompleteErr")),
    CLUSTER_NO_PEERS: ErrorEntry((400, "{err}", "JSClusterNoPeersErrF")),
    CLUSTER_NOT_ACTIVE: ErrorEntry(
        (500, "JetStream not in clustered mode", "JSClusterNotActiveErr")
    ),
    CLUSTER_NOT_ASSIGNED: ErrorEntry(
        (500, "JetStream cluster not assigned to this server", "JSClusterNotAssignedErr")
    ),
    CLUSTER_NOT_AVAIL: ErrorEntry(
        (503, "JetStream system temporarily unavailable", "JSClusterNotAvailErr")
    ),
    CLUSTER_NOT_LEADER: ErrorEntry(
        (500, "JetStream cluster can not handle request", "JSClusterNotLeaderErr")
    ),
    CLUSTER_REQUIRED: ErrorEntry(
        (503, "JetStream clustering support required", "JSClusterRequiredErr")
    ),
    CLUSTER_TAGS: ErrorEntry(
        (400, "tags placement not supported for operation", "JSClusterTagsErr")
    ),
    CONSUMER_CREATE: ErrorEntry((500, "{err}", "JSConsumerCreateErrF")),
    CONSUMER_NAME_EXIST: ErrorEntry(
        (400, "consumer name already in use", "JSConsumerNameExistErr")
    ),
    CONSUMER_NOT_FOUND: ErrorEntry((404, "consumer not found", "JSConsumerNotFoundErr")),
    SNAPSHOT_DELIVER_SUBJECT_INVALID: ErrorEntry(
        (400, "deliver subject not valid", "JSSnapshotDeliverSubjectInvalidErr")
    ),
    CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT: ErrorEntry(
        (
            400,
            "consumer expected to be durable but no durable name set in subject",
            "JSConsumerDurableNameNotInSubjectErr",
        )
    ),
    CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT: ErrorEntry(
        (
            400,
            "consumer name in subject does not match durable name in request",
            "JSConsumerDurableNameNotMatchSubjectErr",
        )
    ),
    CONSUMER_DURABLE_NAME_NOT_SET: ErrorEntry(
        (
            400,
            "consumer expected to be durable but a durable name was not set",
            "JSConsumerDurableNameNotSetErr",
        )
    ),
    CONSUMER_EPHEMERAL_WITH_DURABLE_IN_SUBJECT: ErrorEntry(
        (
            400,
            "consumer expected to be ephemeral but detected a durable name set in subject",
            "JSConsumerEphemeralWithDurableInSubjectErr",
        )
    ),
    CONSUMER_EPHEMERAL_WITH_DURABLE_NAME: ErrorEntry(
        (
            400,
            "consumer expected to be ephemeral but a durable name was set in request",
            "JSConsumerEphemeralWithDurableNameErr",
        )
    ),
    STREAM_EXTERNAL_API_OVERLAP: ErrorEntry(
        (
            400,
            "stream external api prefix {prefix} must not overlap with {subject}",
            "JSStreamExternalApiOverlapErrF",
        )
    ),
    STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS: ErrorEntry(
        (
            400,
            "stream external delivery prefix {prefix} overlaps with stream subject {subject}",
            "JSStreamExternalDelPrefixOverlapsErrF",
        )
    ),
    INSUFFICIENT_RESOURCES: ErrorEntry(
        (503, "insufficient resources", "JSInsufficientResourcesErr")
    ),
    STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ: ErrorEntry(
        (
            400,
            "stream external delivery prefix {prefix} must not contain wildcards",
            "JSStreamInvalidExternalDeliverySubjErrF",
        )
    ),
    INVALID_JSON: ErrorEntry((400, "invalid JSON: {err}", "JSInvalidJSONErr")),
    MAXIMUM_CONSUMERS_LIMIT: ErrorEntry(
        (400, "maximum consumers limit reached", "JSMaximumConsumersLimitErr")
    ),
    MAXIMUM_STREAMS_LIMIT: ErrorEntry(
        (400, "maximum number of streams reached", "JSMaximumStreamsLimitErr")
    ),
    MEMORY_RESOURCES_EXCEEDED: ErrorEntry(
        (500, "insufficient memory resources available", "JSMemoryResourcesExceededErr")
    ),
    MIRROR_CONSUMER_SETUP_FAILED: ErrorEntry((500, "{err}", "JSMirrorConsumerSetupFailedErrF")),
    MIRROR_MAX_MESSAGE_SIZE_TOO_BIG: ErrorEntry(
        (
            400,
            "stream mirror must have max message size >= source",
            "JSMirrorMaxMessageSizeTooBigErr",
        )
    ),
    MIRROR_WITH_SOURCES: ErrorEntry(
        (400, "stream mirrors can not also contain other sources", "JSMirrorWithSourcesErr")
    ),
    MIRROR_WITH_START_SEQ_AND_TIME: ErrorEntry(
        (
            400,
            "stream mirrors can not have both start seq and start time configured",
            "JSMirrorWithStartSeqAndTimeErr",
        )
    ),
    MIRROR_WITH_SUBJECT_FILTERS: ErrorEntry(
        (400, "stream mirrors can not contain filtered subjects", "JSMirrorWithSubjectFiltersErr")
    ),
    MIRROR_WITH_SUBJECTS: ErrorEntry(
        (400, "stream mirrors can not contain subjects", "JSMirrorWithSubjectsErr")
    ),
    NO_ACCOUNT: ErrorEntry((503, "account not found", "JSNoAccountErr")),
    CLUSTER_UN_SUPPORT_FEATURE: ErrorEntry(
        (503, "not currently supported in clustered mode", "JSClusterUnSupportFeatureErr")
    ),
    NO_MESSAGE_FOUND: ErrorEntry((404, "no message found", "JSNoMessageFoundErr")),
    NOT_EMPTY_REQUEST: ErrorEntry(
        (400, "expected an empty request payload", "JSNotEmptyRequestErr")
    ),
    NOT_ENABLED_FOR_ACCOUNT: ErrorEntry(
        (503, "JetStream not enabled for account", "JSNotEnabledForAccountErr")
    ),
    CLUSTER_PEER_NOT_MEMBER: ErrorEntry((400, "peer not a member", "JSClusterPeerNotMemberErr")),
    RAFT_GENERAL: ErrorEntry((500, "{err}", "JSRaftGeneralErrF")),
    RESTORE_SUBSCRIBE_FAILED: ErrorEntry(
        (
            500,
            "JetStream unable to subscribe to restore snapshot {subject}: {err}",
            "JSRestoreSubscribeFailedErrF",
        )
    ),
    SEQUENCE_NOT_FOUND: ErrorEntry((400, "sequence {seq} not found", "JSSequenceNotFoundErrF")),
    CLUSTER_SERVER_NOT_MEMBER: ErrorEntry(
        (400, "server is not a member of the cluster", "JSClusterServerNotMemberErr")
    ),
    SOURCE_CONSUMER_SETUP_FAILED: ErrorEntry((500, "{err}", "JSSourceConsumerSetupFailedErrF")),
    SOURCE_MAX_MESSAGE_SIZE_TOO_BIG: ErrorEntry(
        (
            400,
            "stream source must have max message size >= target",
            "JSSourceMaxMessageSizeTooBigErr",
        )
    ),
    STORAGE_RESOURCES_EXCEEDED: ErrorEntry(
        (500, "insufficient storage resources available", "JSStorageResourcesExceededErr")
    ),
    STREAM_ASSIGNMENT: ErrorEntry((500, "{err}", "JSStreamAssignmentErrF")),
    STREAM_CREATE: ErrorEntry((500, "{err}", "JSStreamCreateErrF")),
    STREAM_DELETE: ErrorEntry((500, "{err}", "JSStreamDeleteErrF")),
    STREAM_GENERAL_ERROR: ErrorEntry((500, "{err}", "JSStreamGeneralErrorF")),
    STREAM_INVALID_CONFIG: ErrorEntry((500, "{err}", "JSStreamInvalidConfigF")),
    STREAM_LIMITS: ErrorEntry((500, "{err}", "JSStreamLimitsErrF")),
    STREAM_MESSAGE_EXCEEDS_MAXIMUM: ErrorEntry(
        (400, "message size exceeds maximum allowed", "JSStreamMessageExceedsMaximumErr")
    ),
    STREAM_MIRROR_NOT_UPDATABLE: ErrorEntry(
        (400, "stream mirror configuration can not be updated", "JSStreamMirrorNotUpdatableErr")
    ),
    STREAM_MISMATCH: ErrorEntry(
        (400, "stream name in subject does not match request", "JSStreamMismatchErr")
    ),
    STREAM_MSG_DELETE_FAILED: ErrorEntry((500, "{err}", "JSStreamMsgDeleteFailedF")),
    STREAM_NAME_EXIST: ErrorEntry(
        (400, "stream name already in use with a different configuration", "JSStreamNameExistErr")
    ),
    STREAM_NOT_FOUND: ErrorEntry((404, "stream not found", "JSStreamNotFoundErr")),
    STREAM_NOT_MATCH: ErrorEntry((400, "expected stream does not match", "JSStreamNotMatchErr")),
    STREAM_REPLICAS_NOT_UPDATABLE: ErrorEntry(
        (400, "Replicas configuration can not be updated", "JSStreamReplicasNotUpdatableErr")
    ),
    STREAM_RESTORE: ErrorEntry((500, "restore failed: {err}", "JSStreamRestoreErrF")),
    STREAM_SEQUENCE_NOT_MATCH: ErrorEntry(
        (503, "expected stream sequence does not match", "JSStreamSequenceNotMatchErr")
    ),
    STREAM_SNAPSHOT: ErrorEntry((500, "snapshot failed: {err}", "JSStreamSnapshotErrF")),
    STREAM_SUBJECT_OVERLAP: ErrorEntry(
        (400, "subjects overlap with an existing stream", "JSStreamSubjectOverlapErr")
    ),
    STREAM_TEMPLATE_CREATE: ErrorEntry((500, "{err}", "JSStreamTemplateCreateErrF")),
    STREAM_TEMPLATE_DELETE: ErrorEntry((500, "{err}", "JSStreamTemplateDeleteErrF")),
    STREAM_TEMPLATE_NOT_FOUND: ErrorEntry(
        (404, "template not found", "JSStreamTemplateNotFoundErr")
    ),
    STREAM_UPDATE: ErrorEntry((500, "{err}", "JSStreamUpdateErrF")),
    STREAM_WRONG_LAST_MSG_ID: ErrorEntry(
        (400, "wrong last msg ID: {id}", "JSStreamWrongLastMsgIDErrF")
    ),
    STREAM_WRONG_LAST_SEQUENCE: ErrorEntry(
        (400, "wrong last sequence: {seq}", "JSStreamWrongLastSequenceErrF")
    ),
    TEMP_STORAGE_FAILED: ErrorEntry(
        (500, "JetStream unable to open temp storage for restore", "JSTempStorageFailedErr")
    ),
    TEMPLATE_NAME_NOT_MATCH_SUBJECT: ErrorEntry(
        (400, "template name in subject does not match request", "JSTemplateNameNotMatchSubjectErr")
    ),
    STREAM_REPLICAS_NOT_SUPPORTED: ErrorEntry(
        (500, "replicas > 1 not supported in non-clustered mode", "JSStreamReplicasNotSupportedErr")
    ),
    PEER_REMAP: ErrorEntry((503, "peer remap failed", "JSPeerRemapErr")),
    NOT_ENABLED: ErrorEntry((503, "JetStream not enabled", "JSNotEnabledErr")),
    STREAM_STORE_FAILED: ErrorEntry((503, "{err}", "JSStreamStoreFailedF")),
    CONSUMER_CONFIG_REQUIRED: ErrorEntry(
        (400, "consumer config required", "JSConsumerConfigRequiredErr")
    ),
    CONSUMER_DELIVER_TO_WILDCARDS: ErrorEntry(
        (400, "consumer deliver subject has wildcards", "JSConsumerDeliverToWildcardsErr")
    ),
    CONSUMER_PUSH_MAX_WAITING: ErrorEntry(
        (400, "consumer in push mode can not set max waiting", "JSConsumerPushMaxWaitingErr")
    ),
    CONSUMER_DELIVER_CYCLE: ErrorEntry(
        (400, "consumer deliver subject forms a cycle", "JSConsumerDeliverCycleErr")
    ),
    CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED: ErrorEntry(
        (
            400,
            "consumer requires ack policy for max ack pending",
            "JSConsumerMaxPendingAckPolicyRequiredErr",
        )
    ),
    CONSUMER_SMALL_HEARTBEAT: ErrorEntry(
        (400, "consumer idle heartbeat needs to be >= 100ms", "JSConsumerSmallHeartbeatErr")
    ),
    CONSUMER_PULL_REQUIRES_ACK: ErrorEntry(
        (
            400,
            "consumer in pull mode requires explicit ack policy on workqueue stream",
            "JSConsumerPullRequiresAckErr",
        )
    ),
    CONSUMER_PULL_NOT_DURABLE: ErrorEntry(
        (400, "consumer in pull mode requires a durable name", "JSConsumerPullNotDurableErr")
    ),
    CONSUMER_PULL_WITH_RATE_LIMIT: ErrorEntry(
        (400, "consumer in pull mode can not have rate limit set", "JSConsumerPullWithRateLimitErr")
    ),
    CONSUMER_MAX_WAITING_NEGATIVE: ErrorEntry(
        (400, "consumer max waiting needs to be positive", "JSConsumerMaxWaitingNegativeErr")
    ),
    CONSUMER_HB_REQUIRES_PUSH: ErrorEntry(
        (
            400,
            "consumer idle heartbeat requires a push based consumer",
            "JSConsumerHBRequiresPushErr",
        )
    ),
    CONSUMER_FC_REQUIRES_PUSH: ErrorEntry(
        (400, "consumer flow control requires a push based consumer", "JSConsumerFCRequiresPushErr")
    ),
    CONSUMER_DIRECT_REQUIRES_PUSH: ErrorEntry(
        (400, "consumer direct requires a push based consumer", "JSConsumerDirectRequiresPushErr")
    ),
    CONSUMER_DIRECT_REQUIRES_EPHEMERAL: ErrorEntry(
        (
            400,
            "consumer direct requires an ephemeral consumer",
            "JSConsumerDirectRequiresEphemeralErr",
        )
    ),
    CONSUMER_ON_MAPPED: ErrorEntry(
        (400, "consumer direct on a mapped consumer", "JSConsumerOnMappedErr")
    ),
    CONSUMER_FILTER_NOT_SUBSET: ErrorEntry(
        (
            400,
            "consumer filter subject is not a valid subset of the interest subjects",
            "JSConsumerFilterNotSubsetErr",
        )
    ),
    CONSUMER_INVALID_POLICY: ErrorEntry((400, "{err}", "JSConsumerInvalidPolicyErrF")),
    CONSUMER_INVALID_SAMPLING: ErrorEntry(
        (
            400,
            "failed to parse consumer sampling configuration: {err}",
            "JSConsumerInvalidSamplingErrF",
        )
    ),
    STREAM_INVALID: ErrorEntry((500, "stream not valid", "JSStreamInvalidErr")),
    STREAM_HEADER_EXCEEDS_MAXIMUM: ErrorEntry(
        (400, "header size exceeds maximum allowed of 64k", "JSStreamHeaderExceedsMaximumErr")
    ),
    CONSUMER_WQ_REQUIRES_EXPLICIT_ACK: ErrorEntry(
        (400, "workqueue stream requires explicit ack", "JSConsumerWQRequiresExplicitAckErr")
    ),
    CONSUMER_WQ_MULTIPLE_UNFILTERED: ErrorEntry(
        (
            400,
            "multiple non-filtered consumers not allowed on workqueue stream",
            "JSConsumerWQMultipleUnfilteredErr",
        )
    ),
    CONSUMER_WQ_CONSUMER_NOT_UNIQUE: ErrorEntry(
        (
            400,
            "filtered consumer not unique on workqueue stream",
            "JSConsumerWQConsumerNotUniqueErr",
        )
    ),
    CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL: ErrorEntry(
        (
            400,
            "consumer must be deliver all on workqueue stream",
            "JSConsumerWQConsumerNotDeliverAllErr",
        )
    ),
    CONSUMER_NAME_TOO_LONG: ErrorEntry(
        (400, "consumer name is too long, maximum allowed is {max}", "JSConsumerNameTooLongErrF")
    ),
    CONSUMER_BAD_DURABLE_NAME: ErrorEntry(
        (400, "durable name can not contain '.', '*', '>'", "JSConsumerBadDurableNameErr")
    ),
    CONSUMER_STORE_FAILED: ErrorEntry(
        (500, "error creating store for consumer: {err}", "JSConsumerStoreFailedErrF")
    ),
    CONSUMER_EXISTING_ACTIVE: ErrorEntry(
        (400, "consumer already exists and is still active", "JSConsumerExistingActiveErr")
    ),
    CONSUMER_REPLACEMENT_WITH_DIFFERENT_NAME: ErrorEntry(
        (
            400,
            "consumer replacement durable config not the same",
            "JSConsumerReplacementWithDifferentNameErr",
        )
    ),
    CONSUMER_DESCRIPTION_TOO_LONG: ErrorEntry(
        (
            400,
            "consumer description is too long, maximum allowed is {max}",
            "JSConsumerDescriptionTooLongErrF",
        )
    ),
    CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS: ErrorEntry(
        (
            400,
            "consumer with flow control also needs heartbeats",
            "JSConsumerWithFlowControlNeedsHeartbeats",
        )
    ),
    STREAM_SEALED: ErrorEntry((400, "invalid operation on sealed stream", "JSStreamSealedErr")),
    STREAM_PURGE_FAILED: ErrorEntry((500, "{err}", "JSStreamPurgeFailedF")),
    STREAM_ROLLUP_FAILED: ErrorEntry((500, "{err}", "JSStreamRollupFailedF")),
    CONSUMER_INVALID_DELIVER_SUBJECT: ErrorEntry(
        (400, "invalid push consumer deliver subject", "JSConsumerInvalidDeliverSubject")
    ),
    STREAM_MAX_BYTES_REQUIRED: ErrorEntry(
        (400, "account requires a stream config to have max bytes set", "JSStreamMaxBytesRequired")
    ),
    CONSUMER_MAX_REQUEST_BATCH_NEGATIVE: ErrorEntry(
        (400, "consumer max request batch needs to be > 0", "JSConsumerMaxRequestBatchNegativeErr")
    ),
    CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL: ErrorEntry(
        (
            400,
            "consumer max request expires needs to be >= 1ms",
            "JSConsumerMaxRequestExpiresTooSmall",
        )
    ),
    CONSUMER_MAX_DELIVER_BACKOFF: ErrorEntry(
        (
            400,
            "max deliver is required to be > length of backoff values",
            "JSConsumerMaxDeliverBackoffErr",
        )
    ),
    STREAM_INFO_MAX_SUBJECTS: ErrorEntry(
        (500, "subject details would exceed maximum allowed", "JSStreamInfoMaxSubjectsErr")
    ),
    STREAM_OFFLINE: ErrorEntry((500, "stream is offline", "JSStreamOfflineErr")),
    CONSUMER_OFFLINE: ErrorEntry((500, "consumer is offline", "JSConsumerOfflineErr")),
    NO_LIMITS: ErrorEntry(
        (400, "no JetStream default or applicable tiered limit present", "JSNoLimitsErr")
    ),
    CONSUMER_MAX_PENDING_ACK_EXCESS: ErrorEntry(
        (
            400,
            "consumer max ack pending exceeds system limit of {limit}",
            "JSConsumerMaxPendingAckExcessErrF",
        )
    ),
    STREAM_MAX_STREAM_BYTES_EXCEEDED: ErrorEntry(
        (
            400,
            "stream max bytes exceeds account limit max stream bytes",
            "JSStreamMaxStreamBytesExceeded",
        )
    ),
    STREAM_MOVE_AND_SCALE: ErrorEntry(
        (400, "can not move and scale a stream in a single update", "JSStreamMoveAndScaleErr")
    ),
    STREAM_MOVE_IN_PROGRESS: ErrorEntry(
        (400, "stream move already in progress", "JSStreamMoveInProgressErr")
    ),
    CONSUMER_MAX_REQUEST_BATCH_EXCEEDED: ErrorEntry(
        (
            400,
            "consumer max request batch exceeds server limit of {limit}",
            "JSConsumerMaxRequestBatchExceededF",
        )
    ),
    CONSUMER_REPLICAS_EXCEEDS_STREAM: ErrorEntry(
        (
            400,
            "consumer config replica count exceeds parent stream",
            "JSConsumerReplicasExceedsStream",
        )
    ),
    CONSUMER_NAME_CONTAINS_PATH_SEPARATORS: ErrorEntry(
        (
            400,
            "Consumer name can not contain path separators",
            "JSConsumerNameContainsPathSeparatorsErr",
        )
    ),
    STREAM_NAME_CONTAINS_PATH_SEPARATORS: ErrorEntry(
        (
            400,
            "Stream name can not contain path separators",
            "JSStreamNameContainsPathSeparatorsErr",
        )
    ),
    STREAM_RECONFIGURE_NOT_IN_PROGRESS: ErrorEntry(
        (400, "stream reconfiguration not in progress", "JSStreamReconfigureNotInProgressErr")
    ),
    STREAM_NAME_EXIST_RESTORE_FAILED: ErrorEntry(
        (400, "stream name already in use, cannot restore", "JSStreamNameExistRestoreFailedErr")
    ),
    CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH: ErrorEntry(
        (
            400,
            "Consumer create request did not match filtered subject from create subject",
            "JSConsumerCreateFilterSubjectMismatchErr",
        )
    ),
    CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH: ErrorEntry(
        (
            400,
            "Consumer Durable and Name have to be equal if both are provided",
            "JSConsumerCreateDurableAndNameMismatch",
        )
    ),
    REPLICAS_COUNT_CANNOT_BE_NEGATIVE: ErrorEntry(
        (400, "replicas count cannot be negative", "JSReplicasCountCannotBeNegative")
    ),
    CONSUMER_REPLICAS_SHOULD_MATCH_STREAM: ErrorEntry(
        (
            400,
            "consumer config replicas must match interest retention stream's replicas",
            "JSConsumerReplicasShouldMatchStream",
        )
    ),
    CONSUMER_METADATA_LENGTH: ErrorEntry(
        (400, "consumer metadata exceeds maximum size of {limit}", "JSConsumerMetadataLengthErrF")
    ),
    CONSUMER_DUPLICATE_FILTER_SUBJECTS: ErrorEntry(
        (
            400,
            "consumer cannot have both FilterSubject and FilterSubjects specified",
            "JSConsumerDuplicateFilterSubjects",
        )
    ),
    CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED: ErrorEntry(
        (
            400,
            "consumer with multiple subject filters cannot use subject based API",
            "JSConsumerMultipleFiltersNotAllowed",
        )
    ),
    CONSUMER_OVERLAPPING_SUBJECT_FILTERS: ErrorEntry(
        (400, "consumer subject filters cannot overlap", "JSConsumerOverlappingSubjectFilters")
    ),
    CONSUMER_EMPTY_FILTER: ErrorEntry(
        (400, "consumer filter in FilterSubjects cannot be empty", "JSConsumerEmptyFilter")
    ),
    SOURCE_DUPLICATE_DETECTED: ErrorEntry(
        (400, "duplicate source configuration detected", "JSSourceDuplicateDetected")
    ),
    SOURCE_INVALID_STREAM_NAME: ErrorEntry(
        (400, "sourced stream name is invalid", "JSSourceInvalidStreamName")
    ),
    MIRROR_INVALID_STREAM_NAME: ErrorEntry(
        (400, "mirrored stream name is invalid", "JSMirrorInvalidStreamName")
    ),
    MIRROR_WITH_FIRST_SEQ: ErrorEntry(
        (400, "stream mirrors can not have first sequence configured", "JSMirrorWithFirstSeqErr")
    ),
    SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED: ErrorEntry(
        (
            400,
            "source with multiple subject transforms cannot also have a single subject filter",
            "JSSourceMultipleFiltersNotAllowed",
        )
    ),
    SOURCE_INVALID_SUBJECT_FILTER: ErrorEntry(
        (400, "source transform source: {err}", "JSSourceInvalidSubjectFilter")
    ),
    SOURCE_INVALID_TRANSFORM_DESTINATION: ErrorEntry(
        (400, "source transform: {err}", "JSSourceInvalidTransformDestination")
    ),
    SOURCE_OVERLAPPING_SUBJECT_FILTERS: ErrorEntry(
        (400, "source filters can not overlap", "JSSourceOverlappingSubjectFilters")
    ),
    CONSUMER_ALREADY_EXISTS: ErrorEntry(
        (400, "consumer already exists", "JSConsumerAlreadyExists")
    ),
    CONSUMER_DOES_NOT_EXIST: ErrorEntry((400, "consumer does not exist", "JSConsumerDoesNotExist")),
    MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED: ErrorEntry(
        (
            400,
            "mirror with multiple subject transforms cannot also have a single subject filter",
            "JSMirrorMultipleFiltersNotAllowed",
        )
    ),
    MIRROR_INVALID_SUBJECT_FILTER: ErrorEntry(
        (400, "mirror transform source: {err}", "JSMirrorInvalidSubjectFilter")
    ),
    MIRROR_OVERLAPPING_SUBJECT_FILTERS: ErrorEntry(
        (400, "mirror subject filters can not overlap", "JSMirrorOverlappingSubjectFilters")
    ),
    CONSUMER_INACTIVE_THRESHOLD_EXCESS: ErrorEntry(
        (
            400,
            "consumer inactive threshold exceeds system limit of {limit}",
            "JSConsumerInactiveThresholdExcess",
        )
    ),
    MIRROR_INVALID_TRANSFORM_DESTINATION: ErrorEntry(
        (400, "mirror transform: {err}", "JSMirrorInvalidTransformDestination")
    ),
    STREAM_TRANSFORM_INVALID_SOURCE: ErrorEntry(
        (400, "stream transform source: {err}", "JSStreamTransformInvalidSource")
    ),
    STREAM_TRANSFORM_INVALID_DESTINATION: ErrorEntry(
        (400, "stream transform: {err}", "JSStreamTransformInvalidDestination")
    ),
    PEDANTIC: ErrorEntry((400, "pedantic mode: {err}", "JSPedanticErrF")),
    STREAM_DUPLICATE_MESSAGE_CONFLICT: ErrorEntry(
        (409, "duplicate message id is in process", "JSStreamDuplicateMessageConflict")
    ),
    CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP: ErrorEntry(
        (
            400,
            "Setting PriorityPolicy requires at least one PriorityGroup to be set",
            "JSConsumerPriorityPolicyWithoutGroup",
        )
    ),
    CONSUMER_INVALID_PRIORITY_GROUP: ErrorEntry(
        (
            400,
            "Provided priority group does not exist for this consumer",
            "JSConsumerInvalidPriorityGroupErr",
        )
    ),
    CONSUMER_EMPTY_GROUP_NAME: ErrorEntry(
        (400, "Group name cannot be an empty string", "JSConsumerEmptyGroupName")
    ),
    CONSUMER_INVALID_GROUP_NAME: ErrorEntry(
        (
            400,
            "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters",
            "JSConsumerInvalidGroupNameErr",
        )
    ),
    STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_NOT_READY: ErrorEntry(
        (
            503,
            "expected last sequence per subject temporarily unavailable",
            "JSStreamExpectedLastSeqPerSubjectNotReady",
        )
    ),
    STREAM_WRONG_LAST_SEQUENCE_CONSTANT: ErrorEntry(
        (400, "wrong last sequence", "JSStreamWrongLastSequenceConstantErr")
    ),
    MESSAGE_TTL_INVALID: ErrorEntry((400, "invalid per-message TTL", "JSMessageTTLInvalidErr")),
    MESSAGE_TTL_DISABLED: ErrorEntry(
        (400, "per-message TTL is disabled", "JSMessageTTLDisabledErr")
    ),
    STREAM_TOO_MANY_REQUESTS: ErrorEntry((429, "too many requests", "JSStreamTooManyRequests")),
    MESSAGE_INCR_DISABLED: ErrorEntry(
        (400, "message counters is disabled", "JSMessageIncrDisabledErr")
    ),
    MESSAGE_INCR_MISSING: ErrorEntry(
        (400, "message counter increment is missing", "JSMessageIncrMissingErr")
    ),
    MESSAGE_INCR_PAYLOAD: ErrorEntry(
        (400, "message counter has payload", "JSMessageIncrPayloadErr")
    ),
    MESSAGE_INCR_INVALID: ErrorEntry(
        (400, "message counter increment is invalid", "JSMessageIncrInvalidErr")
    ),
    MESSAGE_COUNTER_BROKEN: ErrorEntry(
        (400, "message counter is broken", "JSMessageCounterBrokenErr")
    ),
    MIRROR_WITH_COUNTERS: ErrorEntry(
        (400, "stream mirrors can not also calculate counters", "JSMirrorWithCountersErr")
    ),
    ATOMIC_PUBLISH_DISABLED: ErrorEntry(
        (400, "atomic publish is disabled", "JSAtomicPublishDisabledErr")
    ),
    ATOMIC_PUBLISH_MISSING_SEQ: ErrorEntry(
        (400, "atomic publish sequence is missing", "JSAtomicPublishMissingSeqErr")
    ),
    ATOMIC_PUBLISH_INCOMPLETE_BATCH: ErrorEntry(
        (400, "atomic publish batch is incomplete", "JSAtomicPublishIncompleteBatchErr")
    ),
    ATOMIC_PUBLISH_UNSUPPORTED_HEADER_BATCH: ErrorEntry(
        (
            400,
            "atomic publish unsupported header used: {header}",
            "JSAtomicPublishUnsupportedHeaderBatchErr",
        )
    ),
    CONSUMER_PUSH_WITH_PRIORITY_GROUP: ErrorEntry(
        (
            400,
            "priority groups can not be used with push consumers",
            "JSConsumerPushWithPriorityGroupErr",
        )
    ),
    ATOMIC_PUBLISH_INVALID_BATCH_ID: ErrorEntry(
        (400, "atomic publish batch ID is invalid", "JSAtomicPublishInvalidBatchIDErr")
    ),
    STREAM_MIN_LAST_SEQ: ErrorEntry((412, "min last sequence", "JSStreamMinLastSeqErr")),
    CONSUMER_ACK_POLICY_INVALID: ErrorEntry(
        (400, "consumer ack policy invalid", "JSConsumerAckPolicyInvalidErr")
    ),
    CONSUMER_REPLAY_POLICY_INVALID: ErrorEntry(
        (400, "consumer replay policy invalid", "JSConsumerReplayPolicyInvalidErr")
    ),
    CONSUMER_ACK_WAIT_NEGATIVE: ErrorEntry(
        (400, "consumer ack wait needs to be positive", "JSConsumerAckWaitNegativeErr")
    ),
    CONSUMER_BACK_OFF_NEGATIVE: ErrorEntry(
        (400, "consumer backoff needs to be positive", "JSConsumerBackOffNegativeErr")
    ),
    REQUIRED_API_LEVEL: ErrorEntry(
        (412, "JetStream minimum api level required", "JSRequiredApiLevelErr")
    ),
    MIRROR_WITH_MSG_SCHEDULES: ErrorEntry(
        (400, "stream mirrors can not also schedule messages", "JSMirrorWithMsgSchedulesErr")
    ),
    SOURCE_WITH_MSG_SCHEDULES: ErrorEntry(
        (400, "stream source can not also schedule messages", "JSSourceWithMsgSchedulesErr")
    ),
    MESSAGE_SCHEDULES_DISABLED: ErrorEntry(
        (400, "message schedules is disabled", "JSMessageSchedulesDisabledErr")
    ),
    MESSAGE_SCHEDULES_PATTERN_INVALID: ErrorEntry(
        (400, "message schedules pattern is invalid", "JSMessageSchedulesPatternInvalidErr")
    ),
    MESSAGE_SCHEDULES_TARGET_INVALID: ErrorEntry(
        (400, "message schedules target is invalid", "JSMessageSchedulesTargetInvalidErr")
    ),
    MESSAGE_SCHEDULES_TTL_INVALID: ErrorEntry(
        (400, "message schedules invalid per-message TTL", "JSMessageSchedulesTTLInvalidErr")
    ),
    MESSAGE_SCHEDULES_ROLLUP_INVALID: ErrorEntry(
        (400, "message schedules invalid rollup", "JSMessageSchedulesRollupInvalidErr")
    ),
    STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID: ErrorEntry(
        (
            400,
            "missing sequence for expected last sequence per subject",
            "JSStreamExpectedLastSeqPerSubjectInvalid",
        )
    ),
    STREAM_OFFLINE_REASON: ErrorEntry(
        (500, "stream is offline: {err}", "JSStreamOfflineReasonErrF")
    ),
    CONSUMER_OFFLINE_REASON: ErrorEntry(
        (500, "consumer is offline: {err}", "JSConsumerOfflineReasonErrF")
    ),
    CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE: ErrorEntry(
        (
            400,
            "consumer can not have priority groups when policy is none",
            "JSConsumerPriorityGroupWithPolicyNone",
        )
    ),
    CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE: ErrorEntry(
        (
            400,
            "PinnedTTL cannot be set when PriorityPolicy is none",
            "JSConsumerPinnedTTLWithoutPriorityPolicyNone",
        )
    ),
    MIRROR_WITH_ATOMIC_PUBLISH: ErrorEntry(
        (400, "stream mirrors can not also use atomic publishing", "JSMirrorWithAtomicPublishErr")
    ),
    ATOMIC_PUBLISH_TOO_LARGE_BATCH: ErrorEntry(
        (400, "atomic publish batch is too large: {size}", "JSAtomicPublishTooLargeBatchErrF")
    ),
    ATOMIC_PUBLISH_INVALID_BATCH_COMMIT: ErrorEntry(
        (400, "atomic publish batch commit is invalid", "JSAtomicPublishInvalidBatchCommitErr")
    ),
    ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE: ErrorEntry(
        (
            400,
            "atomic publish batch contains duplicate message id",
            "JSAtomicPublishContainsDuplicateMessageErr",
        )
    ),
    CLUSTER_SERVER_MEMBER_CHANGE_INFLIGHT: ErrorEntry(
        (400, "cluster member change is in progress", "JSClusterServerMemberChangeInflightErr")
    ),
    MESSAGE_SCHEDULES_SOURCE_INVALID: ErrorEntry(
        (400, "message schedules source is invalid", "JSMessageSchedulesSourceInvalidErr")
    ),
    CONSUMER_INVALID_RESET: ErrorEntry((400, "invalid reset: {err}", "JSConsumerInvalidResetErr")),
    BATCH_PUBLISH_DISABLED: ErrorEntry(
        (400, "batch publish is disabled", "JSBatchPublishDisabledErr")
    ),
    BATCH_PUBLISH_INVALID_PATTERN: ErrorEntry(
        (400, "batch publish pattern is invalid", "JSBatchPublishInvalidPatternErr")
    ),
    BATCH_PUBLISH_INVALID_BATCH_ID: ErrorEntry(
        (400, "batch publish ID is invalid", "JSBatchPublishInvalidBatchIDErr")
    ),
    BATCH_PUBLISH_UNKNOWN_BATCH_ID: ErrorEntry(
        (400, "batch publish ID unknown", "JSBatchPublishUnknownBatchIDErr")
    ),
    MIRROR_WITH_BATCH_PUBLISH: ErrorEntry(
        (400, "stream mirrors can not also use batch publishing", "JSMirrorWithBatchPublishErr")
    ),
    ATOMIC_PUBLISH_TOO_MANY_INFLIGHT: ErrorEntry(
        (429, "atomic publish too many inflight", "JSAtomicPublishTooManyInflight")
    ),
    BATCH_PUBLISH_TOO_MANY_INFLIGHT: ErrorEntry(
        (429, "batch publish too many inflight", "JSBatchPublishTooManyInflight")
    ),
    MESSAGE_SCHEDULES_SCHEDULER_INVALID: ErrorEntry(
        (400, "message schedules invalid scheduler", "JSMessageSchedulesSchedulerInvalidErr")
    ),
    MIRROR_DURABLE_CONSUMER_CFG_INVALID: ErrorEntry(
        (400, "stream mirror consumer config is invalid", "JSMirrorDurableConsumerCfgInvalid")
    ),
    MIRROR_CONSUMER_REQUIRES_ACK_FC: ErrorEntry(
        (
            400,
            "stream mirror consumer requires flow control ack policy",
            "JSMirrorConsumerRequiresAckFCErr",
        )
    ),
    SOURCE_DURABLE_CONSUMER_CFG_INVALID: ErrorEntry(
        (400, "stream source consumer config is invalid", "JSSourceDurableConsumerCfgInvalid")
    ),
    SOURCE_DURABLE_CONSUMER_DUPLICATE_DETECTED: ErrorEntry(
        (
            400,
            "duplicate stream source consumer detected",
            "JSSourceDurableConsumerDuplicateDetected",
        )
    ),
    SOURCE_CONSUMER_REQUIRES_ACK_FC: ErrorEntry(
        (
            400,
            "stream source consumer requires flow control ack policy",
            "JSSourceConsumerRequiresAckFCErr",
        )
    ),
    CONSUMER_ACK_FC_REQUIRES_PUSH: ErrorEntry(
        (
            400,
            "flow control ack policy requires a push based consumer",
            "JSConsumerAckFCRequiresPushErr",
        )
    ),
    CONSUMER_ACK_FC_REQUIRES_FC: ErrorEntry(
        (400, "flow control ack policy requires flow control", "JSConsumerAckFCRequiresFCErr")
    ),
    CONSUMER_ACK_FC_REQUIRES_MAX_ACK_PENDING: ErrorEntry(
        (
            400,
            "flow control ack policy requires max ack pending",
            "JSConsumerAckFCRequiresMaxAckPendingErr",
        )
    ),
    CONSUMER_ACK_FC_REQUIRES_NO_ACK_WAIT: ErrorEntry(
        (
            400,
            "flow control ack policy requires unset ack wait",
            "JSConsumerAckFCRequiresNoAckWaitErr",
        )
    ),
    CONSUMER_ACK_FC_REQUIRES_NO_MAX_DELIVER: ErrorEntry(
        (
            400,
            "flow control ack policy requires unset max deliver",
            "JSConsumerAckFCRequiresNoMaxDeliverErr",
        )
    ),
    MESSAGE_SCHEDULES_TIME_ZONE_INVALID: ErrorEntry(
        (400, "message schedules time zone is invalid", "JSMessageSchedulesTimeZoneInvalidErr")
    ),
    CLUSTER_RESCUE: ErrorEntry(
        (400, "JetStream system rescue not applied: {err}", "JSClusterRescueErr")
    ),
    CONSUMER_STREAM_IDENTITY_MISMATCH: ErrorEntry(
        (
            400,
            "consumer's stream identity does not match: {msg}",
            "JSConsumerStreamIdentityMismatchF",
        )
    ),
    STREAM_RECONFIGURE_IN_PROGRESS: ErrorEntry(
        (400, "stream reconfiguration already in progress", "JSStreamReconfigureInProgressErr")
    ),
    MESSAGE_SOURCE_HDR_NOT_ALLOWED: ErrorEntry(
        (400, "message stream source header is not allowed", "JSMessageSourceHdrNotAllowedErr")
    ),
}


def go_json(value: object) -> str:
    """Compact JSON as Go's ``encoding/json`` writes it.

    Go escapes ``<``, ``>``, ``&`` as ``\\u003c``, ``\\u003e``, ``\\u0026`` and
    U+2028/U+2029, and writes other non-ASCII characters verbatim (UTF-8).
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return _go_escape(text)


def _go_escape(text: str) -> str:
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


class JSApiError(Exception):
    """A JetStream API error answer.

    Args:
        err_code: One of the catalogue's codes (``STREAM_NOT_FOUND`` …).
        **fmt: Placeholder values, e.g. ``err="max age needs to be >= 100ms"``.

    Attributes:
        code: HTTP-like status code.
        err_code: NATS error code.
        description: The rendered description.

    Raises:
        KeyError: ``err_code`` is not in the catalogue.
    """

    def __init__(self, err_code: int, **fmt: object) -> None:
        entry = CATALOGUE[err_code]
        description = entry.template
        for key, value in fmt.items():
            description = description.replace("{" + key + "}", str(value))
        super().__init__(description)
        self.code: int = entry.code
        self.err_code: int = err_code
        self.description: str = description

    def to_dict(self) -> dict[str, object]:
        """``{"code":…, "err_code":…, "description":…}`` in nats-server's key order."""
        return {"code": self.code, "err_code": self.err_code, "description": self.description}

    def error_json(self) -> str:
        """The ``error`` object exactly as nats-server writes it."""
        return go_json(self.to_dict())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JSApiError):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.code, self.err_code, self.description))

    def __repr__(self) -> str:
        return f"JSApiError({self.err_code}, {self.description!r})"
