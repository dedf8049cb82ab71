package roll

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// The parameter types of a roll, registered with the engine (the packs
// that roll import this one, and runbooks imports them, so every runbook
// reader knows them). A kind's option takes one by its type tag:
// `type:"brokers"` on a []int32, `type:"topics"` on a []string,
// `type:"batch"` on an int.
var (
	// TypeBrokers is broker ids, comma-separated; empty means every broker
	// (Roll.Only).
	TypeBrokers = steps.RegisterType("brokers", parseBrokers)
	// TypeTopics is topic names, comma-separated, or * for every one
	// (kafkazk.ParseTopics); empty means none (Roll.Accept).
	TypeTopics = steps.RegisterType("topics", kafkazk.ParseTopics)
	// TypeBatch is how many brokers a roll stops at once: 1 (one at a
	// time), N, or auto, read as BatchAuto (Roll.Batch).
	TypeBatch = steps.RegisterType("batch", parseBatch)
)

func parseBrokers(v string) ([]int32, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var ids []int32
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a list of broker ids such as 1,2,3 (empty: every broker)", v)
		}
		if slices.Contains(ids, int32(n)) {
			return nil, fmt.Errorf("%q names broker %d twice", v, n)
		}
		ids = append(ids, int32(n))
	}
	return ids, nil
}

func parseBatch(v string) (int, error) {
	if strings.TrimSpace(v) == "auto" {
		return BatchAuto, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not a batch size: 1 (one broker at a time), a number of brokers such as 3, or auto (the largest batches the stop-safety rule allows)", v)
	}
	return n, nil
}
