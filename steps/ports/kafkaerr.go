package ports

import (
	"fmt"
	"strconv"
	"strings"
)

// KafkaErr is a Kafka protocol error code, as a broker puts it in a
// response (Kafka's org.apache.kafka.common.protocol.Errors; franz-go's
// kerr). Its text is Kafka's name for it ("UNKNOWN_TOPIC_OR_PARTITION"),
// which is what the JSON of a view carries; the zero value is NONE, which
// a field tagged omitempty leaves out.
type KafkaErr int16

// The codes kremedy tells apart. Every other code still has its name
// (String), only no constant.
const (
	KafkaUnknownServerError       KafkaErr = -1
	KafkaNone                     KafkaErr = 0
	KafkaUnknownTopicOrPartition  KafkaErr = 3
	KafkaLeaderNotAvailable       KafkaErr = 5
	KafkaNotLeaderOrFollower      KafkaErr = 6
	KafkaReplicaNotAvailable      KafkaErr = 9
	KafkaInvalidTopic             KafkaErr = 17
	KafkaTopicAuthorizationFailed KafkaErr = 29
	KafkaListenerNotFound         KafkaErr = 72
	KafkaInconsistentTopicID      KafkaErr = 103
)

// String is Kafka's name for the code: "NONE" for none, and
// KAFKA_ERROR_<code> for a code newer than this table.
func (e KafkaErr) String() string {
	switch {
	case e == KafkaNone:
		return "NONE"
	case e == KafkaUnknownServerError:
		return "UNKNOWN_SERVER_ERROR"
	case e > 0 && int(e) < len(kafkaErrNames) && kafkaErrNames[e] != "":
		return kafkaErrNames[e]
	}
	return fmt.Sprintf("KAFKA_ERROR_%d", int16(e))
}

