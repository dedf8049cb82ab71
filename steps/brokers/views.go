package brokers

import (
	"fmt"
	"slices"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps/ports"
)

// ViewDiff describes the first differences between two brokers' views.
func ViewDiff(a, b ports.BrokerView) string {
	var d []string
	if a.Controller != b.Controller {
		d = append(d, fmt.Sprintf("controller %d vs %d", a.Controller, b.Controller))
	}
	if !slices.Equal(a.Brokers, b.Brokers) {
		d = append(d, fmt.Sprintf("live brokers %s vs %s", fmt.Sprint(a.Brokers), fmt.Sprint(b.Brokers)))
	}
	for name, ta := range a.Topics {
		tb, ok := b.Topics[name]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("%s known to broker %d only", name, a.Broker))
		case ta.ID != tb.ID:
			d = append(d, fmt.Sprintf("%s topic id %s vs %s", name, ta.ID, tb.ID))
		case len(ta.Partitions) != len(tb.Partitions):
			d = append(d, fmt.Sprintf("%s partitions %d vs %d", name, len(ta.Partitions), len(tb.Partitions)))
		default:
			for p, pa := range ta.Partitions {
				pb := tb.Partitions[p]
				if pa.Leader != pb.Leader || pa.LeaderEpoch != pb.LeaderEpoch || !slices.Equal(pa.ISR, pb.ISR) {
					d = append(d, fmt.Sprintf("%s-%d leader %d/epoch %d isr %s vs leader %d/epoch %d isr %s", name, p, pa.Leader, pa.LeaderEpoch, fmt.Sprint(pa.ISR), pb.Leader, pb.LeaderEpoch, fmt.Sprint(pb.ISR)))
				}
			}
		}
	}
	for name := range b.Topics {
		if _, ok := a.Topics[name]; !ok {
			d = append(d, fmt.Sprintf("%s known to broker %d only", name, b.Broker))
		}
	}
	if len(d) == 0 {
		return ""
	}
	slices.Sort(d)
	return fmt.Sprintf("broker %d vs %d: %s", a.Broker, b.Broker, text.Summarize(d))
}
