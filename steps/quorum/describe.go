package quorum

import "fmt"

// frameVersion is MetadataRecordSerde's frame version
// (AbstractApiMessageSerde.DEFAULT_FRAME_VERSION).
const frameVersion = 1

// describe names a metadata record's value and decodes the fields the
// ledger shows, per Kafka's common/metadata/<Name>.json (3.9, 4.1).
func describe(d *Record, value []byte) error {
	r := &reader{b: value}
	fv := r.uvarint()
	key := r.uvarint()
	ver := r.uvarint()
	if r.err != nil {
		return fmt.Errorf("its frame: %w", r.err)
	}
	if fv != frameVersion {
		return fmt.Errorf("frame version %d, not %d", fv, frameVersion)
	}
	name, ok := recordNames[key]
	if !ok {
		name = fmt.Sprintf("metadata record apiKey %d", key)
	}
	d.Name = name
	switch key {
	case 2: // TopicRecord: Name string, TopicId uuid
		d.Topic, d.TopicID = r.compactString(), r.uuid()
		d.Detail = fmt.Sprintf("topic %s created (id %s)", d.Topic, d.TopicID)
	case 3: // PartitionRecord: PartitionId int32, TopicId uuid, Replicas []int32…
		d.Partition, d.TopicID = r.int32(), r.uuid()
		d.Detail = fmt.Sprintf("partition %d of topic id %s", d.Partition, d.TopicID)
	case 4: // ConfigRecord: ResourceType int8, ResourceName, Name, Value (nullable)
		// The value is never shown: a dynamic password config
		// (ssl.keystore.password, sasl.jaas.config) is kept in the
		// metadata log as it was set, and the ledger reaches the plan,
		// the journal and the report.
		typ, res, k, v := r.int8(), r.compactString(), r.compactString(), r.compactString()
		d.Detail = fmt.Sprintf("config %s of %s %q set (its value not shown)", k, configResource(typ), res)
		if v == "<null>" {
			d.Detail = fmt.Sprintf("config %s of %s %q removed", k, configResource(typ), res)
		}
	case 9: // RemoveTopicRecord: TopicId uuid
		d.TopicID = r.uuid()
		d.Detail = "topic id " + d.TopicID + " deleted"
	case 11: // UserScramCredentialRecord: Name string, CredentialInfos (never read: the secret)
		d.Detail = fmt.Sprintf("SCRAM credential of user %q set (its secret not shown)", r.compactString())
	case 22: // RemoveUserScramCredentialRecord: Name string, Mechanism int8
		d.Detail = fmt.Sprintf("SCRAM credential of user %q removed", r.compactString())
	case 15: // ProducerIdsRecord: BrokerId int32, BrokerEpoch int64, NextProducerId int64
		broker, _, next := r.int32(), r.int64(), r.int64()
		d.Detail = fmt.Sprintf("producer ids below %d handed out (block for broker %d): the recovered quorum may hand some out again", next, broker)
	case 18, 19: // (Remove)AccessControlEntryRecord: Id uuid, then (18) the binding
		id := r.uuid()
		if key == 19 {
			d.Detail = "ACL " + id + " removed"
			break
		}
		rt, res, pt, pr, host, op, perm := r.int8(), r.compactString(), r.int8(), r.compactString(), r.compactString(), r.int8(), r.int8()
		d.Detail = fmt.Sprintf("ACL %s: %s %s on %s %s:%q from host %q", id, pr, aclPerm(perm)+" "+aclOp(op), aclResource(rt), aclPattern(pt), res, host)
	default:
		return nil
	}
	if r.err != nil {
		return fmt.Errorf("%s v%d: %w", name, ver, r.err)
	}
	return nil
}

// configResource names ConfigResource.Type.
func configResource(t int8) string {
	switch t {
	case 2:
		return "topic"
	case 4:
		return "broker"
	case 8:
		return "broker logger"
	case 16:
		return "client metrics"
	case 32:
		return "group"
	}
	return fmt.Sprintf("resource type %d", t)
}

// aclResource, aclPattern, aclOp and aclPerm name ResourceType,
// PatternType, AclOperation and AclPermissionType.
func aclResource(t int8) string {
	return nameOr([]string{"unknown", "any", "topic", "group", "cluster", "transactional id", "delegation token", "user"}, t)
}

func aclPattern(t int8) string {
	return nameOr([]string{"unknown", "any", "match", "literal", "prefixed"}, t)
}

func aclOp(t int8) string {
	return nameOr([]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
		"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT"}, t)
}

func aclPerm(t int8) string { return nameOr([]string{"unknown", "any", "DENY", "ALLOW"}, t) }

func nameOr(names []string, t int8) string {
	if t >= 0 && int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("#%d", t)
}
