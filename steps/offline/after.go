package offline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// after is offline-after: read-only. It names the consumer groups whose
// committed offset is now past the end of a partition elected, each with
// the reset it needs (it resets nothing), and the producers that still
// have a transaction open on one (DescribeProducers).
type after struct {
	o      afterOpts
	checks []steps.Check
	unread []string // topics whose groups were not all read
}

type afterOpts struct{}

func (k *after) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	p := &steps.Plan{NoOp: true}
	var el []Elected
	if _, err := env.Load(electedKey, &el); err != nil {
		return p, err
	}
	if len(el) == 0 && !env.Preview() {
		p.Summary = "no partition was elected: nothing to look at"
		return p, nil
	}
	byTopic := map[string][]Elected{}
	for _, e := range el {
		byTopic[e.Topic] = append(byTopic[e.Topic], e)
	}
	k.checks, k.unread = nil, nil
	var past []string
	for _, t := range sortedKeys(byTopic) {
		got, err := k.topic(ctx, env, t, byTopic[t])
		if err != nil {
			return p, err
		}
		past = append(past, got...)
	}
	p.Notes = append(p.Notes, past...)
	p.Notes = append(p.Notes, k.unread...)
	if !env.Preview() {
		if err := env.Save(steps.ReportKey+"Consumer groups past the new log end", append(append([]string{fmt.Sprintf("%d found (reported, not reset)", len(past))}, past...), k.unread...)); err != nil {
			return p, err
		}
	}
	p.Summary = fmt.Sprintf("%d consumer group offsets past the new log ends (reported, not reset)", len(past))
	return p, nil
}

// topic looks at one topic's elected partitions: groups past the end, open
// transactions.
func (k *after) topic(ctx context.Context, env *steps.Env, t string, el []Elected) ([]string, error) {
	ends, err := env.Kafka.EndOffsets(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", t, err)
	}
	groups, err := env.Kafka.Groups(ctx, t)
	if errors.Is(err, ports.ErrGroupsIncomplete) { // report what was read, and say what was not
		k.unread = append(k.unread, fmt.Sprintf("consumer groups on %s: not every group read (%v): check those with kafka-consumer-groups.sh --describe --group G once their coordinator answers", t, err))
	} else if err != nil {
		return nil, fmt.Errorf("consumer groups of %s: %w", t, err)
	}
	var out []string
	boot := strings.Join(env.Target.Bootstrap, ",")
	for _, g := range groups {
		for _, e := range el {
			at, ok := g.Offsets[e.Partition]
			end, known := ends[e.Partition]
			if !ok || !known || at <= end {
				continue
			}
			line := fmt.Sprintf("group %s is committed at %d on %s-%d, past its new end %d: it needs a reset to %d (it would otherwise wait for offsets the log no longer holds, then reset by its auto.offset.reset): with the group stopped, kafka-consumer-groups.sh --bootstrap-server %s --group %s --topic %s:%d --reset-offsets --to-offset %d --execute",
				g.Group, at, t, e.Partition, end, end, boot, g.Group, t, e.Partition, end)
			out = append(out, line)
			k.checks = append(k.checks, steps.Check{Name: fmt.Sprintf("group %s on %s-%d: past the end, reset needed", g.Group, t, e.Partition), OK: true, Detail: line})
		}
	}
	var parts []int32
	for _, e := range el {
		parts = append(parts, e.Partition)
	}
	prods, err := env.Kafka.Producers(ctx, t, parts, nil)
	switch {
	case err != nil:
		k.checks = append(k.checks, steps.Check{Name: "open transactions on " + t, OK: true, Detail: "not checked: " + err.Error() + "; run kafka-transactions.sh find-hanging --broker-id N on each leader"})
	default:
		n := 0
		for _, pu := range prods {
			if pu.TxnStart >= 0 {
				n++
				out = append(out, fmt.Sprintf("producer %d has a transaction open on %s-%d since offset %d: if its coordinator lost it, abort it: kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --start-offset %d", pu.ProducerID, t, pu.Partition, pu.TxnStart, boot, t, pu.Partition, pu.TxnStart))
			}
		}
		k.checks = append(k.checks, steps.Check{Name: "open transactions on " + t, OK: true, Detail: fmt.Sprintf("%d producers with a transaction open on the partitions elected (DescribeProducers)", n)})
	}
	return out, nil
}

func (k *after) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

func (k *after) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if k.checks == nil {
		if _, err := k.Plan(ctx, env); err != nil {
			return nil, err
		}
	}
	c := k.checks
	k.checks = nil
	return c, nil
}
