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
// committed offset is past the elected log's end of a partition elected,
// each with the reset it needs (it resets nothing; each is a failed check,
// so the step says so until the group is reset), and the producers that
// still have a transaction open on one (DescribeProducers), each judged
// hanging or not by its coordinator (txns.go).
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
	var past, txns []string
	for _, t := range sortedKeys(byTopic) {
		groups, open, err := k.topic(ctx, env, t, byTopic[t])
		if err != nil {
			return p, err
		}
		past, txns = append(past, groups...), append(txns, open...)
	}
	p.Notes = append(p.Notes, past...)
	p.Notes = append(p.Notes, txns...)
	if len(past)+len(txns) > 0 {
		// kremedy keeps no client properties file (a secret never reaches
		// one it writes): the operator's own goes on each command.
		p.Notes = append(p.Notes, "the commands above reach the cluster as the Kafka CLI does: on a secured cluster (TLS, SASL) add --command-config with your own client properties file to each")
	}
	p.Notes = append(p.Notes, k.unread...)
	if !env.Preview() {
		if err := env.Save(steps.ReportKey+"Consumer groups past the new log end", append(append([]string{fmt.Sprintf("%d found (reported, not reset)", len(past))}, past...), k.unread...)); err != nil {
			return p, err
		}
		if err := env.Save(steps.ReportKey+"Open transactions on the elected partitions", append([]string{fmt.Sprintf("%d found (reported, not aborted)", len(txns))}, txns...)); err != nil {
			return p, err
		}
	}
	p.Summary = fmt.Sprintf("%d consumer group offsets past the new log ends, %d open transactions on the elected partitions (reported, not reset nor aborted)", len(past), len(txns))
	return p, nil
}

// topic looks at one topic's elected partitions: groups past the end, open
// transactions.
func (k *after) topic(ctx context.Context, env *steps.Env, t string, el []Elected) (groups, txns []string, err error) {
	ends, err := env.Kafka.EndOffsets(ctx, t)
	if err != nil {
		return nil, nil, fmt.Errorf("end offsets of %s: %w", t, err)
	}
	uses, err := env.Kafka.Groups(ctx, t)
	if errors.Is(err, ports.ErrGroupsIncomplete) { // report what was read, and say what was not
		k.unread = append(k.unread, fmt.Sprintf("consumer groups on %s: not every group read (%v): check those with kafka-consumer-groups.sh --describe --group G once their coordinator answers", t, err))
	} else if err != nil {
		return nil, nil, fmt.Errorf("consumer groups of %s: %w", t, err)
	}
	boot := strings.Join(env.Target.Bootstrap, ",")
	for _, g := range uses {
		for _, e := range el {
			at, ok := g.Offsets[e.Partition]
			if !ok {
				continue
			}
			cur, known := ends[e.Partition]
			if line, past := pastLine(g.Group, t, e, at, cur, known, boot); past {
				groups = append(groups, line)
				k.checks = append(k.checks, steps.Check{Name: fmt.Sprintf("group %s on %s-%d: committed past the elected log end, reset needed (kremedy resets nothing)", g.Group, t, e.Partition), Detail: line})
			}
		}
	}
	var parts []int32
	for _, e := range el {
		parts = append(parts, e.Partition)
	}
	txns, checks := openTxns(ctx, env, t, parts, boot)
	k.checks = append(k.checks, checks...)
	return groups, txns, nil
}

// pastLine says, for group committed at at on e's partition, whether it
// is past the elected log's end (e.End: the new leader's end when it was
// elected; the log end now cur when that is not known) and the reset it
// needs. Compared with the elected end, not the log end now: on a busy
// topic producers pass the old commit within seconds, and its consumers
// then silently skip the records between the elected end and their commit.
func pastLine(group, t string, e Elected, at, cur int64, known bool, boot string) (string, bool) {
	end := e.End
	if end < 0 { // a plan from the journal, without the figures
		if !known {
			return "", false
		}
		end = cur
	}
	if at <= end {
		return "", false
	}
	what := fmt.Sprintf("a fetch at %d gets OFFSET_OUT_OF_RANGE at once (the log ends at %d) and its auto.offset.reset decides: latest skips every record written since the election, earliest re-reads the whole partition", at, cur)
	if known && cur >= at {
		what = fmt.Sprintf("the log has grown past %d since the election (it ends at %d), so its consumers go on from there and silently skip offsets %d to %d, written since the election", at, cur, end, at-1)
	}
	return fmt.Sprintf("group %s is committed at %d on %s-%d, past its new end %d: it needs a reset to %d (%s; a group whose consumers already re-read from %d or earlier has lost nothing): with the group stopped, kafka-consumer-groups.sh --bootstrap-server %s --group %s --topic %s:%d --reset-offsets --to-offset %d --execute",
		group, at, t, e.Partition, end, end, what, end, boot, group, t, e.Partition, end), true
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
