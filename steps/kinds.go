package steps

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// kindFactories are the step kinds runbooks may name.
var kindFactories = map[string]func(Info) Kind{
	"preflight":      func(Info) Kind { return &preflight{} },
	"detach-clients": func(Info) Kind { return &detach{} },
	"delete-znodes":  func(Info) Kind { return &deleteZnodes{} },
	"stop-brokers":   func(Info) Kind { return &stopBrokers{} },
	"wipe-segments":  func(Info) Kind { return &wipeSegments{} },
	"start-brokers":  func(Info) Kind { return &startBrokers{} },
	"verify-topic":   func(Info) Kind { return &verifyTopic{} },
}

// KindNames lists the step kinds, sorted.
func KindNames() []string {
	var out []string
	for k := range kindFactories {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NewStep builds a configured step of a known kind.
func NewStep(info Info) (Step, error) {
	f, ok := kindFactories[info.Kind]
	if !ok {
		return Step{}, fmt.Errorf("unknown step kind %q (known: %s)", info.Kind, strings.Join(KindNames(), ", "))
	}
	return Step{Info: info, Kind: f(info)}, nil
}

// cleanNoOp is the plan of a mutating step when preflight found the topic
// consistent everywhere: kremedy never deletes a healthy topic.
func (r *Run) cleanNoOp(step string) *Plan {
	return &Plan{Summary: fmt.Sprintf("%q is consistent on ZooKeeper, every broker and every disk: nothing to %s. kremedy does not touch a healthy topic.", r.Topic(), step), NoOp: true}
}

// registered lists the broker ids in /brokers/ids.
func (r *Run) registered(ctx context.Context) ([]int32, error) {
	kids, err := r.ZK.Children(ctx, BrokerIDsPath)
	if err != nil {
		if r.ZK.IsNoNode(err) {
			return nil, nil
		}
		return nil, err
	}
	var ids []int32
	for _, k := range kids {
		var id int32
		if _, err := fmt.Sscanf(k, "%d", &id); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// controller returns the active controller id, -1 when none.
func (r *Run) controller(ctx context.Context) (int32, error) {
	b, _, err := r.ZK.Get(ctx, ControllerPath)
	if err != nil {
		if r.ZK.IsNoNode(err) {
			return -1, nil
		}
		return -1, err
	}
	var z ControllerZNode
	if err := DecodeZNode(r.ZK.Chroot()+ControllerPath, b, &z); err != nil {
		return -1, err
	}
	return z.BrokerID, nil
}

// brokerAddr reads a broker's listener from its registration.
func (r *Run) brokerAddr(ctx context.Context, id int32) string {
	b, _, err := r.ZK.Get(ctx, fmt.Sprintf("%s/%d", BrokerIDsPath, id))
	if err != nil {
		if a := r.Facts.Addrs[id]; a != "" {
			return a
		}
		if h, ok := r.Target.Host(id); ok {
			return h.Addr
		}
		return ""
	}
	var reg BrokerRegistration
	if DecodeZNode("", b, &reg) != nil {
		return ""
	}
	return reg.Addr()
}

// exists is Exists without the stat.
func (r *Run) exists(ctx context.Context, p string) (bool, error) {
	ok, _, err := r.ZK.Exists(ctx, p)
	return ok, err
}

func (r *Run) hostIDs() []int32 {
	var ids []int32
	for _, h := range r.Target.Hosts {
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	return ids
}

func i32s(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(s, " ") + "]"
}
