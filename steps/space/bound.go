package space

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// groupsUnread is the error when topic's groups cannot all be read: a
// group left out (its coordinator loading or down) may be behind every
// group read, so no bound holds and DeleteRecords is refused.
func groupsUnread(topic string, err error, what string) error {
	if errors.Is(err, ports.ErrGroupsIncomplete) {
		return fmt.Errorf("%w: consumer groups of %s: %w: a group not read may be behind every group read, so no DeleteRecords bound holds; %s. Run again (or `kremedy resume`) once its coordinator answers (kafka-consumer-groups.sh --describe --group G shows its offsets)", steps.ErrRefused, topic, err, what)
	}
	return fmt.Errorf("consumer groups of %s: %w; %s", topic, err, what)
}

// Bound is how far DeleteRecords may go on one partition: the lowest
// offset any consumer group committed on it, never past the log end
// (end: the high watermark; -1 when the leader cannot say yet, and Kafka
// refuses DeleteRecords past it anyway) and never below the log start. ok is
// false when nothing may be deleted, with why:
//   - no group committed on the topic: nothing says what was read;
//   - a group that uses the topic has no commit on this partition: it has
//     read nothing of it (or reads from wherever auto.offset.reset says);
//   - the lowest commit is at or below the log start.
func Bound(groups []ports.GroupUse, p int32, start, end int64) (before int64, ok bool, why string) {
	if len(groups) == 0 {
		return start, false, "no consumer group has committed on the topic: nothing says which records were read"
	}
	low, who := int64(-1), ""
	var named []string
	for _, g := range groups {
		o, has := g.Offsets[p]
		if !has {
			return start, false, fmt.Sprintf("group %s uses the topic but has no committed offset on partition %d: it may not have read any of it", g.Group, p)
		}
		named = append(named, fmt.Sprintf("%s at %d", g.Group, o))
		if low < 0 || o < low {
			low, who = o, g.Group
		}
	}
	sort.Strings(named)
	if end >= 0 && low > end {
		// Every group committed past the end (an unclean election cut the
		// log): Kafka refuses DeleteRecords past its high watermark.
		if end <= start {
			return start, false, fmt.Sprintf("every group committed past the log end %d (%s), which is not above the log start %d", end, strings.Join(named, ", "), start)
		}
		return end, true, fmt.Sprintf("the log end %d: every group committed past it (%s)", end, strings.Join(named, ", "))
	}
	if low <= start {
		return start, false, fmt.Sprintf("the lowest committed offset (%s) is not above the log start %d: every record left is still to be read by some group (%s)", who, start, strings.Join(named, ", "))
	}
	return low, true, fmt.Sprintf("lowest committed offset %d (group %s; %s)", low, who, strings.Join(named, ", "))
}

// StillBound re-checks a planned bound against the groups now: false with
// why when a group committed below it since (a reset offset, a new group).
func StillBound(groups []ports.GroupUse, p int32, before int64) (bool, string) {
	if len(groups) == 0 {
		return false, "no consumer group has a commit on the topic any more"
	}
	for _, g := range groups {
		o, has := g.Offsets[p]
		if !has {
			return false, fmt.Sprintf("group %s now uses the topic with no commit on partition %d", g.Group, p)
		}
		if o < before {
			return false, fmt.Sprintf("group %s is now at offset %d, below the planned %d", g.Group, o, before)
		}
	}
	return true, ""
}
