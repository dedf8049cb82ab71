// Package kafkaver parses Kafka release and inter.broker.protocol.version
// strings ("2.8.2", "2.7", "2.7-IV2", "3.9-IV0") and answers the version
// questions kremedy asks: does this release run ZooKeeper mode, does it
// have topic IDs, does it refuse a stale directory.
package kafkaver

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a Kafka version. Patch is -1 when the string had none (IBPs
// such as "2.7" or "2.7-IV2").
type Version struct {
	Major, Minor, Patch int
	// IV is an IBP's internal version suffix ("IV2"), "" when none.
	IV string
}

// Parse reads "M.m", "M.m.p" or "M.m-IVn" (and "0.10.2" style, whose
// major is 0).
func Parse(s string) (Version, error) {
	v := Version{Patch: -1}
	s = strings.TrimSpace(s)
	body, iv, _ := strings.Cut(s, "-")
	v.IV = iv
	parts := strings.Split(body, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("%q is not a Kafka version (expected e.g. 2.8.2, 2.7 or 2.7-IV2)", s)
	}
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Version{}, fmt.Errorf("%q is not a Kafka version (expected e.g. 2.8.2, 2.7 or 2.7-IV2)", s)
		}
		nums[i] = n
	}
	v.Major, v.Minor = nums[0], nums[1]
	if len(nums) == 3 {
		v.Patch = nums[2]
	}
	// "0.10.2" is release 0.10.2: major.minor = 0.10, patch 2.
	return v, nil
}

// MustParse is Parse for constants.
func MustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

func (v Version) String() string {
	s := fmt.Sprintf("%d.%d", v.Major, v.Minor)
	if v.Patch >= 0 {
		s += fmt.Sprintf(".%d", v.Patch)
	}
	if v.IV != "" {
		s += "-" + v.IV
	}
	return s
}

// AtLeast compares major.minor only.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// Before is !AtLeast.
func (v Version) Before(major, minor int) bool { return !v.AtLeast(major, minor) }

// Runnable says why a release cannot be a kremedy lab (or an operator's
// ZooKeeper-mode cluster kremedy supports): ZooKeeper mode ended with 3.9,
// and releases before 2.4 ship a ZooKeeper 3.4 client that cannot resolve
// addresses on Java 14 and later (apache/zookeeper PR #1509).
func (v Version) Runnable() error {
	switch {
	case v.AtLeast(4, 0):
		return fmt.Errorf("Kafka %s has no ZooKeeper mode (removed in 4.0); kremedy repairs ZooKeeper-mode clusters, 2.4 to 3.9", v)
	case v.Before(2, 4):
		return fmt.Errorf("Kafka %s ships a ZooKeeper 3.4 client that cannot resolve addresses on Java 14 and later; the lab runs 2.4 to 3.9", v)
	}
	return nil
}

// TopicIDs reports whether brokers of software sw with ibp (the zero
// Version: the software's default) assign and keep topic IDs: both must be
// at least 2.8 (KIP-516).
func TopicIDs(sw, ibp Version) bool {
	if ibp == (Version{}) {
		ibp = sw
	}
	return sw.AtLeast(2, 8) && ibp.AtLeast(2, 8)
}

// RefusesStaleLog reports whether a restarted broker refuses a directory
// whose partition.metadata names another topic ID (INCONSISTENT_TOPIC_ID):
// 3.0 and later with topic IDs. 2.8 only compared IDs with a log already
// attached to the Partition, so after a restart it adopts the directory
// (Partition.checkOrSetTopicId at 2.8; getOrCreateLog's check is 3.0's).
func RefusesStaleLog(sw, ibp Version) bool {
	return TopicIDs(sw, ibp) && sw.AtLeast(3, 0)
}

// KeepsDeletionQueued reports whether a controller of software sw keeps a
// topic in its deletion queue after its znodes were deleted by hand
// (ControllerContext.removeTopic only drops it from the queue since 2.7,
// commit 7867c24a40a): a topic recreated under that name then gets no
// leaders (its replicas cannot become NewReplica) until the controller
// moves.
func KeepsDeletionQueued(sw Version) bool { return sw.Before(2, 7) }