// MarshalText writes the code's name.
func (e KafkaErr) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText reads a name String writes, "" (none, as views written
// before the code was typed say it), and NOT_LEADER_FOR_PARTITION (code 6's
// older name, which franz-go keeps).
func (e *KafkaErr) UnmarshalText(b []byte) error {
	s := string(b)
	switch s {
	case "", "NONE":
		*e = KafkaNone
		return nil
	case "UNKNOWN_SERVER_ERROR":
		*e = KafkaUnknownServerError
		return nil
	case "NOT_LEADER_FOR_PARTITION":
		*e = KafkaNotLeaderOrFollower
		return nil
	}
	if n, ok := strings.CutPrefix(s, "KAFKA_ERROR_"); ok {
		if c, err := strconv.ParseInt(n, 10, 16); err == nil {
			*e = KafkaErr(c)
			return nil
		}
	}
	for c, name := range kafkaErrNames {
		if name != "" && name == s {
			*e = KafkaErr(c)
			return nil
		}
	}
	return fmt.Errorf("%q is not the name of a Kafka error code", s)
}

// kafkaErrNames are Kafka's error names by code (1 on), as franz-go's kerr
// (v1.22.3) has them, except code 6: Kafka names it NOT_LEADER_OR_FOLLOWER
// (Errors.java; its older name, which kerr keeps, is NOT_LEADER_FOR_PARTITION).
// steps/kafka's TestKafkaErrNames holds the table to kerr.
var kafkaErrNames = [...]string{
	1:   "OFFSET_OUT_OF_RANGE",
	2:   "CORRUPT_MESSAGE",
	3:   "UNKNOWN_TOPIC_OR_PARTITION",
	4:   "INVALID_FETCH_SIZE",
	5:   "LEADER_NOT_AVAILABLE",
	6:   "NOT_LEADER_OR_FOLLOWER",
	7:   "REQUEST_TIMED_OUT",
	8:   "BROKER_NOT_AVAILABLE",
	9:   "REPLICA_NOT_AVAILABLE",
	10:  "MESSAGE_TOO_LARGE",
	11:  "STALE_CONTROLLER_EPOCH",
	12:  "OFFSET_METADATA_TOO_LARGE",
	13:  "NETWORK_EXCEPTION",
	14:  "COORDINATOR_LOAD_IN_PROGRESS",
	15:  "COORDINATOR_NOT_AVAILABLE",
	16:  "NOT_COORDINATOR",
	17:  "INVALID_TOPIC_EXCEPTION",
	18:  "RECORD_LIST_TOO_LARGE",
	19:  "NOT_ENOUGH_REPLICAS",
	20:  "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
	21:  "INVALID_REQUIRED_ACKS",
	22:  "ILLEGAL_GENERATION",
	23:  "INCONSISTENT_GROUP_PROTOCOL",
	24:  "INVALID_GROUP_ID",
	25:  "UNKNOWN_MEMBER_ID",
	26:  "INVALID_SESSION_TIMEOUT",
	27:  "REBALANCE_IN_PROGRESS",
	28:  "INVALID_COMMIT_OFFSET_SIZE",
	29:  "TOPIC_AUTHORIZATION_FAILED",
	30:  "GROUP_AUTHORIZATION_FAILED",
	31:  "CLUSTER_AUTHORIZATION_FAILED",
	32:  "INVALID_TIMESTAMP",
	33:  "UNSUPPORTED_SASL_MECHANISM",
	34:  "ILLEGAL_SASL_STATE",
	35:  "UNSUPPORTED_VERSION",
	36:  "TOPIC_ALREADY_EXISTS",
	37:  "INVALID_PARTITIONS",
	38:  "INVALID_REPLICATION_FACTOR",
	39:  "INVALID_REPLICA_ASSIGNMENT",
	40:  "INVALID_CONFIG",
	41:  "NOT_CONTROLLER",
	42:  "INVALID_REQUEST",
	43:  "UNSUPPORTED_FOR_MESSAGE_FORMAT",
	44:  "POLICY_VIOLATION",
	45:  "OUT_OF_ORDER_SEQUENCE_NUMBER",
	46:  "DUPLICATE_SEQUENCE_NUMBER",
	47:  "INVALID_PRODUCER_EPOCH",
	48:  "INVALID_TXN_STATE",
	49:  "INVALID_PRODUCER_ID_MAPPING",
	50:  "INVALID_TRANSACTION_TIMEOUT",
	51:  "CONCURRENT_TRANSACTIONS",
	52:  "TRANSACTION_COORDINATOR_FENCED",
	53:  "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
	54:  "SECURITY_DISABLED",
	55:  "OPERATION_NOT_ATTEMPTED",
	56:  "KAFKA_STORAGE_ERROR",
	57:  "LOG_DIR_NOT_FOUND",
	58:  "SASL_AUTHENTICATION_FAILED",
	59:  "UNKNOWN_PRODUCER_ID",
	60:  "REASSIGNMENT_IN_PROGRESS",
	61:  "DELEGATION_TOKEN_AUTH_DISABLED",
	62:  "DELEGATION_TOKEN_NOT_FOUND",
	63:  "DELEGATION_TOKEN_OWNER_MISMATCH",
	64:  "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
	65:  "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
	66:  "DELEGATION_TOKEN_EXPIRED",
	67:  "INVALID_PRINCIPAL_TYPE",
	68:  "NON_EMPTY_GROUP",
	69:  "GROUP_ID_NOT_FOUND",
	70:  "FETCH_SESSION_ID_NOT_FOUND",
	71:  "INVALID_FETCH_SESSION_EPOCH",
	72:  "LISTENER_NOT_FOUND",
	73:  "TOPIC_DELETION_DISABLED",
	74:  "FENCED_LEADER_EPOCH",
	75:  "UNKNOWN_LEADER_EPOCH",
	76:  "UNSUPPORTED_COMPRESSION_TYPE",
	77:  "STALE_BROKER_EPOCH",
	78:  "OFFSET_NOT_AVAILABLE",
	79:  "MEMBER_ID_REQUIRED",
	80:  "PREFERRED_LEADER_NOT_AVAILABLE",
	81:  "GROUP_MAX_SIZE_REACHED",
	82:  "FENCED_INSTANCE_ID",
	83:  "ELIGIBLE_LEADERS_NOT_AVAILABLE",
	84:  "ELECTION_NOT_NEEDED",
	85:  "NO_REASSIGNMENT_IN_PROGRESS",
	86:  "GROUP_SUBSCRIBED_TO_TOPIC",
	87:  "INVALID_RECORD",
	88:  "UNSTABLE_OFFSET_COMMIT",
	89:  "THROTTLING_QUOTA_EXCEEDED",
	90:  "PRODUCER_FENCED",
	91:  "RESOURCE_NOT_FOUND",
	92:  "DUPLICATE_RESOURCE",
	93:  "UNACCEPTABLE_CREDENTIAL",
	94:  "INCONSISTENT_VOTER_SET",
	95:  "INVALID_UPDATE_VERSION",
	96:  "FEATURE_UPDATE_FAILED",
	97:  "PRINCIPAL_DESERIALIZATION_FAILURE",
	98:  "SNAPSHOT_NOT_FOUND",
	99:  "POSITION_OUT_OF_RANGE",
	100: "UNKNOWN_TOPIC_ID",
	101: "DUPLICATE_BROKER_REGISTRATION",
	102: "BROKER_ID_NOT_REGISTERED",
	103: "INCONSISTENT_TOPIC_ID",
	104: "INCONSISTENT_CLUSTER_ID",
	105: "TRANSACTIONAL_ID_NOT_FOUND",
	106: "FETCH_SESSION_TOPIC_ID_ERROR",
	107: "INELIGIBLE_REPLICA",
	108: "NEW_LEADER_ELECTED",
	109: "OFFSET_MOVED_TO_TIERED_STORAGE",
	110: "FENCED_MEMBER_EPOCH",
	111: "UNRELEASED_INSTANCE_ID",
	112: "UNSUPPORTED_ASSIGNOR",
	113: "STALE_MEMBER_EPOCH",
	114: "MISMATCHED_ENDPOINT_TYPE",
	115: "UNSUPPORTED_ENDPOINT_TYPE",
	116: "UNKNOWN_CONTROLLER_ID",
	117: "UNKNOWN_SUBSCRIPTION_ID",
	118: "TELEMETRY_TOO_LARGE",
	119: "INVALID_REGISTRATION",
	120: "TRANSACTION_ABORTABLE",
	121: "INVALID_RECORD_STATE",
	122: "SHARE_SESSION_NOT_FOUND",
	123: "INVALID_SHARE_SESSION_EPOCH",
	124: "FENCED_STATE_EPOCH",
	125: "INVALID_VOTER_KEY",
	126: "DUPLICATE_VOTER",
	127: "VOTER_NOT_FOUND",
	128: "INVALID_REGULAR_EXPRESSION",
	129: "REBOOTSTRAP_REQUIRED",
	130: "STREAMS_INVALID_TOPOLOGY",
	131: "STREAMS_INVALID_TOPOLOGY_EPOCH",
	132: "STREAMS_TOPOLOGY_FENCED",
	133: "SHARE_SESSION_LIMIT_REACHED",
	134: "GROUP_DELETION_FAILED",
	135: "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED",
	136: "CONTROLLER_ID_NOT_REGISTERED",
}
